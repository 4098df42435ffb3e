package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// lostError is ErrLost: a type of its own rather than fmt.Errorf, so
// that a program's start-up formats nothing for it.
type lostError struct{}

func (lostError) Error() string { return "the lock was lost: " + ErrNotHeld.Error() }
func (lostError) Unwrap() error { return ErrNotHeld }

// Why a Held is done; Held.Err wraps one of them.
var (
	// ErrLost: lockd answered that the token no longer holds the key (its
	// lease ran out on the node, the lock was broken, or a node that
	// never knew the grant took over), or refused the renewal. It wraps
	// ErrNotHeld.
	ErrLost error = lostError{}
	// ErrExpired: no renewal was acknowledged before the lease ended, so
	// the lock can no longer be proven held: lockd may have given it to
	// someone else. It may still be held (a node that is frozen or out
	// of reach), which nobody can know from here.
	ErrExpired = errors.New("the lease ended before a renewal was acknowledged")
	// ErrReleased: Held.Release was called.
	ErrReleased = errors.New("the lock was released")
	// ErrMaxHold: the hold reached its MaxHold and its last lease ended.
	ErrMaxHold = errors.New("the hold reached its MaxHold")
	// ErrLeaseTooShort: Hold (or Campaign) was asked for a lease shorter
	// than MinHoldLease, which no failover would leave held. Nothing was
	// sent.
	ErrLeaseTooShort = errors.New("too short to be renewed across a failover")
)

// MinHoldLease is the shortest lease Hold takes: twice
// Options.FailureTimeout. A held lock stays held only while a renewal
// lands within each lease; when the active node fails, the client
// notices within about a failure timeout (at once for a process that
// died, up to one and a half for one that froze), the cluster promotes
// another node within about one, and the renewal must reach it before
// the lease ends. A shorter lease is lost in any failover, and a lease
// of a few milliseconds is more often a unit mistaken than a choice.
func (c *Client) MinHoldLease() time.Duration { return MinHoldLeaseFor(c.opts.FailureTimeout) }

// MinHoldLeaseFor is MinHoldLease for a client whose
// Options.FailureTimeout is failureTimeout.
func MinHoldLeaseFor(failureTimeout time.Duration) time.Duration { return 2 * failureTimeout }

// Held is a lock that renews itself until it is released or lost. Get
// one with Client.Hold. Its methods are safe for concurrent use.
//
// Done is closed the moment the lock can no longer be proven held: when
// the lease that the last acknowledged renewal started (counted from the
// moment that renewal was sent, the earliest the node may have started
// it) ends, when lockd says the token no longer holds the key, when
// MaxHold is reached, or when Release is called. Whatever the lock
// protects must then stop: another client may be granted it from that
// instant on. A process that is itself frozen past its lease (a GC
// pause, SIGSTOP, a suspended VM) cannot notice in time; the fencing
// token is what stops it from doing harm: the protected resource refuses
// a token smaller than the largest it has seen.
type Held struct {
	c     *Client
	lock  Lock
	lease time.Duration
	capAt time.Time // the MaxHold deadline; zero when none

	ctx    context.Context // cancelled with the reason the hold ended
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	expires time.Time   // the end of the lease the last acknowledged renewal started
	timer   *time.Timer // fires at expires
	lastErr error       // why the last renewal failed, nil after a success
	capped  bool        // the last renewal asked for what was left of MaxHold

	loopDone chan struct{}
	relOnce  sync.Once
	relErr   error
}

