package core

import (
	"slices"
	"strconv"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// Watches, withdrawals, refs and the replicated waiters.

// Defaults of the watch bounds (Config.MaxWatches, MaxTotalWatches).
const (
	DefaultMaxWatches      = 256
	DefaultMaxTotalWatches = 100_000
)

// refWait is a waiting acquire that carried ref=R: its answer is written
// as soon as it is known, with the ref, and not held behind older
// acquires of its key (cn.pending is for those without).
type refWait struct {
	key string
	ref proto.Ref
}

// waitRef records that acquire seq of key, which carried ref, waits in
// the engine.
func (cn *conn) waitRef(key string, seq uint64, ref proto.Ref) {
	if cn.refs == nil {
		cn.refs = make(map[uint64]refWait)
	}
	cn.refs[seq] = refWait{key, ref}
	cn.refsPeak = max(cn.refsPeak, len(cn.refs))
	cn.nwaiting++
}

// takeRef forgets the ref'd waiting acquire seq, returning its ref.
func (cn *conn) takeRef(seq uint64) (proto.Ref, bool) {
	if len(cn.refs) == 0 {
		return proto.Ref{}, false
	}
	r, ok := cn.refs[seq]
	if !ok {
		return proto.Ref{}, false
	}
	delete(cn.refs, seq)
	if len(cn.refs) == 0 && cn.refsPeak > 64 {
		// A map keeps the room it grew to; a small one is kept for the
		// next wait, which on a busy key comes at once.
		cn.refs, cn.refsPeak = nil, 0
	}
	cn.nwaiting--
	return r.ref, true
}

// answerAcquire writes the answer to acquire seq of key that was never
// queued: at once when it carried a ref, else in (A, key) order.
func (c *Core) answerAcquire(cn *conn, key string, seq uint64, ref proto.Ref, a answer, line []byte) bool {
	if !ref.IsZero() {
		return c.send(cn, a, line)
	}
	return c.answerA(cn, key, seq, a, line)
}

// answerWaiter answers waiting acquire seq of key on cn: granted with
// token, or (token 0) T. It reports false when cn is gone.
func (c *Core) answerWaiter(cn *conn, key string, seq uint64, granted bool, token uint64, queued int64) bool {
	if cn == nil {
		return false
	}
	a := grant(key, token)
	if !granted {
		a = answered(proto.OpAcquire, key, TimedOut)
	}
	a = a.takenAt(queued)
	if ref, ok := cn.takeRef(seq); ok {
		var line []byte
		if granted {
			line = proto.AppendGrantedRef(c.buf[:0], key, token, ref)
		} else {
			line = proto.AppendTimeoutRef(c.buf[:0], key, ref)
		}
		return c.send(cn, a, line)
	}
	var line []byte
	if granted {
		line = proto.AppendGranted(nil, key, token)
	} else {
		line = proto.AppendTimeout(nil, key)
	}
	return c.answerA(cn, key, seq, a, line)
}

// tryAcquire serves an acquire with a wait of "-": granted or T at once.
func (c *Core) tryAcquire(now time.Time, cn *conn, req proto.Request, seq uint64) {
	key := req.Key
	w := waiterOf(cn, seq)
	evs, err := c.eng.TryAcquireID(now, key, req.Limit, req.Lease, req.ID, w, c.evs[:0])
	granted, tok := c.routeOwn(now, evs, w)
	switch {
	case err != nil:
		c.count.Refusals++
		c.answerAcquire(cn, key, seq, req.Ref, refused(req.Op, key, limitOf(err)), proto.AppendErrorRef(nil, key, req.Op, req.Ref, err.Error()))
	case granted:
		c.send(cn, grant(key, tok), proto.AppendGrantedRef(c.buf[:0], key, tok, req.Ref))
	default:
		c.count.Timeouts++
		c.answerAcquire(cn, key, seq, req.Ref, answered(proto.OpAcquire, key, TimedOut), proto.AppendTimeoutRef(nil, key, req.Ref))
	}
}

// withdraw serves X: the waiter of key with the id, queued from this
// connection, leaves at once; its acquire is answered T, then the X.
func (c *Core) withdraw(now time.Time, cn *conn, req proto.Request) {
	c.advance(now)
	key := req.Key
	evs, w, ok := c.eng.Withdraw(now, key, req.ID, uint64(cn.id), c.evs[:0])
	if !ok {
		c.route(now, evs)
		c.send(cn, answered(proto.OpWithdraw, key, OK), proto.AppendWord(c.buf[:0], proto.OpWithdraw, key, "none"))
		return
	}
	c.count.Withdrawals++
	c.answerWaiter(cn, key, w.Seq, false, 0, 0)
	c.replicateWaiter(proto.Record{Kind: proto.RecLeft, Key: key, ID: req.ID})
	c.touch(key)
	c.route(now, evs) // what the withdrawal let through; it flushes the watches
	c.send(cn, answered(proto.OpWithdraw, key, OK), proto.AppendWord(c.buf[:0], proto.OpWithdraw, key, proto.WordOK))
}

// watch serves L: subscribe cn to key and answer its state now.
func (c *Core) watch(now time.Time, cn *conn, req proto.Request) {
	key := req.Key
	if _, ok := cn.watches[key]; !ok {
		maxConn, maxAll := c.cfg.MaxWatches, c.cfg.MaxTotalWatches
		if maxConn <= 0 {
			maxConn = DefaultMaxWatches
		}
		if maxAll <= 0 {
			maxAll = DefaultMaxTotalWatches
		}
		switch {
		case len(cn.watches) >= maxConn:
			c.count.Refusals++
			c.send(cn, refused(req.Op, key, NoLimit), proto.AppendError(c.buf[:0], key, req.Op, "this connection already watches "+strconv.Itoa(maxConn)+" keys; unwatch some (U) or open another connection"))
			return
		case c.nwatches >= maxAll:
			c.count.Refusals++
			c.send(cn, refused(req.Op, key, NoLimit), proto.AppendError(c.buf[:0], key, req.Op, "this node already serves "+strconv.Itoa(maxAll)+" watches; retry later, or ask its operator to raise --max-total-watches"))
			return
		}
		if cn.watches == nil {
			cn.watches = make(map[string]watchDue)
		}
		cn.watches[key] = false
		if c.watchers == nil {
			c.watchers = make(map[string][]ConnID)
		}
		c.watchers[key] = append(c.watchers[key], cn.id)
		c.nwatches++
	}
	c.advance(now)
	cn.watches[key] = false // this answer is the latest state
	c.send(cn, answered(proto.OpWatch, key, OK), proto.AppendWatch(c.buf[:0], c.queueOf(now, key)))
}

// unwatch serves U, on any node: no L line of key follows its answer.
func (c *Core) unwatch(cn *conn, req proto.Request) {
	c.dropWatch(cn, req.Key)
	c.send(cn, answered(proto.OpUnwatch, req.Key, OK), proto.AppendWord(c.buf[:0], proto.OpUnwatch, req.Key, proto.WordOK))
}

// dropWatch ends cn's watch of key, if any.
func (c *Core) dropWatch(cn *conn, key string) {
	if _, ok := cn.watches[key]; !ok {
		return
	}
	delete(cn.watches, key)
	if len(cn.watches) == 0 {
		cn.watches = nil
	}
	ws := slices.DeleteFunc(c.watchers[key], func(id ConnID) bool { return id == cn.id })
	if len(ws) == 0 {
		delete(c.watchers, key)
		c.forgetWatchLine(key)
	} else {
		c.watchers[key] = ws
	}
	c.nwatches--
}

// dropWatches ends every watch, answering each M to: the node gives its
// role up, and the clients watch again where it went.
func (c *Core) dropWatches(to string) {
	keys := make([]string, 0, len(c.watchers))
	for k := range c.watchers {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same order on every run
	for _, k := range keys {
		for _, id := range c.watchers[k] {
			if cn := c.conns[id]; cn != nil {
				// The watch's request was answered long ago: this M
				// ends it and answers no request.
				c.send(cn, record, proto.AppendMoved(c.buf[:0], k, to))
				delete(cn.watches, k)
			}
		}
	}
	c.watchers, c.nwatches = nil, 0
	c.dirty = c.dirty[:0]
	c.watchLines, c.watchBytes = nil, 0
}

// touch notes that key's holders or waiters changed.
func (c *Core) touch(key string) {
	if len(c.watchers) == 0 {
		return
	}
	if _, ok := c.watchers[key]; !ok {
		return
	}
	c.forgetWatchLine(key)
	if !slices.Contains(c.dirty, key) {
		c.dirty = append(c.dirty, key)
	}
}

// Watch news is paced by what each watcher reads. A watcher that has
// written everything it was sent is sent the new state of a key as the
// key changes, and marked busy (ActWatchDrain); while it is busy, a
// change only marks the key due, and once the shell says the connection
// has written what it held (WatchSlice) the watcher gets the latest state
// of every key due, once. A watcher that reads slower than its keys
// change thus holds one state of each key at most, never every state in
// between, and a change costs the node one rendering of the key's line,
// plus a flag per watcher that is behind: watchers that catch up later
// are sent the line rendered last while the key has not changed since,
// for watchLineFresh (the times in it age), within watchLinesMax bytes.

const (
	watchLineFresh = 100 * time.Millisecond
	watchLinesMax  = 16 << 20
)

// watchLine is the L line last rendered of a key, and when.
type watchLine struct {
	line []byte
	at   time.Time
}

// watchLineOf is key's L line as of now: the one rendered last if the
// key has not changed since and it is fresh, else a new one, kept for
// the next watcher while the bytes kept stay within watchLinesMax. The
// line is shared: nobody writes to it.
func (c *Core) watchLineOf(now time.Time, key string) []byte {
	if wl, ok := c.watchLines[key]; ok && now.Sub(wl.at) < watchLineFresh {
		return wl.line
	}
	c.forgetWatchLine(key)
	line := proto.AppendWatch(nil, c.queueOf(now, key))
	if c.watchBytes+len(line) <= watchLinesMax {
		if c.watchLines == nil {
			c.watchLines = make(map[string]watchLine)
		}
		c.watchLines[key] = watchLine{line, now}
		c.watchBytes += len(line)
	}
	return line
}

// forgetWatchLine drops the line kept of key: it changed, or nobody
// watches it.
func (c *Core) forgetWatchLine(key string) {
	if wl, ok := c.watchLines[key]; ok {
		c.watchBytes -= len(wl.line)
		delete(c.watchLines, key)
	}
}

// watchDue says of a key a connection watches whether news of it waits
// for the connection to have room (flushWatches).
type watchDue bool

// flushWatches sends the new state of every key touched to its watchers
// that have room, and leaves it due for the others (WatchSlice).
func (c *Core) flushWatches(now time.Time) {
	if len(c.dirty) == 0 {
		return
	}
	dirty := c.dirty
	c.dirty = nil
	for _, k := range dirty {
		var line []byte // rendered once, for the first watcher with room
		for _, id := range c.watchers[k] {
			cn := c.conns[id]
			if cn == nil || cn.watches[k] {
				continue // gone, or due already: it gets the latest state
			}
			if !c.watchRoom(cn) {
				cn.watches[k] = true
				continue
			}
			if line == nil {
				line = c.watchLineOf(now, k)
				c.shared, c.ready.sharedCopy = line, nil
			}
			c.emit(cn, record, line) // news, not an answer to a request
			c.watchSent(cn)
		}
	}
	c.shared, c.ready.sharedCopy = nil, nil
	c.dirty = dirty[:0]
}

// watchRoom reports whether cn may be sent watch news now: it has written
// the news it was sent last, and no answer of cn waits in the core,
// behind which news would pile up until the standbys acknowledge.
func (c *Core) watchRoom(cn *conn) bool {
	return !cn.watchBusy && len(cn.held) == 0
}

// watchSent marks cn busy with news, and asks the shell to say when it
// has written it.
func (c *Core) watchSent(cn *conn) {
	cn.watchBusy = true
	c.act(Action{Kind: ActWatchDrain, Conn: cn.id}, nil)
}

// WatchSlice says connection id has written what it held since it was
// last sent watch news (ActWatchDrain): it is sent the latest state of
// every key it watches that changed since.
func (c *Core) WatchSlice(now time.Time, id ConnID) {
	cn := c.conns[id]
	if cn == nil {
		return
	}
	c.noteTime(now)
	cn.watchBusy = false
	c.sendDueWatches(now, cn)
}

// sendDueWatches sends cn, if it has room, the latest state of the keys
// due.
func (c *Core) sendDueWatches(now time.Time, cn *conn) {
	if !c.watchRoom(cn) {
		return
	}
	sent := false
	for k, due := range cn.watches {
		if due {
			cn.watches[k] = false
			line := c.watchLineOf(now, k)
			c.shared, c.ready.sharedCopy = line, nil
			c.emit(cn, record, line)
			c.shared, c.ready.sharedCopy = nil, nil
			sent = true
		}
	}
	if sent {
		c.watchSent(cn)
	}
}

// Watching reports whether connection id watches key.
func (c *Core) Watching(id ConnID, key string) bool {
	cn := c.conns[id]
	if cn == nil {
		return false
	}
	_, ok := cn.watches[key]
	return ok
}

// Watches is how many keys connection id watches.
func (c *Core) Watches(id ConnID) int {
	if cn := c.conns[id]; cn != nil {
		return len(cn.watches)
	}
	return 0
}

// queueOf is key's holders and waiters as Q and L answer them.
func (c *Core) queueOf(now time.Time, key string) proto.Queue {
	hs, ws, nwait := c.eng.InspectN(now, key, proto.MaxListKeys)
	q := proto.Queue{Key: key, Held: len(hs) > 0, Waiting: nwait}
	if len(hs) > 0 {
		q.Token, q.LeaseLeft, q.Limit = hs[0].Token, hs[0].LeaseLeft, hs[0].Limit
	}
	for _, h := range hs {
		q.Holders = append(q.Holders, proto.QueueHolder{Token: h.Token, LeaseLeft: h.LeaseLeft, ID: h.ID})
	}
	for _, w := range ws {
		addr := ""
		if wc := c.conns[ConnID(w.Waiter.Conn)]; wc != nil {
			addr = wc.remote
		}
		q.Waiters = append(q.Waiters, proto.QueueWaiter{Waited: w.Waited, Addr: addr, ID: w.ID})
	}
	return q
}

// Replicated waiters. The active streams each waiter whose acquire has
// an id (J when it joins the queue, D when it leaves without a grant; a
// G with its id says it was granted) to standbys that read them
// (PeerVersion 3). A standby keeps them, in queue order, beside its
// engine; when it takes the role, it queues them as ghosts (engine
// AddGhost) behind the holders, so a client that re-sends its acquire
// with the same id gets its place and its wait back. They do not count
// as state changes (seq): they move no token and no holder, and a
// standby of an older version, which never sees them, keeps counting
// the same positions.

// replWaiter is a waiter as a standby knows it.
type replWaiter struct {
	key   string
	id    string
	lease time.Duration
	until time.Time // when its wait ends; zero: forever
	limit int
}

// ghostGrace is how long a new active keeps the places of the waiters it
// was told of: its clients re-send their acquires as soon as they find
// it, well within a failure timeout; a place nobody claims is given up
// then (and never after engine.MaxGhostGrace).
func (c *Core) ghostGrace() time.Duration {
	return min(max(c.cfg.FailureTimeout, 500*time.Millisecond), engine.MaxGhostGrace)
}

// replicateWaiter streams a waiter's record: one with an id that joined
// a queue (RecJoined) or left it (RecLeft). Standbys before stream
// version 3 keep no queues, and are sent neither.
func (c *Core) replicateWaiter(rec proto.Record) {
	if rec.ID == "" || len(c.streams) == 0 {
		return
	}
	var b []byte
	for _, s := range c.streams {
		if s.stream.version < 3 {
			continue
		}
		if b == nil {
			b = proto.AppendRecord(c.buf[:0], rec)
		}
		c.write(s.id, record, b)
	}
	if b != nil {
		c.buf = b[:0]
	}
}

// snapshotWaiters lists every waiter with an id, in queue order, for a
// standby's snapshot. It goes right before the synced mark, so it is the
// queues as they are then; a waiter the standby heard of while the
// snapshot was sent moves to its listed place.
func (c *Core) snapshotWaiters(now time.Time, b []byte) []byte {
	c.eng.Waiters(now, func(key string, limit int, w engine.WaiterInfo) {
		if w.ID == "" {
			return
		}
		b = proto.AppendRecord(b, proto.Record{Kind: proto.RecJoined, Key: key, ID: w.ID, Limit: limit, Lease: w.Lease, Wait: w.WaitLeft})
	})
	return b
}

// applyJoined takes a J record in: the waiter goes to the tail of its
// key, moving there if it was known already.
func (c *Core) applyJoined(now time.Time, rec proto.Record) {
	c.forgetWaiter(rec.ID)
	w := replWaiter{key: rec.Key, id: rec.ID, lease: rec.Lease, limit: rec.Limit}
	if rec.Wait > 0 {
		w.until = now.Add(rec.Wait)
	}
	if c.rwait == nil {
		c.rwait = make(map[string][]replWaiter)
		c.rwaitKey = make(map[string]string)
	}
	c.rwait[rec.Key] = append(c.rwait[rec.Key], w)
	c.rwaitKey[rec.ID] = rec.Key
}

// forgetWaiter drops the replicated waiter with id: it left, or was
// granted (a G record with its id).
func (c *Core) forgetWaiter(id string) {
	key, ok := c.rwaitKey[id]
	if !ok {
		return
	}
	delete(c.rwaitKey, id)
	ws := slices.DeleteFunc(c.rwait[key], func(w replWaiter) bool { return w.id == id })
	if len(ws) == 0 {
		delete(c.rwait, key)
	} else {
		c.rwait[key] = ws
	}
}

// queueGhosts, on promotion, queues the replicated waiters as ghosts.
func (c *Core) queueGhosts(now time.Time) {
	if len(c.rwait) == 0 || c.has(bugNoPlaces) {
		c.rwait, c.rwaitKey = nil, nil
		return
	}
	keys := make([]string, 0, len(c.rwait))
	for k := range c.rwait {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	grace := c.ghostGrace()
	n := 0
	for _, k := range keys {
		for _, w := range c.rwait[k] {
			left := time.Duration(0)
			if !w.until.IsZero() {
				if left = w.until.Sub(now); left <= 0 {
					continue
				}
			}
			if c.eng.AddGhost(now, k, w.limit, w.id, w.lease, left, grace) {
				n++
			}
		}
	}
	c.rwait, c.rwaitKey = nil, nil
	if n > 0 {
		c.log.Info("kept the places of the last active's waiters", "self", c.self, "waiters", n, "grace", grace.String())
	}
}
