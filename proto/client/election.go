package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// DefaultElectionLease is an Election's lease when Election.Lease is 0:
// how long a leader that died without resigning keeps the role.
const DefaultElectionLease = 10 * time.Second

// ErrNoLeader: nobody leads the election now (Election.Leader).
var ErrNoLeader = errors.New("no leader")

// Election is a leader election on one key: the candidate that holds the
// key leads, the others wait in its FIFO queue, so when the leader
// resigns the next candidate leads at once, and when the leader dies its
// lease hands the role on. Observers see the leader's value (Leader,
// Observe) without campaigning. Build it on one Client; one Election
// campaigns for one candidate at a time.
//
// Leading is holding a lock: the *Held that Campaign returns renews the
// lease and closes Done the moment leadership can no longer be proven.
// A leader acts on its role only with its token (Held.Token) handed to
// whatever it leads, which refuses a smaller token than the largest it
// has seen: a deposed leader that has not noticed yet holds a smaller
// one.
type Election struct {
	c   *Client
	key string
	// Lease is how long the leader's lease lasts between renewals (0:
	// DefaultElectionLease): the longest a leader that died without
	// resigning keeps the role. Set it before the first Campaign; as for
	// Hold, it is at least Client.MinHoldLease.
	Lease time.Duration

	mu   sync.Mutex
	held *Held
}

// Leader is who leads an election: the value its leader campaigned with,
// and the token of its lock. A zero Leader (Token 0) is no leader.
type Leader struct {
	Value     string
	Token     uint64
	LeaseLeft time.Duration // as the node last said
	// Stale, from Observe, says that the observer lost the cluster: no
	// node has served it for Options.FailureTimeout, so this, the last
	// leader known, may have changed since. The next Leader that is not
	// Stale is who leads where the observer reached the cluster again.
	Stale bool
}

// NewElection returns the election on key; every candidate and
// observer of one election names the same key.
func NewElection(c *Client, key string) *Election {
	return &Election{c: c, key: key}
}

// Key is the election's key.
func (e *Election) Key() string { return e.key }

// Campaign blocks until this candidate leads, or ctx ends (the candidate
// then leaves the queue), waiting through an outage too (see "Outages"
// in the package comment). value is what observers see of this leader
// (an address, a hostname, a document): 1 to MaxValueLen bytes of UTF-8
// text, spaces included; "" is refused, as observers read it as no
// leader. Proclaim changes it. The returned Held is the leadership: it
// renews itself, its Done closes when leadership is lost, and Resign (or
// its Release) hands the role to the next candidate.
func (e *Election) Campaign(ctx context.Context, value string) (*Held, error) {
	if err := checkValue("campaign", e.key, value); err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.held != nil && e.held.Err() == nil {
		e.mu.Unlock()
		return nil, fmt.Errorf("campaign %s: this Election leads already (token %d); Resign first, or make another Election for another candidate", e.key, e.held.Token())
	}
	e.mu.Unlock()
	lease := e.Lease
	if lease <= 0 {
		lease = DefaultElectionLease
	}
	h, err := e.c.Hold(ctx, e.key, lease, AcquireOption{func(o *acquireOptions) { o.value = value }})
	if refusedValue(err) {
		// A node that does not read value= yet: observers of it read the
		// value from the name the acquire's id leads with, which carries
		// a value of one short word.
		if id, ok := idValue(value); ok {
			h, err = e.c.Hold(ctx, e.key, lease, AcquireOption{func(o *acquireOptions) { o.id = id }})
		} else {
			err = fmt.Errorf("campaign %s: the node does not read value= yet, and carries only a value of at most %d bytes without spaces in its stead: %w", e.key, maxIDValueLen, err)
		}
	}
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.held = h
	e.mu.Unlock()
	return h, nil
}

// maxIDValueLen is the longest value an acquire's id carries, beside
// '#' and a 64-bit random number in base 36 that make it unique.
const maxIDValueLen = proto.MaxIDLen - 1 - 13

