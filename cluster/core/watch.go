package core

import (
	"slices"
	"strconv"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// Watches (L, U): who watches which key, and the news each is sent.

// Defaults of the watch bounds (Config.MaxWatches, MaxTotalWatches).
const (
	DefaultMaxWatches      = 256
	DefaultMaxTotalWatches = 100_000
)

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

// touch notes that key's holders or waiters changed. It is small enough
// to inline: a node without watches pays a test for it.
func (c *Core) touch(key string) {
	if len(c.watchers) != 0 {
		c.touchWatched(key)
	}
}

// touchWatched is touch on a node with watches.
func (c *Core) touchWatched(key string) {
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
	if len(c.dirty) != 0 {
		c.sendWatchNews(now)
	}
}

// sendWatchNews is flushWatches with keys touched.
func (c *Core) sendWatchNews(now time.Time) {
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
		q.Shared = hs[0].Mode == engine.Shared
	}
	for _, h := range hs {
		q.Holders = append(q.Holders, proto.QueueHolder{Token: h.Token, LeaseLeft: h.LeaseLeft, ID: h.ID, Set: h.Set, Place: h.Place, Value: h.Value})
	}
	for _, w := range ws {
		addr := ""
		if wc := c.conns[ConnID(w.Waiter.Conn)]; wc != nil {
			addr = wc.remote
		}
		qw := proto.QueueWaiter{Waited: w.Waited, Addr: addr, ID: w.ID, Shared: w.Mode == engine.Shared}
		for _, k := range w.Set {
			qw.Set = append(qw.Set, k.Key)
		}
		q.Waiters = append(q.Waiters, qw)
	}
	return q
}
