package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// Acquire waits for key and returns the lock with its fencing token.
// The server keeps the lock for lease unless it is renewed or released;
// wait bounds the wait for the key (0 waits forever), counted from the
// moment the request is first sent, also when it has to move to another
// connection: the time spent connecting first does not eat into it.
//
// It returns an error matching ErrTimeout when the wait runs out, be it
// the wait's deadline or ctx's that ended it (the error matches
// context.DeadlineExceeded too, in both cases), a *ServerError when the
// node refuses the request, one wrapping ErrUnavailable when no node
// could be reached for the whole wait (it waits through an outage, see
// "Outages" in the package comment), and ctx.Err() when ctx is
// cancelled first; a grant that arrives after that is released at once.
func (c *Client) Acquire(ctx context.Context, key string, lease, wait time.Duration) (Lock, error) {
	return c.AcquireWith(ctx, key, lease, wait)
}

// AcquireWith is Acquire with options that change what is asked for:
// Limit(n) takes one of n places of a semaphore instead of a lock,
// Name(s) names this acquire to observers, Wait(d) replaces wait. With
// no option it is Acquire. A refusal because the key exists with another
// limit is a *ServerError that matches ErrLimitMismatch.
func (c *Client) AcquireWith(ctx context.Context, key string, lease, wait time.Duration, opts ...AcquireOption) (Lock, error) {
	return c.acquire(ctx, key, lease, wait, false, opts)
}

// ErrHeld: a TryAcquire found the key held by others (all the places of
// a semaphore taken). Nothing was queued. The error also matches
// ErrTimeout, as an acquire whose wait ran out does.
var ErrHeld = errors.New("the key is held by others")

// TryAcquire takes key if it is free now, and never waits in its queue
// (proto's try-lock, a wait of "-"): the node answers at once. When the
// key is held, the error matches ErrHeld (and ErrTimeout). Limit(n)
// takes one of n places, as for AcquireWith; a Wait option is refused
// (TryAcquire never waits); other errors are those of Acquire. One Client's TryAcquire is answered at once also while other
// goroutines of it wait on the same key.
func (c *Client) TryAcquire(ctx context.Context, key string, lease time.Duration, opts ...AcquireOption) (Lock, error) {
	if o, err := gatherOptions("try-acquire", key, opts); err == nil && o.waitSet {
		return Lock{}, argErrorf("try-acquire %s: Wait(%s) is not for TryAcquire, which never waits: to wait up to a time, use AcquireWith(ctx, key, lease, 0, Wait(d))", key, o.wait)
	}
	return c.acquire(ctx, key, lease, 0, true, opts)
}

// heldError is a TryAcquire's answer T.
type heldError struct {
	op    string // the call that asked: "acquire", "acquire-all"
	key   string
	limit int
}

func (e *heldError) Error() string {
	held := ErrHeld.Error()
	if e.limit > 1 {
		held += fmt.Sprintf(" (all %d places of the semaphore are taken)", e.limit)
	}
	if e.op != "acquire" {
		return "try-" + e.op + " " + e.key + ": " + held + " (one of the keys at least); nothing was queued or taken: try again later, or wait with AcquireAll"
	}
	return "try-acquire " + e.key + ": " + held + "; nothing was queued: try again later, or wait with Acquire"
}

func (e *heldError) Is(target error) bool { return target == ErrHeld || target == ErrTimeout }

func (c *Client) acquire(ctx context.Context, key string, lease, wait time.Duration, try bool, opts []AcquireOption) (Lock, error) {
	if err := checkKey("acquire", key); err != nil {
		return Lock{}, err
	}
	locks, err := c.acquireKeys(ctx, "acquire", []string{key}, lease, wait, try, opts)
	if err != nil {
		return Lock{}, err
	}
	return locks[0], nil
}

