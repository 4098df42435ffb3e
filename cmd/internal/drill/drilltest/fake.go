// Package drilltest holds an in-memory lock service that misbehaves on
// demand, for the tests of the drill engine and of lockctl drill.
package drilltest

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// Locks is an in-memory lock service for drills: one holder per key,
// waiters poll, tokens grow. It can go down for a while, and, with
// ForgetLastRelease, its handoff loses the last release it answered, as a
// crash of an asynchronous active may: the key is held again by the
// released token until that grant's lease ends.
type Locks struct {
	Mu       sync.Mutex
	Next     uint64
	Held     map[string]uint64
	Down     bool
	Handoffs int

	ForgetLastRelease bool
	Ghost             bool                     // handoff grants the last released key to nobody
	Leases            map[uint64]time.Duration // lease of each grant
	Expires           map[string]time.Time     // when a forgotten holder's lease ends
	LastKey           string                   // the last release answered ok
	LastToken         uint64
	Forgot            uint64        // the token handoff re-held, or granted to nobody
	Outage            time.Duration // how long a handoff takes; 30ms unless set
}

// holder is the token holding key, if any, once a forgotten holder's
// lease ended. f.Mu is held.
func (f *Locks) holder(key string) (uint64, bool) {
	if end, ok := f.Expires[key]; ok && !time.Now().Before(end) {
		delete(f.Expires, key)
		delete(f.Held, key)
	}
	tok, ok := f.Held[key]
	return tok, ok
}

func (f *Locks) Acquire(ctx context.Context, key string, lease, wait time.Duration) (client.Lock, error) {
	for {
		f.Mu.Lock()
		if f.Down {
			f.Mu.Unlock()
			return client.Lock{}, client.ErrUnavailable
		}
		if _, ok := f.holder(key); !ok {
			f.Next++
			f.Held[key] = f.Next
			if f.Leases != nil {
				f.Leases[f.Next] = lease
			}
			tok := f.Next
			f.Mu.Unlock()
			return client.Lock{Key: key, Token: tok, Lease: lease}, nil
		}
		f.Mu.Unlock()
		select {
		case <-ctx.Done():
			return client.Lock{}, ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

func (f *Locks) Release(ctx context.Context, key string, token uint64) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if tok, ok := f.holder(key); !ok || tok != token {
		return client.ErrNotHeld
	}
	delete(f.Held, key)
	f.LastKey, f.LastToken = key, token
	return nil
}

func (f *Locks) Queue(ctx context.Context, key string) (proto.Queue, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Down {
		return proto.Queue{}, client.ErrUnavailable
	}
	tok, ok := f.holder(key)
	if !ok {
		return proto.Queue{Key: key}, nil
	}
	return proto.Queue{Key: key, Held: true, Token: tok, Holders: []proto.QueueHolder{{Token: tok}}}, nil
}

func (f *Locks) Handoff(ctx context.Context, to string) (string, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Handoffs++
	if f.ForgetLastRelease && f.LastToken != 0 {
		// The release is forgotten, and with it whatever grant of the
		// key followed: replication is in order.
		f.Held[f.LastKey] = f.LastToken
		f.Expires[f.LastKey] = time.Now().Add(f.Leases[f.LastToken])
		f.Forgot = f.LastToken
	}
	if f.Ghost && f.LastToken != 0 {
		// A grant whose answer went with the old active: the key is
		// held, by a token no client was given.
		f.Next++
		f.Held[f.LastKey] = f.Next
		f.Expires[f.LastKey] = time.Now().Add(f.Leases[f.LastToken])
		f.Forgot = f.Next
	}
	f.Down = true
	outage := cmp.Or(f.Outage, 30*time.Millisecond)
	go func() {
		time.Sleep(outage)
		f.Mu.Lock()
		f.Down = false
		f.Mu.Unlock()
	}()
	return "b:1", nil
}