// Hold acquires key (see AcquireWith; without a Wait option it waits
// until ctx ends; either way through an outage) and then keeps it: it renews
// the lease in the background every third of lease, retrying a renewal
// that fails for as long as the lease lasts, until Release, a loss,
// MaxHold or Close. ctx bounds the acquire only; the hold lives on after
// it ends. A lease shorter than MinHoldLease is refused with an error
// matching ErrLeaseTooShort.
//
// The lease can only be proven from the moment a request was sent: a
// grant that came after a long wait (more than a third of lease) is
// confirmed with a renewal before Hold returns, so that a fresh Held
// always has most of a lease ahead of it.
func (c *Client) Hold(ctx context.Context, key string, lease time.Duration, opts ...AcquireOption) (*Held, error) {
	o, err := gatherOptions("hold", key, opts)
	if err != nil {
		return nil, err
	}
	if err := c.checkHoldLease(key, lease); err != nil {
		return nil, err
	}
	first, err := firstLease(key, lease, o)
	if err != nil {
		return nil, err
	}
	asked := time.Now() // the lease cannot have started before
	lock, err := c.AcquireWith(ctx, key, first, 0, opts...)
	if err != nil {
		return nil, err
	}
	return c.keep(ctx, lock, lease, first, asked, o)
}

// firstLease is the lease the acquire of a hold asks for: lease, or less
// when MaxHold ends sooner.
func firstLease(key string, lease time.Duration, o acquireOptions) (time.Duration, error) {
	if o.maxHold <= 0 {
		return lease, nil
	}
	if o.maxHold < time.Millisecond {
		return 0, argErrorf("hold %s: MaxHold %s is shorter than the shortest lease, 1ms", key, o.maxHold)
	}
	return min(lease, o.maxHold), nil
}

// checkHoldLease refuses a lease Hold could not keep through a failover.
func (c *Client) checkHoldLease(key string, lease time.Duration) error {
	if err := checkLease("hold", key, lease); err != nil {
		return err
	}
	if least := c.MinHoldLease(); lease < least {
		return argErrorf("hold %s: lease %s is %w: the shortest is %s (twice the failure timeout, %s); give a lease of at least %s, or, if the cluster runs a shorter --failure-timeout, give Options.FailureTimeout the same",
			key, lease, ErrLeaseTooShort, least, c.opts.FailureTimeout, least)
	}
	return nil
}

// keep starts renewing lock, granted for first by an acquire sent at
// asked, every third of lease: the Held of Hold.
func (c *Client) keep(ctx context.Context, lock Lock, lease, first time.Duration, asked time.Time, o acquireOptions) (*Held, error) {
	key := lock.Key
	var err error
	lock.Lease = lease
	h := &Held{c: c, lock: lock, lease: lease, loopDone: make(chan struct{})}
	if o.maxHold > 0 {
		h.capAt = asked.Add(o.maxHold)
	}
	h.ctx, h.cancel = context.WithCancelCause(context.Background())
	start := asked
	if got := time.Now(); got.Sub(asked) > lease/3 {
		start, err = c.confirm(ctx, lock, first, got)
		if err != nil {
			h.cancel(err)
			c.releaseLater(key, lock.Token, "lockd released a lock its hold could not confirm")
			return nil, err
		}
	}
	h.expires = start.Add(first)
	h.capped = first < lease
	h.timer = time.AfterFunc(time.Until(h.expires), h.expire)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		h.end(fmt.Errorf("hold %s token %d: %w", key, lock.Token, ErrClosed))
		close(h.loopDone)
		return nil, callErr("hold", key, ErrClosed)
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go h.renew(start)
	return h, nil
}

// confirm renews a lock whose grant may be older than the answer that
// brought it, and returns when that renewal was sent. got is when the
// grant arrived: the grant's lease ends by got plus lease at the latest.
func (c *Client) confirm(ctx context.Context, lock Lock, lease time.Duration, got time.Time) (time.Time, error) {
	end := got.Add(lease)
	retry := renewRetry(lease)
	for {
		sent := time.Now()
		if !sent.Before(end) {
			return time.Time{}, fmt.Errorf("hold %s token %d: %w: the grant came after a long wait and no renewal confirming it was acknowledged within its lease", lock.Key, lock.Token, ErrExpired)
		}
		rctx, cancel := context.WithDeadline(ctx, end)
		err := c.Renew(rctx, lock.Key, lock.Token, lease)
		cancel()
		var se *ServerError
		switch {
		case err == nil:
			return sent, nil
		case ctx.Err() != nil:
			return time.Time{}, ctx.Err()
		case errors.Is(err, ErrNotHeld), errors.As(err, &se):
			return time.Time{}, fmt.Errorf("hold %s token %d: %w (%w)", lock.Key, lock.Token, ErrLost, err)
		case errors.Is(err, ErrClosed):
			return time.Time{}, err
		}
		t := time.NewTimer(retry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return time.Time{}, ctx.Err()
		}
	}
}