// acquireKeys sends one acquire of keys (a set when more than one: the
// first on the line, the others as key=K) and reads its grant, one token
// per key in order. The keys were checked.
func (c *Client) acquireKeys(ctx context.Context, op string, keys []string, lease, wait time.Duration, try bool, opts []AcquireOption) (Locks, error) {
	key, label := keys[0], setLabel(keys)
	if err := checkLease(op, label, lease); err != nil {
		return nil, err
	}
	o, err := gatherOptions(op, label, opts)
	if err != nil {
		return nil, err
	}
	if o.waitSet && !try {
		// Wait(0) is "do not wait": the try-lock, which never queues.
		wait, try = o.wait, o.wait <= 0
	}
	if wait < 0 || wait > proto.MaxSeconds*time.Second {
		return nil, argErrorf("%s %s: wait %s is out of range; pass 0 to wait forever, or up to %d seconds", op, label, wait, proto.MaxSeconds)
	}
	limit := o.limit
	req := request{op: proto.OpAcquire, key: key, more: keys[1:], lease: lease, wait: ceilMillis(wait), waitTotal: wait, limit: int32(limit),
		shared: o.shared, id: c.idFor(o), value: o.value, try: try}
	if err := checkLine(op, label, &req); err != nil {
		return nil, err
	}
	rctx := ctx
	if wait > 0 && !try {
		// The server answers T when the wait ends, but holds that answer
		// back behind an older acquire of the same key on the same
		// connection (answers to one (op, key) come in send order), and
		// other goroutines of this client may share the connection. So
		// the wait is also enforced here, a little after the server's
		// and after the time a connection may take to come up (a
		// FailureTimeout); a grant that still comes is released at once.
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, wait+acquireGrace+c.opts.FailureTimeout+wait/10)
		defer cancel()
	}
	a, cn, err := c.roundTrip(rctx, &req, true)
	// A wait that ran out while no node could be reached stays
	// ErrUnavailable: nobody said the key was busy.
	if errors.Is(err, errWaitElapsed) || (err != nil && !errors.Is(err, ErrUnavailable) && ctx.Err() == nil && rctx.Err() != nil) {
		return nil, timeoutErr(op, label, wait, limit)
	}
	if err != nil && !try && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// ctx's deadline ended the wait before the wait's own did: the
		// same outcome, the same error.
		return nil, ctxTimeoutErr(op, label, limit)
	}
	if err != nil {
		return nil, callErr(op, label, err)
	}
	switch a.Kind {
	case proto.OpAcquire:
		if g, ok := parseGrant(a, len(keys)); ok {
			locks := make(Locks, len(keys))
			for i, k := range keys {
				locks[i] = Lock{Key: k, Token: g.tokens[i], Lease: lease, Limit: limit, ID: req.id, Shared: o.shared, c: c}
			}
			locks[0].Place = g.place
			return locks, nil
		}
	case proto.KindTimeout:
		if try {
			return nil, &heldError{op, label, limit}
		}
		return nil, timeoutErr(op, label, wait, limit)
	}
	return nil, badAnswer(op, label, cn, a)
}

// grant is what an A answer grants: a token per key asked, in order, and
// a semaphore's place.
type grant struct {
	tokens []uint64
	place  int // 0 when the answer does not say
}

// parseGrant reads "A key TOKEN [TOKEN]... [place=P]", n tokens; words
// name=value it does not know are skipped, as the grammar asks.
func parseGrant(a proto.Answer, n int) (grant, bool) {
	var g grant
	f := a.Fields
	if len(f) < n {
		return g, false
	}
	g.tokens = make([]uint64, n)
	for i := range n {
		t, err := proto.ParseToken(f[i])
		if err != nil {
			return g, false
		}
		g.tokens[i] = t
	}
	for _, w := range f[n:] {
		name, val, ok := strings.Cut(w, "=")
		if !ok {
			return g, false // a token too many
		}
		if name == "place" {
			p, err := strconv.Atoi(val)
			if err != nil || p < 1 || p > proto.MaxLimit {
				return g, false
			}
			g.place = p
		}
	}
	return g, true
}

// Release is ReleaseToken.
//
// Deprecated: use Lock.Release (as Held.Release, it takes only a ctx), or
// ReleaseToken for a key and token kept elsewhere. Release had the name of
// those methods and another shape.
func (c *Client) Release(ctx context.Context, key string, token uint64) error {
	return c.ReleaseToken(ctx, key, token)
}

// Release gives the lock back (Client.ReleaseToken), so the next waiter
// is granted at once.
func (l Lock) Release(ctx context.Context) error {
	if l.c == nil {
		return fmt.Errorf("release %s token %d: this Lock was not returned by a Client's acquire; use Client.ReleaseToken", l.Key, l.Token)
	}
	return l.c.ReleaseToken(ctx, l.Key, l.Token)
}

