package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// DefaultElectionLease is an Election's lease when Election.Lease is 0:
// how long a leader that died without resigning keeps the role.
const DefaultElectionLease = 10 * time.Second

// MaxValueLen is the longest value a candidate may campaign with, in
// bytes: the value travels as the name part of its acquire's id
// (VALUE#SUFFIX, see proto's A), beside a random suffix that makes the
// id unique.
const MaxValueLen = proto.MaxIDLen - electionSuffixLen

// electionSuffixLen is '#' and a 64-bit random number in base 36.
const electionSuffixLen = 1 + 13

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
// in the package comment). value, up to MaxValueLen bytes without spaces
// or control characters, is what observers see of this leader (an
// address, a hostname). The returned Held is the leadership: it renews
// itself, its Done closes when leadership is lost, and Resign (or its
// Release) hands the role to the next candidate.
func (e *Election) Campaign(ctx context.Context, value string) (*Held, error) {
	if err := checkValue(e.key, value); err != nil {
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
	var r [8]byte
	rand.Read(r[:])
	id := value + string(proto.IDSep) + strconv.FormatUint(binary.BigEndian.Uint64(r[:]), 36)
	h, err := e.c.Hold(ctx, e.key, lease, AcquireOption{func(o *acquireOptions) { o.id = id }})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.held = h
	e.mu.Unlock()
	return h, nil
}

func checkValue(key, value string) error {
	if len(value) > MaxValueLen {
		return fmt.Errorf("campaign %s: a value of %d bytes is too long: at most %d bytes (an address, a name); keep more elsewhere under that name", key, len(value), MaxValueLen)
	}
	for i := 0; i < len(value); i++ {
		if b := value[i]; b <= ' ' || b == 0x7f {
			return fmt.Errorf("campaign %s: value %q has a space or control character at byte %d: a value is one word", key, value, i)
		}
	}
	return nil
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
	q, err := e.c.Queue(ctx, e.key)
	if err != nil {
		return Leader{}, err
	}
	l := leaderOf(q)
	if l.Token == 0 {
		return l, fmt.Errorf("election %s: %w", e.key, ErrNoLeader)
	}
	return l, nil
}

func leaderOf(q proto.Queue) Leader {
	if !q.Held {
		return Leader{}
	}
	l := Leader{Token: q.Token, LeaseLeft: q.LeaseLeft}
	for _, h := range q.Holders {
		if h.Token == q.Token {
			l.Value = h.Name()
		}
	}
	return l
}

// Observe sends who leads now, then every change of leader (a zero
// Leader while nobody leads), until ctx ends; then it closes the
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
				l := leaderOf(ev.Queue)
				switch {
				case ev.Stale:
					l, stale = last, true
					l.Stale = true
				case !first && !stale && l.Token == last.Token:
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
