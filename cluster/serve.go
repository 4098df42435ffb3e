package cluster

import (
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// item is one line read from a connection: a request, or why it is not.
type item struct {
	req proto.Request
	err error
}

// apply hands a batch of parsed lines from c to the core under one
// acquisition of the node mutex; a key listing (K) lets go of it while it
// scans, and a new standby's snapshot is sent by a goroutine of its own.
func (n *Node) apply(c *conn, batch []item) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.gone {
		return
	}
	n.batchStarts()
	defer n.batchLogged()
	// Answers for other connections are written by c's reader after the
	// batch (direct.go), if it asked to.
	n.direct = c.direct
	defer func() { n.direct = nil }()
	id := core.ConnID(c.id)
	now := n.now()
	// answered: the requests of the batch answered at once, for the
	// request duration if the batch is timed.
	timed := c.timed
	c.timed = false
	answered := uint64(0)
	for i := range batch {
		it := &batch[i]
		if it.err != nil {
			pe, _ := it.err.(*proto.ParseError)
			if pe == nil {
				pe = &proto.ParseError{Key: proto.WordNone, Msg: it.err.Error()}
			}
			pe = unechoed(c, pe)
			n.stats.begin(c, pe.Op, pe.Key)
			n.core.RequestError(now, id, pe)
			n.stepLocked()
			answered += n.stats.end(c, now)
			if n.strangerRefusedLocked(c) {
				return
			}
			continue
		}
		req := &it.req
		switch need := needs(req); {
		case req.Op == proto.OpAuth:
			n.authStep(c, req)
			n.countAuth(c)
			answered++
			if n.strangerRefusedLocked(c) {
				return
			}
		case c.role < need:
			if need >= auth.Admin {
				n.refusedLog.log(n.log, "request refused", "remote", c.remote, "op", req.Op.String(), "key", req.Key, "needs", need.String(), "has", c.role.String())
			}
			n.stats.begin(c, req.Op, req.Key)
			n.core.Refuse(now, id, req.Op, req.Key, n.gate.refusal(need, c.role))
			n.stepLocked()
			answered += n.stats.end(c, now)
			if n.strangerRefusedLocked(c) {
				return
			}
		default:
			// Peer messages are no client requests: their connection's
			// answers are not counted.
			c.peer = c.peer || need == auth.Peer || opIndex[req.Op] < 0
			n.stats.begin(c, req.Op, req.Key)
			if why := n.watchRefusalLocked(c, req); why != "" {
				n.core.Refuse(now, id, req.Op, req.Key, why)
				n.stepLocked()
				answered += n.stats.end(c, now)
				continue
			}
			n.scanning = nil
			n.core.Request(now, id, *req)
			n.stepLocked()
			answered += n.stats.end(c, now)
			if req.Op == proto.OpWatch || req.Op == proto.OpUnwatch {
				n.watchesChangedLocked(c)
			}
			if n.scanning == c {
				// A key listing: c's reader scans it, a slice at a time,
				// before it reads on, so it is answered before the
				// requests that follow it.
				n.scanning = nil
				n.stepLocked()
				n.direct = nil
				n.batchLogged()
				n.mu.Unlock()
				// The answers c's reader held back (direct.go) go before a
				// scan that may wait for others'.
				c.writeHeld()
				n.scanKeys(c)
				n.mu.Lock()
				n.batchStarts()
				if c.gone {
					return
				}
				n.direct = c.direct
				now = n.now()
			}
		}
	}
	if timed && answered > 0 {
		n.stats.latency.add(time.Since(n.base)-c.readAt, answered)
	}
	n.stepLocked()
}

// startSnapshot sends a new standby's snapshot from a goroutine of its
// own, a slice per hold of the mutex, never running ahead of what the
// standby reads, for as long as the core asks for more (Feed). n.mu is
// held.
func (n *Node) startSnapshot(c *conn) {
	c.outMu.Lock()
	c.stream = true
	c.outMu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for c.waitRoom() {
			n.mu.Lock()
			if c.gone || !c.feedDue {
				c.feeder = false
				n.mu.Unlock()
				return
			}
			c.feedDue = false
			n.core.SnapshotSlice(n.now(), core.ConnID(c.id))
			n.stepLocked()
			n.mu.Unlock()
		}
		n.mu.Lock()
		c.feeder = false
		n.mu.Unlock()
	}()
}

// keysPause is the pause between two slices of a key listing: Go's
// mutex would otherwise hand the lock straight back to the scanner, and
// the clients waiting for it would wait for the whole scan.
const keysPause = 50 * time.Microsecond

// scanKeys drives the key listings the core scans for c (core.Out.Scan),
// a slice per hold of the node mutex, so that others are served in
// between; one slice at a time runs, the listings of every address
// taking turns (turns.go).
func (n *Node) scanKeys(c *conn) {
	ok := n.scanTurns.take(n.ctx, c.ip)
	for ok {
		n.mu.Lock()
		if !c.gone && c.scanDue {
			c.scanDue = false
			n.core.KeysSlice(n.now(), core.ConnID(c.id))
			n.stepLocked()
		}
		if c.gone || !c.scanDue {
			c.scanner = false
			n.mu.Unlock()
			n.scanTurns.give()
			return
		}
		n.mu.Unlock()
		// In line for the next slice before the pause: the other
		// listings' slices run meanwhile.
		ok = n.scanTurns.pass(n.ctx, c.ip, func() { time.Sleep(keysPause) })
	}
	n.mu.Lock()
	c.scanner = false
	n.mu.Unlock()
}