// acquireGrace is how long past its wait an acquire waits for the
// server's own T before giving up on its side.
const acquireGrace = 500 * time.Millisecond

// ReleaseToken gives back the lock that token holds on key, so the next
// waiter is granted at once: Lock.Release for a key and token kept
// elsewhere (a file, another process). It re-sends the release every
// Options.ReleaseEvery, on any live connection and preferring the active
// node, until a node answers or Options.ReleaseFor has passed. It
// returns nil when a node answers ok, also to a re-send after a
// connection dropped under an earlier one, and an error wrapping
// ErrNotHeld when the node answers that the token does not hold the key:
// lockd answers ok again to a re-sent release it applied, so notheld
// means the lock was not this token's to release.
func (c *Client) ReleaseToken(ctx context.Context, key string, token uint64) error {
	if err := checkKey("release", key); err != nil {
		return err
	}
	r := releaser{c: c, req: request{op: proto.OpRelease, key: key, token: token}, kick: make(chan struct{}, 1)}
	r.calls = r.buf[:0]
	err := r.run(ctx)
	// Answers still to come are consumed by the reader.
	for _, cl := range r.calls {
		cl.abandon()
	}
	return err
}

// releaser is one Release call: the sends still unanswered, and what it
// learnt of the connections.
type releaser struct {
	c     *Client
	req   request
	kick  chan struct{} // an answer (or a drop) arrived for one of calls
	calls []*call
	buf   [4]*call
	at    attempt
	wake  <-chan struct{} // set when no connection was ready to send on
	// soon is set when a node named a silent one as active: the release
	// goes out again shortly, rather than at the next ReleaseEvery, to
	// the node if it is back (stale dialled it) or to whoever took over.
	soon    <-chan time.Time
	sends   int
	lastErr error
}

func (r *releaser) run(ctx context.Context) error {
	c, key, token := r.c, r.req.key, r.req.token
	if err := r.send(); err != nil {
		return callErr("release", key, err)
	}
	start := time.Now()
	// One timer paces the re-sends and ends them at ReleaseFor.
	t := time.NewTimer(c.opts.ReleaseEvery)
	defer t.Stop()
	for {
		var err error
		select {
		case <-r.kick:
			var done bool
			if done, err = r.collect(); done {
				return err
			}
		case <-r.wake:
			err = r.send()
		case <-r.soon:
			r.soon = nil
			r.at = attempt{lastErr: r.at.lastErr}
			err = r.send()
		case <-t.C:
			left := c.opts.ReleaseFor - time.Since(start)
			if left <= 0 {
				last := r.lastErr
				if !errors.Is(last, ErrUnavailable) {
					last = c.unavailable(last)
				}
				if r.sends == 0 {
					return fmt.Errorf("release %s token %d: could not be sent within %s: %w; the lock frees itself when its lease ends", key, token, c.opts.ReleaseFor, last)
				}
				return fmt.Errorf("release %s token %d: %w: no node answered within %s (sent %d times): %w; the lock frees itself when its lease ends", key, token, ErrNoAnswer, c.opts.ReleaseFor, r.sends, last)
			}
			t.Reset(min(c.opts.ReleaseEvery, left))
			r.at = attempt{target: r.at.target, lastErr: r.at.lastErr}
			err = r.send()
		case <-ctx.Done():
			return ctx.Err()
		}
		if err != nil {
			return callErr("release", key, err)
		}
	}
}

// send sends the release once more, if a connection is ready; if not, it
// sets wake to learn when one may be.
func (r *releaser) send() error {
	r.wake = nil
	for {
		cn, gen, w, err := r.c.choose(&r.at)
		if errors.Is(err, ErrClosed) {
			return err
		}
		if err != nil {
			if !r.c.wasUp() {
				// No node was ever reached: nothing was lost in a drop
				// that a re-send could make up for. Fail as Acquire does.
				return err
			}
			r.lastErr = err
			return nil
		}
		if cn == nil {
			r.wake = w
			return nil
		}
		cl := newCall(&r.req, r.kick)
		cl.cn, cl.gen = cn, gen
		if err := cn.send(cl); err != nil {
			r.at.fail(cn, gen, err)
			continue
		}
		r.calls = append(r.calls, cl)
		r.sends++
		return nil
	}
}

