package core

import (
	"errors"
	"strconv"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// conn is what the core knows of one connection: the order its acquires
// must be answered in, and whether it is a replication stream.
type conn struct {
	id       ConnID
	remote   string
	nextSeq  uint64
	pending  map[string][]pendingA // waiting acquires per key, in send order
	early    map[uint64]heldLine   // answers of pending acquires behind an older one, by seq
	nwaiting int
	stream   *stream    // set when this connection is a standby's replication stream
	lists    []*listing // its key listings (K) being scanned, oldest first
	// held are answers waiting for the standbys' acknowledgements
	// (synchronous replication), in the order they are to be written.
	held     []heldAnswer
	heldBuf  []byte              // the bytes of held's lines, reused once all are written
	refs     map[uint64]refWait  // waiting acquires that carried ref=R, by seq (refs.go)
	refsPeak int                 // the most refs has held since it was made
	watches  map[string]watchDue // the keys this connection watches (L), and whether news of each waits (watch.go)
	// watchBusy: watch news sent is not known to be written yet
	// (WatchSlice says when it is).
	watchBusy bool
}

// pendingA is an acquire on a connection that has not been answered in
// order yet: its seq, either still waiting in the engine, or, with
// pendingDone, answered but behind an older acquire of the same key (its
// answer is in conn.early until then). 8 bytes a waiter rather than a
// seq and a slice for the answer (32, and 40 with a flag): a waiter that
// is answered is most often the oldest of its key on its connection, and
// its answer is written at once.
type pendingA uint64

// pendingDone marks a pendingA answered; seqs stay below it.
const pendingDone pendingA = 1 << 63

func (p pendingA) done() bool  { return p&pendingDone != 0 }
func (p pendingA) seq() uint64 { return uint64(p &^ pendingDone) }

// parkedReq is a lock request that arrived while this node could not
// tell where it goes (parks); it is served, or redirected, once it can.
type parkedReq struct {
	c   ConnID
	at  int64 // when it arrived, unix nanoseconds
	req proto.Request
}

func waiterOf(c *conn, seq uint64) engine.Waiter {
	return engine.Waiter{Conn: uint64(c.id), Seq: seq}
}

// Request serves one request read on connection id. The shell has
// checked that the connection may send it (package auth); I requests are
// the shell's. A key listing (K) is scanned a slice at a time: Out.Scan.
func (c *Core) Request(now time.Time, id ConnID, req proto.Request) {
	cn := c.conns[id]
	if cn == nil {
		return
	}
	c.noteTime(now)
	c.take(id, req.Op, req.Key, 0)
	c.request(now, cn, req)
	c.taking.open = false
}

// request serves req of cn, the request taken up (take).
func (c *Core) request(now time.Time, cn *conn, req proto.Request) {
	id := cn.id
	if req.Op.ActiveOnly() {
		if !c.serving() {
			if c.parks() && len(c.parked) < maxParked {
				c.parked = append(c.parked, parkedReq{c: id, at: now.UnixNano(), req: req})
				return
			}
			c.redirect(now, cn, req)
			return
		}
		c.cancelsDue(now)
	}
	if req.Op.Class() == proto.ClassPeer {
		c.peerMessage(now, cn, req)
		return
	}
	key := req.Key
	switch req.Op {
	case proto.OpAcquire:
		c.acquire(now, cn, req)
	case proto.OpRelease:
		evs, ok := c.eng.Release(now, key, req.Token, c.evs[:0])
		c.route(now, evs)
		word, outcome := proto.WordOK, OK
		if !ok {
			word, outcome = proto.WordNotHeld, NotHeld
			c.count.ReleasesNotHeld++
		} else {
			c.count.Releases++
		}
		c.send(cn, answered(proto.OpRelease, key, outcome), proto.AppendWord(c.buf[:0], proto.OpRelease, key, word))
	case proto.OpRenew:
		evs, err := c.eng.RenewValue(now, key, req.Token, req.Lease, req.Value, req.HasValue, c.evs[:0])
		if err == nil && req.HasValue {
			c.touch(key) // a Proclaim: the watchers see the value
		}
		c.route(now, evs)
		switch {
		case err == nil:
			c.count.Renewals++
			c.send(cn, answered(proto.OpRenew, key, OK), proto.AppendWord(c.buf[:0], proto.OpRenew, key, proto.WordOK))
		case err == engine.ErrNotHeld:
			c.send(cn, answered(proto.OpRenew, key, NotHeld), proto.AppendWord(c.buf[:0], proto.OpRenew, key, proto.WordNotHeld))
		default:
			c.send(cn, refused(req.Op, key, NoLimit), proto.AppendError(c.buf[:0], key, req.Op, err.Error()))
		}
	case proto.OpQueue:
		c.advance(now)
		c.send(cn, answered(proto.OpQueue, key, OK), proto.AppendQueue(c.buf[:0], c.queueOf(now, key)))
	case proto.OpWithdraw:
		c.withdraw(now, cn, req)
	case proto.OpWatch:
		c.watch(now, cn, req)
	case proto.OpUnwatch:
		c.unwatch(cn, req)
	case proto.OpKeys:
		c.listKeys(cn, key)
	case proto.OpStatus:
		// Status, and the clients' liveness probe: never held.
		c.sendNow(cn, answered(proto.OpStatus, key, OK), proto.AppendStatus(c.buf[:0], key, c.Status(now)))
	case proto.OpHandoff:
		c.handoffRequest(now, cn, req)
	default:
		c.send(cn, refused(req.Op, key, NoLimit), proto.AppendError(c.buf[:0], key, req.Op, "unknown op "+req.Op.String()))
	}
}

// RequestError answers a line that is no request. A refused acquire whose
// key could be read is matched by (A, key) like any acquire: it must not
// overtake an older acquire of the key still waiting; one whose ref could
// be read too is answered at once, with it.
func (c *Core) RequestError(now time.Time, id ConnID, pe *proto.ParseError) {
	cn := c.conns[id]
	if cn == nil {
		return
	}
	c.noteTime(now)
	c.take(id, pe.Op, pe.Key, 0)
	defer func() { c.taking.open = false }()
	if pe.Op == proto.OpAcquire && !pe.Ref.IsZero() && pe.Key != proto.WordNone {
		c.count.Refusals++
		seq := cn.nextSeq
		cn.nextSeq++
		c.answerAcquire(cn, pe.Key, seq, pe.Ref, refused(pe.Op, pe.Key, NoLimit), proto.AppendErrorRef(nil, pe.Key, pe.Op, pe.Ref, pe.Msg))
		return
	}
	c.refuse(cn, pe.Op, pe.Key, pe.Msg)
}

// Refuse answers a request that will not be served with E and msg, in
// the order its (op, key) requires. It carries no ref: the shell refuses
// only requests of a connection that may send none (not authenticated),
// so a refused acquire is the only one its connection has outstanding,
// and the client matches the E by (A, key).
func (c *Core) Refuse(now time.Time, id ConnID, op proto.Op, key, msg string) {
	if cn := c.conns[id]; cn != nil {
		c.noteTime(now)
		c.take(id, op, key, 0)
		c.refuse(cn, op, key, msg)
		c.taking.open = false
	}
}

func (c *Core) refuse(cn *conn, op proto.Op, key, msg string) {
	c.count.Refusals++
	if op == proto.OpAcquire && key != proto.WordNone {
		seq := cn.nextSeq
		cn.nextSeq++
		c.answerA(cn, key, seq, refused(op, key, NoLimit), proto.AppendError(nil, key, op, msg))
		return
	}
	c.send(cn, refused(op, key, NoLimit), proto.AppendError(c.buf[:0], key, op, msg))
}

func (c *Core) acquire(now time.Time, cn *conn, req proto.Request) {
	key := req.Key
	seq := cn.nextSeq
	cn.nextSeq++
	if cn.nwaiting >= MaxConnWaiters {
		c.answerA(cn, key, seq, refused(req.Op, key, LimitConnWaiters), proto.AppendError(nil, key, req.Op, "this connection already has "+strconv.Itoa(MaxConnWaiters)+" waiting acquires; open another connection"))
		return
	}
	if isSetAcquire(req) {
		c.acquireSet(now, cn, req, seq)
		return
	}
	if req.Try {
		c.tryAcquire(now, cn, req, seq)
		return
	}
	w := waiterOf(cn, seq)
	id := req.ID
	fresh := id != "" && len(c.streams) > 0 && !c.eng.QueuedID(id)
	evs, err := c.eng.AcquireID(now, key, req.Limit, req.Lease, req.Wait, id, w, c.evs[:0])
	granted, tok := c.routeOwn(now, evs, w)
	switch {
	case err != nil:
		c.count.Refusals++
		c.answerAcquire(cn, key, seq, req.Ref, refused(req.Op, key, limitOf(err)), proto.AppendErrorRef(nil, key, req.Op, req.Ref, err.Error()))
	case granted && c.sets.place > 0:
		c.send(cn, grant(key, tok), proto.AppendGrantedSet(c.buf[:0], key, []uint64{tok}, c.sets.place, req.Ref))
	case granted && !req.Ref.IsZero():
		c.send(cn, grant(key, tok), proto.AppendGrantedRef(c.buf[:0], key, tok, req.Ref))
	case granted:
		// Written at once, even past an older acquire of key that waits
		// on this connection: that can only be a re-sent acquire whose
		// grant was made before (its id), and holding the answer behind
		// the waiter, which waits for this very grant, would stall both
		// until the lease ran out. The client gives the answer to its
		// oldest acquire of key on the connection; the waiter's answer
		// goes to the next, so every grant still has exactly one owner.
		c.send(cn, grant(key, tok), proto.AppendGranted(c.buf[:0], key, tok))
	default:
		if req.Ref.IsZero() {
			cn.wait(key, seq)
		} else {
			cn.waitRef(key, seq, req.Ref)
		}
		if fresh {
			// A new waiter; one that took its own place back (a re-send,
			// a ghost claimed) is known to the standbys where it stands.
			c.replicateWaiter(proto.Record{Kind: proto.RecJoined, Key: key, ID: id, Limit: max(req.Limit, 1), Lease: req.Lease, Wait: req.Wait})
		}
		c.touch(key)
		c.flushWatches(now)
	}
}

// redirect answers a lock request at a node that is not active.
func (c *Core) redirect(now time.Time, cn *conn, req proto.Request) {
	c.count.Redirects++
	to := c.redirectTarget(now)
	if req.Op == proto.OpAcquire {
		seq := cn.nextSeq
		cn.nextSeq++
		c.answerAcquire(cn, req.Key, seq, req.Ref, answered(proto.OpAcquire, req.Key, Moved), proto.AppendMovedRef(nil, req.Key, to, req.Ref))
		return
	}
	c.send(cn, answered(req.Op, req.Key, Moved), proto.AppendMoved(c.buf[:0], req.Key, to))
}

// send queues b, which says a, for cn, reporting false when the
// connection is gone.
func (c *Core) send(cn *conn, a answer, b []byte) bool {
	c.buf = b[:0]
	return c.emit(cn, a, b)
}

// limitOf is the limit an acquire refused with err hit, if any.
func limitOf(err error) Limit {
	switch {
	case errors.Is(err, engine.ErrTooManyKeys):
		return LimitKeys
	case errors.Is(err, engine.ErrQueueFull):
		return LimitWaiters
	case errors.Is(err, engine.ErrTooManyWaiters):
		return LimitTotalWaiters
	}
	return NoLimit
}

// answerA answers the acquire seq of key in order: it is written now if no
// older acquire of key waits on this connection, and held back otherwise.
// It reports false when the connection is gone.
func (c *Core) answerA(cn *conn, key string, seq uint64, a answer, line []byte) bool {
	q := cn.pending[key]
	for i := range q {
		if q[i] == pendingA(seq) {
			cn.nwaiting--
			if i > 0 {
				q[i] |= pendingDone
				cn.hold(seq, c.later(a), line)
				return true
			}
			ok := c.emit(cn, a, line)
			rest := c.flushPending(cn, key, 1)
			return ok && rest
		}
	}
	if len(q) == 0 {
		return c.emit(cn, a, line)
	}
	cn.pending[key] = append(q, pendingA(seq)|pendingDone)
	cn.hold(seq, c.later(a), line)
	return true
}

// hold keeps line, the answer to acquire seq, until the older acquires
// of its key are answered.
func (cn *conn) hold(seq uint64, a answer, line []byte) {
	if cn.early == nil {
		cn.early = make(map[uint64]heldLine)
	}
	cn.early[seq] = heldLine{a, line}
}

// wait records that acquire seq of key waits in the engine.
func (cn *conn) wait(key string, seq uint64) {
	if cn.pending == nil {
		cn.pending = make(map[string][]pendingA)
	}
	cn.pending[key] = append(cn.pending[key], pendingA(seq))
	cn.nwaiting++
}

// flushPending writes the answers of key's acquires on cn from the
// from-th on, up to the first not answered, and forgets them with the
// from before them.
func (c *Core) flushPending(cn *conn, key string, from int) bool {
	q := cn.pending[key]
	ok := true
	i := from
	for ; i < len(q) && q[i].done(); i++ {
		seq := q[i].seq()
		h := cn.early[seq]
		ok = c.emit(cn, h.a, h.line) && ok
		delete(cn.early, seq)
		if len(cn.early) == 0 {
			cn.early = nil // a map keeps the room it grew to
		}
	}
	if i == len(q) {
		delete(cn.pending, key)
		return ok
	}
	cn.pending[key] = q[i:]
	return ok
}

// routeOwn routes evs and reports whether one of them grants w, which the
// caller answers itself, as it does a T of w (a try-lock); the place of
// a semaphore's grant is left in c.sets.place.
func (c *Core) routeOwn(now time.Time, evs []engine.Event, w engine.Waiter) (bool, uint64) {
	granted, tok := false, uint64(0)
	c.sets.place = 0 // the place of w's grant, a semaphore's
	for _, ev := range evs {
		if ev.Kind == engine.Granted && ev.Waiter == w {
			granted, tok = true, ev.Token
			c.sets.place = int(ev.Place)
			c.count.Grants++
			c.replicate(ev)
			c.touch(ev.Key)
			continue
		}
		if ev.Kind == engine.TimedOut && ev.Waiter == w {
			continue // a try-lock's T: the caller answers it
		}
		c.routeOne(now, ev)
	}
	c.evs = evs
	c.flushWatches(now)
	return granted, tok
}

// route delivers events to their waiters and replicates state changes.
func (c *Core) route(now time.Time, evs []engine.Event) {
	for _, ev := range evs {
		c.routeOne(now, ev)
	}
	c.evs = evs
	c.flushWatches(now)
}

func (c *Core) routeOne(now time.Time, ev engine.Event) {
	c.replicate(ev)
	// A set's row of events counts, and leaves its queues, once.
	first := ev.SetSize <= 1 || c.sets.n == 0
	switch {
	case ev.Kind == engine.Granted && first:
		c.count.Grants++
	case ev.Kind == engine.TimedOut && ev.Waiter.Conn != engine.GhostConn && first:
		c.count.Timeouts++
	case ev.Kind == engine.Freed && ev.Expired:
		c.count.Expiries++
	}
	if ev.Kind != engine.Renewed {
		c.touch(ev.Key)
	}
	if ev.Kind == engine.TimedOut && ev.ID != "" && first {
		c.replicateWaiter(proto.Record{Kind: proto.RecLeft, Key: ev.Key, ID: ev.ID})
	}
	switch ev.Kind {
	case engine.Granted, engine.TimedOut:
		if ev.SetSize > 1 {
			if c.routeSetEvent(ev) {
				c.answerSet(now, ev)
			}
			return
		}
		cn := c.conns[ConnID(ev.Waiter.Conn)]
		if ev.Place > 0 && ev.Kind == engine.Granted {
			if !c.answerWaiterSet(cn, ev.Key, ev.Waiter.Seq, []uint64{ev.Token}, int(ev.Place), ev.Queued) {
				c.releaseOrphan(now, ev.Key, ev.Token)
			}
			return
		}
		if !c.answerWaiter(cn, ev.Key, ev.Waiter.Seq, ev.Kind == engine.Granted, ev.Token, ev.Queued) && ev.Kind == engine.Granted {
			// Its connection closed after the grant was decided: release
			// at once rather than pin the key for a whole lease.
			c.releaseOrphan(now, ev.Key, ev.Token)
		}
	}
}

// releaseOrphan releases a grant whose connection is gone (the core knew
// it, or the shell found it so: Undelivered), rather than pin the key
// for a whole lease.
func (c *Core) releaseOrphan(now time.Time, key string, token uint64) {
	more, _ := c.eng.Release(now, key, token, nil)
	for _, m := range more {
		c.routeOne(now, m)
	}
	c.flushWatches(now)
}

// dropWaiters answers every waiter with M to.
// Watches end the same way: each is answered M to.
func (c *Core) dropWaiters(to string) {
	row := 0 // the events of a set's row still to skip: it is answered once
	for _, ev := range c.eng.DropWaiters(nil) {
		if row > 0 {
			row--
			continue
		}
		if ev.SetSize > 1 {
			row = ev.SetSize - 1
		}
		if cn := c.conns[ConnID(ev.Waiter.Conn)]; cn != nil {
			if ref, ok := cn.takeRef(ev.Waiter.Seq); ok {
				c.send(cn, answered(proto.OpAcquire, ev.Key, Moved).takenAt(ev.Queued), proto.AppendMovedRef(c.buf[:0], ev.Key, to, ref))
				continue
			}
			c.answerA(cn, ev.Key, ev.Waiter.Seq, answered(proto.OpAcquire, ev.Key, Moved).takenAt(ev.Queued), proto.AppendMoved(nil, ev.Key, to))
		}
	}
	c.dropWatches(to)
}

// parks reports whether a lock request that this node cannot serve now
// waits here rather than being redirected: during a handoff (the role
// is on its way to a node not yet active), on an active that is paused
// (it may serve again in a moment, or learn who took over), and while
// joining (it does not know yet who is active: its guess, the first of
// --peers, may be a node that itself waits for this one, and a client
// sent back and forth between two such nodes gives up).
func (c *Core) parks() bool {
	return !c.serving() && (c.role == HandingOff || c.role == Active || c.role == Joining)
}

// replayParked serves the requests held back (parks), now that this
// node knows where they go.
func (c *Core) replayParked(now time.Time) {
	parked := c.parked
	c.parked = nil
	for _, p := range parked {
		if cn := c.conns[p.c]; cn != nil && p.c != 0 {
			c.take(p.c, p.req.Op, p.req.Key, p.at)
			c.request(now, cn, p.req)
			c.taking.open = false
		}
	}
}
