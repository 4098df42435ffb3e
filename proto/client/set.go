package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// MaxSetKeys is the most keys one AcquireAll, TryAcquireAll or HoldAll
// takes at once.
const MaxSetKeys = 16

// Locks is the grant of a set of keys: one Lock per key, in the order the
// keys were asked, each with its own token. Each key is then held alone:
// released, renewed and expired by its own token and lease.
type Locks []Lock

// Tokens are the fencing tokens of the keys, in order.
func (ls Locks) Tokens() []uint64 {
	t := make([]uint64, len(ls))
	for i, l := range ls {
		t[i] = l.Token
	}
	return t
}

// Release gives every key back (Lock.Release), all at once, and returns
// the errors of those that failed, joined.
func (ls Locks) Release(ctx context.Context) error {
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() { errs[i] = l.Release(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// AcquireAll waits for every one of keys (1 to MaxSetKeys distinct keys)
// and takes them all at once, or none: the request waits in every key's
// queue and is granted when every key admits it. Two AcquireAll over the
// same keys in any order never deadlock: lockd queues them in arrival
// order on every key. The options are those of AcquireWith and apply to
// every key (Shared takes them all as a reader); wait, the errors and a
// wait that runs out (no key is then held) are as for Acquire.
//
// The request is one line of at most proto.MaxLineLen (4096) bytes, its
// keys and id included: 16 keys near the longest (255 bytes) do not fit,
// and such a set is refused before anything is sent, with an error
// matching ErrInvalidArgument that says so.
func (c *Client) AcquireAll(ctx context.Context, keys []string, lease, wait time.Duration, opts ...AcquireOption) (Locks, error) {
	if err := checkKeys("acquire-all", keys); err != nil {
		return nil, err
	}
	return c.acquireKeys(ctx, "acquire-all", keys, lease, wait, false, opts)
}

// TryAcquireAll takes every one of keys if all are free now, and never
// waits: when one at least is held, none is taken and the error matches
// ErrHeld (and ErrTimeout). A Wait option is refused, as by TryAcquire.
func (c *Client) TryAcquireAll(ctx context.Context, keys []string, lease time.Duration, opts ...AcquireOption) (Locks, error) {
	if err := checkKeys("try-acquire-all", keys); err != nil {
		return nil, err
	}
	if o, err := gatherOptions("try-acquire-all", setLabel(keys), opts); err == nil && o.waitSet {
		return nil, argErrorf("try-acquire-all %s: Wait(%s) is not for TryAcquireAll, which never waits: to wait up to a time, use AcquireAll(ctx, keys, lease, 0, Wait(d))", setLabel(keys), o.wait)
	}
	return c.acquireKeys(ctx, "acquire-all", keys, lease, 0, true, opts)
}

// checkKeys refuses a set lockd would refuse: no key, more than
// MaxSetKeys, a key that is not one, or a key named twice.
func checkKeys(op string, keys []string) error {
	switch {
	case len(keys) == 0:
		return argErrorf("%s: no key given: give 1 to %d keys", op, MaxSetKeys)
	case len(keys) > MaxSetKeys:
		return argErrorf("%s: %d keys are too many: one request takes at most %d", op, len(keys), MaxSetKeys)
	}
	for i, k := range keys {
		if err := checkKey(op, k); err != nil {
			return err
		}
		for j := range i {
			if keys[j] == k {
				return argErrorf("%s: key %q is given twice (keys %d and %d of %d): name each key once", op, k, j+1, i+1, len(keys))
			}
		}
	}
	return nil
}

// setLabel names a set of keys in errors: its keys joined by '+', as Q's
// wset= word lists them.
func setLabel(keys []string) string { return strings.Join(keys, "+") }

// HeldSet is a set of keys that renews itself until it is released or
// lost: one Held per key, each renewing its own key with its own token.
// The loss of any key is the loss of the set: Done closes, Err says
// which key and why, and the other keys are released at once, so that
// nobody waits on the rest of a set that can no longer do its work. Get
// one with Client.HoldAll. Its methods are safe for concurrent use.
type HeldSet struct {
	c     *Client
	held  []*Held
	label string

	ctx    context.Context // cancelled with the reason the set ended
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	ended bool
	by    int // the key whose end ended the set; -1 when none did

	relOnce sync.Once
	relErr  error
}

// HoldAll acquires every one of keys at once, or none (see AcquireAll),
// and keeps them as Hold keeps one key: each key's lease is renewed in
// the background every third of lease (one renewal per key), until
// Release, the loss of one of them, MaxHold or Close. ctx bounds the
// acquire only. A lease shorter than MinHoldLease is refused with an
// error matching ErrLeaseTooShort.
func (c *Client) HoldAll(ctx context.Context, keys []string, lease time.Duration, opts ...AcquireOption) (*HeldSet, error) {
	if err := checkKeys("hold-all", keys); err != nil {
		return nil, err
	}
	label := setLabel(keys)
	o, err := gatherOptions("hold-all", label, opts)
	if err != nil {
		return nil, err
	}
	if err := c.checkHoldLease(label, lease); err != nil {
		return nil, err
	}
	first, err := firstLease(label, lease, o)
	if err != nil {
		return nil, err
	}
	asked := time.Now()
	locks, err := c.acquireKeys(ctx, "acquire-all", keys, first, 0, false, opts)
	if err != nil {
		return nil, err
	}
	s := &HeldSet{c: c, label: label, by: -1}
	for i, l := range locks {
		h, err := c.keep(ctx, l, lease, first, asked, o)
		if err != nil {
			// All or none: give back what is held.
			for _, k := range s.held {
				k.end(fmt.Errorf("hold %s token %d: %w", k.lock.Key, k.lock.Token, ErrReleased))
				<-k.loopDone
				c.releaseLater(k.lock.Key, k.lock.Token, "lockd released a key of a set whose other key could not be kept")
			}
			for _, r := range locks[i+1:] {
				c.releaseLater(r.Key, r.Token, "lockd released a key of a set whose other key could not be kept")
			}
			return nil, err
		}
		s.held = append(s.held, h)
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	for i, h := range s.held {
		context.AfterFunc(h.ctx, func() { s.keyEnded(i) })
	}
	return s, nil
}

// keyEnded runs when key i's hold ends: unless the set ended already, the
// set ends with that key's reason and the other keys are given back.
func (s *HeldSet) keyEnded(i int) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended, s.by = true, i
	s.mu.Unlock()
	h := s.held[i]
	s.cancel(fmt.Errorf("hold of %s: key %s ended the set: %w", s.label, h.lock.Key, h.Err()))
	for j, o := range s.held {
		if j == i {
			continue
		}
		if !s.c.background(func() { o.Release(s.c.ctx) }) {
			o.end(fmt.Errorf("hold %s token %d: %w", o.lock.Key, o.lock.Token, ErrClosed))
		}
	}
}

// background runs f in a goroutine that Close waits for, unless the
// client is closed already; it reports whether f runs.
func (c *Client) background(f func()) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// Keys are the keys held, in the order they were asked.
func (s *HeldSet) Keys() []string {
	k := make([]string, len(s.held))
	for i, h := range s.held {
		k[i] = h.lock.Key
	}
	return k
}

// Locks are the grants, one per key, in order.
func (s *HeldSet) Locks() Locks {
	ls := make(Locks, len(s.held))
	for i, h := range s.held {
		ls[i] = h.lock
	}
	return ls
}

// Tokens are the keys' fencing tokens, in order.
func (s *HeldSet) Tokens() []uint64 { return s.Locks().Tokens() }

// Key is the first key; Token and Lock are its token and grant, so that a
// set reads as a Held of its first key where one key is enough.
func (s *HeldSet) Key() string { return s.held[0].lock.Key }

// Token is the first key's fencing token.
func (s *HeldSet) Token() uint64 { return s.held[0].lock.Token }

// Lock is the first key's grant.
func (s *HeldSet) Lock() Lock { return s.held[0].lock }

// Held is each key's own hold, in order. Release the set, not these.
func (s *HeldSet) Held() []*Held { return append([]*Held(nil), s.held...) }

// Done is closed when one of the keys can no longer be proven held (see
// Held), or the set was released. Err then says why.
func (s *HeldSet) Done() <-chan struct{} { return s.ctx.Done() }

// Context is cancelled when Done is closed, with Err as its cause.
func (s *HeldSet) Context() context.Context { return s.ctx }

// Err is nil while every key is held. After Done it wraps the Err of the
// key whose hold ended first (ErrLost, ErrExpired, ErrMaxHold,
// ErrClosed: see Held.Err), in words that name the key, or ErrReleased
// after Release.
func (s *HeldSet) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// EndedBy is the grant of the key whose end ended the set, and true; it
// is false while the set is held, and when Release ended it.
func (s *HeldSet) EndedBy() (Lock, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by < 0 {
		return Lock{}, false
	}
	return s.held[s.by].lock, true
}

// Expires is when the first of the keys' leases ends unless renewed.
func (s *HeldSet) Expires() time.Time {
	var e time.Time
	for _, h := range s.held {
		if x := h.Expires(); e.IsZero() || x.Before(e) {
			e = x
		}
	}
	return e
}

// Release stops the renewals, closes Done and gives every key back, all
// at once. A set that was lost returns its Err (the other keys are given
// back all the same); otherwise it returns the first error of a key's
// release, in key order. Later calls return what the first returned.
func (s *HeldSet) Release(ctx context.Context) error {
	s.relOnce.Do(func() {
		s.mu.Lock()
		s.ended = true
		by := s.by
		s.mu.Unlock()
		prior := s.Err()
		s.cancel(fmt.Errorf("hold of %s: %w", s.label, ErrReleased))
		errs := make([]error, len(s.held))
		var wg sync.WaitGroup
		for i, h := range s.held {
			wg.Go(func() { errs[i] = h.Release(ctx) })
		}
		wg.Wait()
		if by >= 0 && errors.Is(prior, ErrNotHeld) {
			s.relErr = prior
			return
		}
		for _, err := range errs {
			if err != nil {
				s.relErr = err
				return
			}
		}
	})
	return s.relErr
}