// collect takes the results that arrived. It reports true, with the
// call's result, when one of them settles the release.
func (r *releaser) collect() (bool, error) {
	c, key := r.c, r.req.key
	for i := 0; i < len(r.calls); {
		cl := r.calls[i]
		var res result
		select {
		case res = <-cl.res:
		default:
			i++
			continue
		}
		r.calls = append(r.calls[:i], r.calls[i+1:]...)
		if res.err != nil {
			if errors.Is(res.err, ErrClosed) {
				return true, callErr("release", key, ErrClosed)
			}
			r.at.fail(cl.cn, cl.gen, res.err)
			r.lastErr = res.err
			if len(r.calls) == 0 {
				if err := r.send(); err != nil {
					return true, callErr("release", key, err)
				}
			}
			continue
		}
		a := res.ans
		switch a.Kind {
		case proto.OpRelease:
			if len(a.Fields) == 1 && a.Fields[0] == proto.WordOK {
				c.setActive(cl.cn.addr)
				return true, nil
			}
			if len(a.Fields) == 1 && a.Fields[0] == proto.WordNotHeld {
				c.setActive(cl.cn.addr)
				return true, notHeldErr("release", key, r.req.token)
			}
			return true, badAnswer("release", key, cl.cn, a)
		case proto.KindError:
			return true, serverError(a)
		case proto.KindMoved:
			addr, err := movedTo(cl.cn.addr, a)
			if err != nil {
				return true, callErr("release", key, err)
			}
			if c.stale(addr) {
				// A redirect to a node that stopped answering this client:
				// a failover it has not seen yet, or the node is back.
				if r.soon == nil {
					r.soon = time.After(25 * time.Millisecond)
				}
				continue
			}
			c.setActive(addr)
			r.at.target = addr
			r.at.moves++
			// Follow the first redirects at once; after that the timer
			// paces us while a handoff settles.
			if r.at.moves <= 2 {
				if err := r.send(); err != nil {
					return true, callErr("release", key, err)
				}
			}
		default:
			return true, badAnswer("release", key, cl.cn, a)
		}
	}
	return false, nil
}

// Renew restarts the lease of a held lock from now. It returns an error
// wrapping ErrNotHeld when the token no longer holds the key (the lease
// ran out, or it was released).
func (c *Client) Renew(ctx context.Context, key string, token uint64, lease time.Duration) error {
	return c.renew(ctx, key, token, lease, "")
}

// renew is Renew that also sets the holder's value when value is not "".
func (c *Client) renew(ctx context.Context, key string, token uint64, lease time.Duration, value string) error {
	if err := checkKey("renew", key); err != nil {
		return err
	}
	if err := checkLease("renew", key, lease); err != nil {
		return err
	}
	req := request{op: proto.OpRenew, key: key, token: token, lease: lease, value: value}
	if err := checkLine("renew", key, &req); err != nil {
		return err
	}
	a, cn, err := c.roundTrip(ctx, &req, true)
	if err != nil {
		return callErr("renew", key, err)
	}
	if len(a.Fields) == 1 {
		switch a.Fields[0] {
		case proto.WordOK:
			return nil
		case proto.WordNotHeld:
			return notHeldErr("renew", key, token)
		}
	}
	return badAnswer("renew", key, cn, a)
}

// Queue returns the holders of key and its waiters, in queue order. Its
// Limit is 1 for a lock (and for a key nobody holds), as Lock.Limit is;
// the wire leaves it out for a lock.
func (c *Client) Queue(ctx context.Context, key string) (proto.Queue, error) {
	if err := checkKey("queue", key); err != nil {
		return proto.Queue{}, err
	}
	req := request{op: proto.OpQueue, key: key}
	a, cn, err := c.roundTrip(ctx, &req, true)
	if err != nil {
		return proto.Queue{}, callErr("queue", key, err)
	}
	q, err := parseQueue(a)
	if err != nil {
		return q, fmt.Errorf("queue %s: %s answered %w; check that client and server versions match", key, cn.addr, err)
	}
	return q, nil
}

// parseQueue reads a Q or L answer as Queue and Watch deliver it: Limit
// 1 for a lock, where the wire leaves it out, and a reader key's many
// holders read (see ParseQueueInfo).
func parseQueue(a proto.Answer) (proto.Queue, error) {
	qi, err := ParseQueueInfo(a)
	return qi.Queue, err
}