// idValue is the id that carries value to a node that does not read
// value=, when value fits in one: VALUE#SUFFIX.
func idValue(value string) (string, bool) {
	if len(value) > maxIDValueLen {
		return "", false
	}
	for i := 0; i < len(value); i++ {
		if b := value[i]; b <= ' ' || b == 0x7f {
			return "", false
		}
	}
	var r [8]byte
	rand.Read(r[:])
	return value + string(proto.IDSep) + strconv.FormatUint(binary.BigEndian.Uint64(r[:]), 36), true
}

// refusedValue reports whether err is a node's refusal of the value=
// word: a node older than the word.
func refusedValue(err error) bool {
	var se *ServerError
	return errors.As(err, &se) && strings.Contains(se.Msg, `"value=`)
}

// ErrNotLeader: Proclaim was called on an Election that does not lead.
var ErrNotLeader = errors.New("this Election does not lead")

// Proclaim changes the value observers see of this leader, without
// giving the role up (etcd's Proclaim): Leader and Observe see the new
// value at once. value is as for Campaign. It also renews the lease. It
// fails with an error matching ErrNotLeader when this Election does not
// lead, and one matching ErrLost (and ErrNotHeld) when lockd says it no
// longer does: the Held that Campaign returned is then done too.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	if err := checkValue("proclaim", e.key, value); err != nil {
		return err
	}
	e.mu.Lock()
	h := e.held
	e.mu.Unlock()
	if h == nil || h.Err() != nil {
		return fmt.Errorf("proclaim %s: %w; Campaign first", e.key, ErrNotLeader)
	}
	return h.proclaim(ctx, value)
}

// Resign gives up the role, if this Election leads: the next candidate
// leads at once. It returns the error of the release (see
// Held.Release), nil when it did not lead.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	h := e.held
	e.held = nil
	e.mu.Unlock()
	if h == nil {
		return nil
	}
	err := h.Release(ctx)
	if errors.Is(err, ErrNotHeld) {
		return nil // deposed already: nothing left to give up
	}
	return err
}

// Leader returns who leads now, or an error matching ErrNoLeader when
// nobody does.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	q, err := e.c.QueueInfo(ctx, e.key)
	if err != nil {
		return Leader{}, err
	}
	l := leaderOf(q)
	if l.Token == 0 {
		return l, fmt.Errorf("election %s: %w", e.key, ErrNoLeader)
	}
	return l, nil
}

// leaderOf reads who leads from a key's state: the holder's value=, or,
// from a node that does not say it, the name its id leads with (where
// older clients put the value).
func leaderOf(q QueueInfo) Leader {
	if !q.Held {
		return Leader{}
	}
	l := Leader{Token: q.Token, LeaseLeft: q.LeaseLeft}
	for i, h := range q.Holders {
		if h.Token != q.Token {
			continue
		}
		l.Value = h.Name()
		if i < len(q.HolderInfo) && q.HolderInfo[i].Value != "" {
			l.Value = q.HolderInfo[i].Value
		}
	}
	return l
}

// Observe sends who leads now, then every change of leader or of its
// value (Proclaim; a zero Leader while nobody leads), until ctx ends; then it closes the
// channel. It follows the key with WatchEvents, which the node pushes on
// every change: nothing polls. A reader that falls behind gets the
// latest leader, not every one in between. When the watch loses the
// cluster, Observe sends the last leader known again with Stale set,
// and once it reaches the cluster again, who leads there (the same
// leader too). When the watch cannot be set up (no node reachable),
// Observe tries again every second.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader, 1)
	go func() {
		defer close(out)
		var last Leader
		first, stale := true, false
		for ctx.Err() == nil {
			events, err := e.c.WatchEvents(ctx, e.key)
			if err != nil {
				if errors.Is(err, ErrClosed) {
					return
				}
				e.c.log.Info("lockd election: watch failed, retrying", "key", e.key, "err", err)
				t := time.NewTimer(time.Second)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
				continue
			}
			for ev := range events {
				l := leaderOf(ev.Info)
				switch {
				case ev.Stale:
					l, stale = last, true
					l.Stale = true
				case !first && !stale && l.Token == last.Token && l.Value == last.Value:
					continue
				default:
					first, stale, last = false, false, l
				}
				// Keep only the newest leader for a slow reader.
				select {
				case <-out:
				default:
				}
				out <- l
			}
			if e.c.ctx.Err() != nil {
				return
			}
		}
	}()
	return out
}