// renewRetry is how soon a renewal that failed is tried again: soon, but
// not in a tight loop.
func renewRetry(lease time.Duration) time.Duration {
	return min(max(lease/30, 10*time.Millisecond), time.Second)
}

// releaseLater gives back a lock nobody will use, without making the
// caller wait for it, and logs why (the log's message).
func (c *Client) releaseLater(key string, token uint64, why string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		err := c.ReleaseToken(c.ctx, key, token)
		c.log.Info(why, "key", key, "token", token, "err", err)
	}()
}

// renew is the background loop: one renewal every third of the lease,
// counted from the send of the last one acknowledged (start, at first).
func (h *Held) renew(start time.Time) {
	defer h.c.wg.Done()
	defer close(h.loopDone)
	key, token := h.lock.Key, h.lock.Token
	every, retry := h.lease/3, renewRetry(h.lease)
	t := time.NewTimer(time.Until(start.Add(every)))
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.c.ctx.Done():
			h.end(fmt.Errorf("hold %s token %d: %w", key, token, ErrClosed))
			return
		case <-t.C:
		}
		h.mu.Lock()
		end, capped := h.expires, h.capped
		h.mu.Unlock()
		if capped {
			// The last lease asked for ran to MaxHold: let it end.
			<-h.ctx.Done()
			return
		}
		sent := time.Now()
		lease := h.lease
		if !h.capAt.IsZero() {
			lease = min(lease, h.capAt.Sub(sent))
		}
		if lease < time.Millisecond {
			h.mu.Lock()
			h.capped = true
			h.mu.Unlock()
			<-h.ctx.Done()
			return
		}
		// A renewal acknowledged after the lease ended proves nothing.
		rctx, cancel := context.WithDeadline(h.ctx, end)
		err := h.c.Renew(rctx, key, token, lease)
		cancel()
		if h.ctx.Err() != nil {
			return
		}
		var se *ServerError
		switch {
		case err == nil:
			h.extend(sent.Add(lease), lease < h.lease)
			t.Reset(time.Until(sent.Add(every)))
			continue
		case errors.Is(err, ErrNotHeld):
			h.end(fmt.Errorf("hold %s token %d: %w: lockd says the token no longer holds the key (its lease ran out on the node, it was broken, or a node that never saw the grant took over)", key, token, ErrLost))
			return
		case errors.As(err, &se):
			h.end(fmt.Errorf("hold %s token %d: %w: lockd refused the renewal: %w", key, token, ErrLost, err))
			return
		case errors.Is(err, ErrClosed):
			h.end(fmt.Errorf("hold %s token %d: %w", key, token, ErrClosed))
			return
		}
		h.mu.Lock()
		h.lastErr = err
		h.mu.Unlock()
		t.Reset(retry)
	}
}

// proclaim renews the lock with a new value (Election.Proclaim). lockd
// saying the token no longer holds the key ends the hold; a refusal
// (of the value, by a node that does not read value=) does not, and the
// renewal loop goes on.
func (h *Held) proclaim(ctx context.Context, value string) error {
	key, token := h.lock.Key, h.lock.Token
	sent := time.Now()
	lease := h.lease
	if !h.capAt.IsZero() {
		lease = min(lease, h.capAt.Sub(sent))
	}
	if lease < time.Millisecond {
		return fmt.Errorf("proclaim %s: %w: the hold reached its MaxHold", key, ErrNotLeader)
	}
	err := h.c.renew(ctx, key, token, lease, value)
	switch {
	case err == nil:
		h.extend(sent.Add(lease), lease < h.lease)
		return nil
	case errors.Is(err, ErrNotHeld):
		lost := fmt.Errorf("hold %s token %d: %w: lockd says the token no longer holds the key", key, token, ErrLost)
		h.end(lost)
		return fmt.Errorf("proclaim %s: %w", key, lost)
	}
	var se *ServerError
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("proclaim %s: %w", key, err)
}