// Keys lists the keys held or waited on that pattern selects: "*" all,
// "pre*" those starting with "pre", anything else that key alone. The
// list is sorted and holds at most proto.MaxListKeys keys; total counts
// them all.
func (c *Client) Keys(ctx context.Context, pattern string) (keys []string, total int, err error) {
	if err := checkKey("keys", pattern); err != nil {
		return nil, 0, err
	}
	req := request{op: proto.OpKeys, key: pattern}
	a, cn, err := c.roundTrip(ctx, &req, true)
	if err != nil {
		return nil, 0, callErr("keys", pattern, err)
	}
	if len(a.Fields) >= 1 {
		if total, err := strconv.Atoi(a.Fields[0]); err == nil && total >= len(a.Fields)-1 {
			return a.Fields[1:], total, nil
		}
	}
	return nil, 0, badAnswer("keys", pattern, cn, a)
}

// Handoff asks the active node to hand its role to its successor, or to
// the node at to when to is not "". It returns the new active's address.
// The request is not re-sent when a connection drops after sending it:
// the handoff may have happened, and a second one would move the role
// again.
func (c *Client) Handoff(ctx context.Context, to string) (newActive string, err error) {
	if to != "" {
		if msg := proto.CheckKey([]byte(to)); msg != "" {
			return "", fmt.Errorf("handoff: target %q: %s; name a node as HOST:PORT, as written in its --peers", to, msg)
		}
	}
	req := request{op: proto.OpHandoff, key: proto.WordNone, addr: to}
	a, cn, err := c.roundTrip(ctx, &req, false)
	if err != nil {
		return "", callErr("handoff", "", err)
	}
	if len(a.Fields) == 2 && a.Fields[0] == proto.WordOK {
		c.setActive(a.Fields[1])
		return a.Fields[1], nil
	}
	return "", badAnswer("handoff", "", cn, a)
}

// roundTrip sends req and returns its answer, moving the request to
// another connection when one drops (if resend) and following M answers
// to the node they name. The answer is never M; an E answer comes back
// as a *ServerError.
//
// An acquire that waits (not a try) waits through an outage too: where
// another call reports ErrUnavailable, it keeps asking until a node
// serves it, its wait runs out or ctx ends (see patient).
func (c *Client) roundTrip(ctx context.Context, req *request, resend bool) (proto.Answer, *conn, error) {
	waits := req.op == proto.OpAcquire && !req.try
	t := trip{c: c, req: req, resend: resend, patient: waits, forever: waits && req.waitTotal == 0}
	if req.op == proto.OpAcquire {
		t.at.busyKey = req.key
	}
	for {
		if err := ctx.Err(); err != nil {
			return proto.Answer{}, nil, err
		}
		cn, gen, err := t.pick(ctx)
		if err != nil {
			return proto.Answer{}, nil, err
		}
		if cn == nil {
			continue
		}
		cl, r, err := t.send(ctx, cn, gen)
		switch {
		case err != nil:
			return proto.Answer{}, nil, err
		case cl == nil:
			continue
		case r.err != nil:
			if err := t.dropped(ctx, cn, gen, r.err); err != nil {
				return proto.Answer{}, nil, err
			}
			continue
		}
		t.outages = 0
		a := r.ans
		switch a.Kind {
		case proto.KindMoved:
			if err := t.moved(ctx, cn, a, r.landed); err != nil {
				return a, cn, err
			}
			continue
		case proto.KindError:
			if cn.refusedRef(cl, a) {
				continue // sent again, without the ref
			}
			return a, cn, serverError(a)
		}
		if req.op != proto.OpHandoff {
			// Only the active serves: a node that did is the active.
			c.setActive(cn.addr)
		}
		return a, cn, nil
	}
}

// trip is one roundTrip: its request, and what its attempts learnt.
type trip struct {
	c       *Client
	req     *request
	resend  bool // send it again on another connection when one drops
	patient bool // wait through an outage (see roundTrip)
	forever bool // an acquire that waits until ctx ends
	at      attempt
	outages int // spells without a node in a row
}

