package core

import (
	"slices"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// Connections as they open and close, and the waiters a closed one leaves.

// ConnOpened registers a connection the shell accepted from remote.
func (c *Core) ConnOpened(now time.Time, id ConnID, remote string) {
	c.noteTime(now)
	c.conns[id] = &conn{id: id, remote: remote}
}

// ConnClosed forgets a connection: its waiters leave their queues, and a
// replication stream it carried ends.
func (c *Core) ConnClosed(now time.Time, id ConnID) {
	cn := c.conns[id]
	if cn == nil {
		return
	}
	c.noteTime(now)
	delete(c.conns, id)
	for key, q := range cn.pending {
		for _, p := range q {
			if !p.done() {
				c.cancel(now, key, waiterOf(cn, p.seq()))
				c.count.Cancelled[proto.OpAcquire-'A']++
			}
		}
	}
	for seq, r := range cn.refs {
		c.cancel(now, r.key, waiterOf(cn, seq))
		c.count.Cancelled[proto.OpAcquire-'A']++
	}
	c.count.Cancelled[proto.OpKeys-'A'] += uint64(len(cn.lists))
	for key := range cn.watches {
		c.dropWatch(cn, key)
	}
	cn.pending, cn.early, cn.refs = nil, nil, nil
	c.flushWatches(now)
	if len(cn.held) > 0 {
		cn.held = nil
		c.holding = slices.DeleteFunc(c.holding, func(h *conn) bool { return h == cn })
	}
	for i, p := range c.parked {
		if p.c == id {
			c.parked[i].c = 0
			if op := p.req.Op; op >= 'A' && op <= 'Z' {
				c.count.Cancelled[op-'A']++
			}
		}
	}
	if cn.stream != nil {
		c.streamClosed(now, cn)
	}
}

// cancel takes a waiter of a closed connection out of its queue, and
// routes what that let through.
func (c *Core) cancel(now time.Time, key string, w engine.Waiter) {
	if !c.serving() {
		// Paused, or handing off: a waiter that leaves may let others
		// through, and the engine fires the deadlines due first, which
		// this node must not do now (it would grant). It leaves once
		// the node serves again, or never, when the node steps down and
		// takes the new active's state.
		c.cancelLater = append(c.cancelLater, lateCancel{key, w})
		return
	}
	c.cancelsDue(now)
	id := c.eng.WaiterID(w)
	var buf [engine.MaxSetKeys]string
	keys := c.eng.WaiterKeys(w, buf[:0])
	evs, ok := c.eng.Cancel(now, w, c.evs[:0])
	if ok {
		c.replicateWaiter(proto.Record{Kind: proto.RecLeft, Key: key, ID: id})
		c.touch(key)
		for _, k := range keys {
			c.touch(k) // a set's other keys: their watchers see it leave
		}
	}
	c.route(now, evs)
}

// lateCancel is a waiter of a closed connection that leaves its queue
// once the node serves again.
type lateCancel struct {
	key string
	w   engine.Waiter
}

// cancelsDue takes out of their queues the waiters whose connections
// closed while this node did not serve.
func (c *Core) cancelsDue(now time.Time) {
	late := c.cancelLater
	c.cancelLater = nil
	for _, l := range late {
		c.cancel(now, l.key, l.w)
	}
}