// extend moves the expiry to end after an acknowledged renewal.
func (h *Held) extend(end time.Time, capped bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = nil
	h.capped = capped
	if h.ctx.Err() != nil || !end.After(h.expires) {
		return
	}
	h.expires = end
	h.timer.Reset(time.Until(end))
}

// expire runs when the timer fires: the lease is over unless a renewal
// moved it on meanwhile.
func (h *Held) expire() {
	h.mu.Lock()
	if left := time.Until(h.expires); left > 0 {
		h.mu.Unlock()
		return // extend reset the timer
	}
	end, last, capped := h.expires, h.lastErr, h.capped
	h.mu.Unlock()
	key, token := h.lock.Key, h.lock.Token
	if capped {
		h.end(fmt.Errorf("hold %s token %d: %w: its last lease ended at %s", key, token, ErrMaxHold, end.Format(time.RFC3339Nano)))
		return
	}
	if last == nil {
		h.end(fmt.Errorf("hold %s token %d: %w at %s (no node answered in time); another client may hold the key now", key, token, ErrExpired, end.Format(time.RFC3339Nano)))
		return
	}
	h.end(fmt.Errorf("hold %s token %d: %w at %s; another client may hold the key now; the last renewal failed: %w", key, token, ErrExpired, end.Format(time.RFC3339Nano), last))
}

// end marks the hold done with err; the first reason stays.
func (h *Held) end(err error) {
	h.cancel(err)
	h.mu.Lock()
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
}

// Key is the key held.
func (h *Held) Key() string { return h.lock.Key }

// Token is the lock's fencing token: hand it to whatever the lock
// protects, which refuses a token smaller than the largest it has seen.
func (h *Held) Token() uint64 { return h.lock.Token }

// Lock is the grant: key, token, lease, limit and the acquire's id.
func (h *Held) Lock() Lock { return h.lock }

// Done is closed when the lock can no longer be proven held (see Held),
// or was released. Err then says why.
func (h *Held) Done() <-chan struct{} { return h.ctx.Done() }

// Err is nil while the lock is held; after Done it wraps ErrLost
// (and so ErrNotHeld), ErrExpired, ErrMaxHold, ErrReleased or ErrClosed.
// ErrLost from a refusal also wraps the node's *ServerError, and
// ErrExpired the last renewal's error when one failed.
func (h *Held) Err() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(h.ctx)
}

// Context is a context that is cancelled when Done is closed, with Err as
// its cause (context.Cause): pass it to the work the lock protects.
func (h *Held) Context() context.Context { return h.ctx }

// Expires is when the lock's lease ends unless renewed again, counted
// from the send of the last renewal acknowledged.
func (h *Held) Expires() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.expires
}

// Release stops the renewals, closes Done and gives the lock back (see
// Client.ReleaseToken). A hold already lost returns its Err; one that
// expired is released all the same, in case the node still counts it.
// Later calls return what the first returned.
func (h *Held) Release(ctx context.Context) error {
	h.relOnce.Do(func() {
		prior := h.Err()
		h.end(fmt.Errorf("hold %s token %d: %w", h.lock.Key, h.lock.Token, ErrReleased))
		<-h.loopDone
		if errors.Is(prior, ErrNotHeld) {
			h.relErr = prior
			return
		}
		h.relErr = h.c.ReleaseToken(ctx, h.lock.Key, h.lock.Token)
	})
	return h.relErr
}