// outage waits out a spell with no node to serve the call, which cause
// (ErrUnavailable) describes, and starts a new attempt; early: stop
// waiting as soon as a connection is up. An acquire with a wait waits
// no longer than what is left of it, counted from its first send or,
// when it was never sent, from the outage's start; then it returns
// cause.
func (t *trip) outage(ctx context.Context, early bool, cause error) error {
	pause := t.c.outagePause(t.outages)
	if t.req.waitTotal > 0 {
		left := t.waitLeft(ctx)
		if left <= 0 {
			return t.waitRanOut(cause)
		}
		pause = min(pause, left)
	}
	err := t.c.awaitNode(ctx, pause, early)
	t.outages++
	t.at = attempt{busyKey: t.at.busyKey}
	if err == nil && t.req.waitTotal > 0 && t.waitLeft(ctx) <= 0 {
		return t.waitRanOut(cause)
	}
	return err
}

// waitLeft is what is left of an acquire's wait in an outage, and of
// ctx's time (the wait and a grace): the wait starts now if it had not.
func (t *trip) waitLeft(ctx context.Context) time.Duration {
	r := t.req
	now := t.c.now()
	if r.start.IsZero() {
		r.start = now
	}
	left := r.waitTotal - now.Sub(r.start)
	if dl, ok := ctx.Deadline(); ok {
		left = min(left, time.Until(dl))
	}
	return left
}

// waitRanOut is the error of an acquire whose wait ran out in an
// outage: no node said the key was busy, none could be reached.
func (t *trip) waitRanOut(cause error) error {
	return fmt.Errorf("%w; it stayed so for the whole wait of %s", cause, t.req.waitTotal)
}

// pick chooses the connection to send on, and its generation. It
// returns no connection, and no error, when the call is to pick again:
// it waited for a connection to change state, or out an outage.
func (t *trip) pick(ctx context.Context) (*conn, uint64, error) {
	cn, gen, wake, err := t.c.choose(&t.at)
	switch {
	case err != nil && t.waitsOut(err):
		return nil, 0, t.outage(ctx, true, err)
	case err != nil:
		return nil, 0, err
	case cn == nil:
		t.c.waits.Add(1)
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	return cn, gen, nil
}

// send sends the request on cn and waits for its result. It returns no
// call, and no error, when the send failed and the call is to pick
// another connection; an error when the call is over.
func (t *trip) send(ctx context.Context, cn *conn, gen uint64) (*call, result, error) {
	if err := t.req.prepare(t.c.now()); err != nil {
		if errors.Is(t.at.lastErr, ErrNoAnswer) {
			// The wait ran out on a node that stopped answering: nobody
			// said the key was busy.
			return nil, result{}, t.c.unavailable(t.at.lastErr)
		}
		if t.at.moves > 2 {
			// The wait ran out while nodes sent the request on to one
			// another (a handoff takes one or two): nobody said the key
			// was busy either.
			to := "" // a later redirect to a node found silent names none
			if t.at.target != "" {
				to = ", the last time to " + t.at.target
			}
			return nil, result{}, fmt.Errorf("the wait ran out while the request was redirected %d times in a row over %s%s: %w; retry in a moment, once the cluster has settled on one active node", t.at.moves, time.Since(t.at.movedSince).Round(time.Millisecond), to, ErrDisagree)
		}
		return nil, result{}, err
	}
	cl := newCall(t.req, nil)
	if err := cn.send(cl); err != nil {
		t.at.fail(cn, gen, err)
		return nil, result{}, nil
	}
	if t.at.moves > 0 {
		// After a redirect, learn whether the next one (if any) comes
		// at once or after the node took the request in.
		cn.probeAfter()
	}
	select {
	case r := <-cl.res:
		return cl, r, nil
	case <-ctx.Done():
		r, ok := cl.abandon()
		if !ok {
			// Take a waiting acquire out of the node's queue now,
			// rather than be granted and release it later.
			cn.withdraw(cl)
			return nil, result{}, ctx.Err()
		}
		return cl, r, nil
	}
}

// dropped deals with cn dropping under the request with err: it returns
// nil when the call is to go on, on another connection.
func (t *trip) dropped(ctx context.Context, cn *conn, gen uint64, err error) error {
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	t.at.fail(cn, gen, err)
	if !t.resend {
		return fmt.Errorf("%w, after the request was sent: it may or may not have been applied; check the node's state before retrying", err)
	}
	if t.at.drops < maxDrops {
		return nil
	}
	err = t.c.unavailable(fmt.Errorf("%d connections dropped during this request, last: %w", t.at.drops, err))
	if t.waitsOut(err) {
		// Connections that come up and drop again: pause before the
		// next round, whatever is up.
		return t.outage(ctx, false, err)
	}
	return err
}

// moved follows a, an M answer read on cn to the node it names: it
// returns nil when the call is to be sent again. landed says the node
// had taken the request in before it moved it.
func (t *trip) moved(ctx context.Context, cn *conn, a proto.Answer, landed bool) error {
	c, at := t.c, &t.at
	addr, err := movedTo(cn.addr, a)
	if err != nil {
		return err
	}
	if landed {
		// The node had taken the request in and moved it later (a
		// handoff moves its waiters): a new attempt begins.
		at.moves = 0
	}
	var pause time.Duration
	if c.stale(addr) {
		// The node named stopped answering this client: either the one
		// that named it has not noticed yet that it failed (a failover
		// is under way), or it is back (restarted, resumed) and took its
		// role again. stale dialled it at once; ask again shortly, which
		// finds it if it is back, or the node that took over.
		now := time.Now()
		if at.staleSince.IsZero() {
			at.staleSince = now
		}
		if !t.forever && now.Sub(at.staleSince) > c.failoverFor() {
			return c.unavailable(fmt.Errorf("%s still names %s as the active node, %s: no other node took over", cn.addr, addr, c.silence(addr)))
		}
		at.stale++
		at.target = ""
		pause = min(time.Duration(at.stale)*25*time.Millisecond, 100*time.Millisecond)
	} else {
		at.staleSince = time.Time{}
		c.setActive(addr)
		if at.redirected(c.settleFor()) {
			return fmt.Errorf("redirected %d times in a row over %s, the last time by %s to %s: %w; retry in a moment, once the cluster has settled on one active node", at.moves, time.Since(at.movedSince).Round(time.Millisecond), cn.addr, addr, ErrDisagree)
		}
		at.target = addr
		pause = moveBackoff(at.moves)
	}
	if pause > 0 {
		tm := time.NewTimer(pause)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
	return nil
}

// waitsOut reports whether err, a call's failure to find a node, is an
// outage this call waits through: a patient call on a client that has
// reached a node before, or an acquire with a wait on one that never
// has, while every node refuses the connection (a cluster starting or
// restarting). Waiting forever on addresses never reached, or on nodes
// that take the connection and never answer, would hang a client given
// wrong addresses for good; a node refusing the TLS or the secret will
// not change its mind.
func (t *trip) waitsOut(err error) bool {
	var se *SetupError
	switch {
	case !t.patient || !errors.Is(err, ErrUnavailable) || errors.As(err, &se):
		return false
	case t.c.wasUp():
		return true
	}
	return !t.forever && t.c.nothingListens()
}

// nothingListens reports whether the last dial of every connection was
// refused: no node listens at any address.
func (c *Client) nothingListens() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		if !errors.Is(cn.lastErr, syscall.ECONNREFUSED) {
			return false
		}
	}
	return len(c.conns) > 0
}

// outagePause is how long a patient call waits before its n-th new
// attempt in an outage: soon at first, then up to a second (or Redial),
// each attempt dialling every node at once.
func (c *Client) outagePause(n int) time.Duration {
	return min(50*time.Millisecond<<min(n, 6), c.opts.Redial, time.Second)
}

// awaitNode waits pause, or (early) until a connection is up, or ctx ends.
func (c *Client) awaitNode(ctx context.Context, pause time.Duration, early bool) error {
	t := time.NewTimer(pause)
	defer t.Stop()
	for {
		up, changed := c.anyUp()
		if early && up {
			return nil
		}
		select {
		case <-t.C:
			return nil
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return ErrClosed
		}
	}
}

// moveBackoff is how long to pause before following the n-th redirect of
// a call: the first ones at once, later ones a little later so that a
// handoff in progress, or a new active waiting for its standbys, can
// settle: ten redirects in a row span about 0.65 s.
func moveBackoff(n int) time.Duration {
	if n <= 2 {
		return 0
	}
	return min(time.Duration(n-2)*25*time.Millisecond, 100*time.Millisecond)
}

// orphan deals with an answer that came after its caller gave up. A grant
// is released at once, so that an abandoned acquire leaks no lock.
func (c *Client) orphan(cl *call, a proto.Answer) {
	if cl.req.op != proto.OpAcquire || a.Kind != proto.OpAcquire {
		return
	}
	keys := append([]string{cl.req.key}, cl.req.more...)
	g, ok := parseGrant(a, len(keys))
	if !ok {
		return
	}
	for i, k := range keys {
		c.releaseLater(k, g.tokens[i], "lockd released a lock granted after its acquire gave up")
	}
}

// movedTo reads the address of an M answer.
func movedTo(from string, a proto.Answer) (string, error) {
	if len(a.Fields) != 1 {
		return "", fmt.Errorf("node %s redirected %s without naming the active node; check the --peers and --advertise of that node", from, a.Key)
	}
	addr := a.Fields[0]
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("node %s redirected %s to %q, which is not HOST:PORT; check the --peers and --advertise of that node", from, a.Key, addr)
	}
	return addr, nil
}

// failoverFor is how long a call keeps asking while the node it is sent
// to stays silent and the others still name it: ten failure timeouts,
// time enough for a standby to notice and promote itself.
func (c *Client) failoverFor() time.Duration { return 10 * c.opts.FailureTimeout }

// settleFor is how long a call follows redirects between nodes that
// answer but disagree on which one is active before it gives up: nodes
// started together, or restarted together from their data directories,
// agree within a failure timeout or two.
func (c *Client) settleFor() time.Duration { return 3 * c.opts.FailureTimeout }

func (c *Client) wasUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.everUp
}

func (c *Client) unavailable(last error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unavailableLocked(last)
}

func checkKey(op, key string) error {
	if msg := proto.CheckKey([]byte(key)); msg != "" {
		return argErrorf("%s %q: %s; a key is 1 to %d bytes without space, tab or control character", op, key, msg, proto.MaxKeyLen)
	}
	return nil
}

func checkLease(op, key string, lease time.Duration) error {
	if lease < time.Millisecond || lease > proto.MaxSeconds*time.Second {
		return argErrorf("%s %s: lease %s is out of range; give at least 1ms and at most %d seconds", op, key, lease, proto.MaxSeconds)
	}
	return nil
}

// callErr names the call in err, leaving alone what callers test by
// identity: ctx errors and *ServerError.
func callErr(op, key string, err error) error {
	var se *ServerError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &se) {
		return err
	}
	if key == "" {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// waitTimeout is the error of an acquire whose wait ran out, whichever
// deadline ended it: the wait's (Acquire's wait, Wait) or ctx's. It
// matches ErrTimeout and context.DeadlineExceeded both, so a caller tests
// one of them, whichever it set.
type waitTimeout struct{ msg string }

func (e *waitTimeout) Error() string { return e.msg }

func (e *waitTimeout) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

func heldWords(op string, limit int) string {
	switch {
	case op != "acquire":
		return "another client holds one of the keys at least, and none of them was taken"
	case limit > 1:
		return fmt.Sprintf("all %d places of the semaphore are taken", limit)
	}
	return "another client holds the key"
}

func timeoutErr(op, key string, wait time.Duration, limit int) error {
	return &waitTimeout{fmt.Sprintf("%s %s: %s after %s: %s; retry later, or wait longer (a wait of 0 waits forever)", op, key, ErrTimeout, wait, heldWords(op, limit))}
}

func ctxTimeoutErr(op, key string, limit int) error {
	return &waitTimeout{fmt.Sprintf("%s %s: %s: the context's deadline passed: %s; retry later, or give the context longer", op, key, ErrTimeout, heldWords(op, limit))}
}

func notHeldErr(op, key string, token uint64) error {
	return fmt.Errorf("%s %s token %d: %w: it was released already, its lease ran out, or it never held it; acquire the key again if you still need it", op, key, token, ErrNotHeld)
}

func badAnswer(op, key string, cn *conn, a proto.Answer) error {
	where := "a node"
	if cn != nil {
		where = cn.addr
	}
	if key != "" {
		op += " " + key
	}
	line := a.Kind.String() + " " + a.Key
	for _, f := range a.Fields {
		line += " " + f
	}
	return fmt.Errorf("%s: %s answered %q, which this client does not understand; check that client and server versions match", op, where, line)
}
