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
// acquisition of the node mutex, and carries out what they asked once it
// lets go (carry.go); a key listing (K) is scanned, a slice per hold of
// the mutex, before the requests after it. With direct, the answers for
// other connections are written by c's reader after the batch
// (outwriter.go).
func (n *Node) apply(c *conn, batch []item, direct *flushList) {
	k := carry{by: c, direct: direct}
	timed := c.timed
	c.timed = false
	n.mu.Lock()
	for i := 0; i < len(batch); {
		if c.gone {
			n.unlock(&k)
			return
		}
		handed, stop := n.applyLocked(c, batch[i:], &k)
		i += handed
		n.unlock(&k)
		if stop {
			return
		}
		if k.scan {
			// A key listing: c's reader scans it, a slice at a time,
			// before it reads on, so it is answered before the
			// requests that follow it. The answers c's reader held
			// back (outWriter.holdBack) go before a scan that may wait
			// for others'.
			k.scan = false
			c.out.writeHeld()
			n.scanKeys(c)
		}
		if i < len(batch) {
			n.mu.Lock()
		}
	}
	if timed && k.atOnce > 0 {
		n.applyMu.Lock()
		n.stats.latency.add(time.Since(n.base)-c.readAt, k.atOnce)
		n.applyMu.Unlock()
	}
}

// applyLocked hands the core requests of batch until one whose answers
// must be carried out before the next is applied: a key listing, which
// c's reader scans, and any request of a connection not authenticated
// yet, whose answers the shell may follow with its own (an I's, a
// refusal to read more). It returns how many it handed, and whether c's
// reader is to stop: c refused to read more. n.mu is held.
func (n *Node) applyLocked(c *conn, batch []item, k *carry) (int, bool) {
	id := core.ConnID(c.id)
	now := n.now()
	for i := range batch {
		it := &batch[i]
		if c.role == auth.None || it.err == nil && (it.req.Op == proto.OpAuth || it.req.Op == proto.OpKeys) {
			if i > 0 {
				return i, false
			}
			return 1, n.applyOne(c, id, now, it, k)
		}
		n.applyOne(c, id, now, it, k)
	}
	return len(batch), false
}

// applyOne hands the core one line read on c, and reports whether c is
// to read no more: a connection not authenticated refused. n.mu is held.
func (n *Node) applyOne(c *conn, id core.ConnID, now time.Time, it *item, k *carry) bool {
	if it.err != nil {
		pe, _ := it.err.(*proto.ParseError)
		if pe == nil {
			pe = &proto.ParseError{Key: proto.WordNone, Msg: it.err.Error()}
		}
		n.core.RequestError(now, id, unechoed(c, pe))
		if c.role == auth.None {
			n.carryOutLocked(k) // before a closing line of the shell's
		}
		return n.strangerRefusedLocked(c)
	}
	req := &it.req
	switch need := req.Needs(); {
	case req.Op == proto.OpAuth:
		// The shell's own answer: what the core answered before it
		// goes first.
		n.carryOutLocked(k)
		n.authStep(c, req)
		n.countAuth(c)
		k.atOnce++
		return n.strangerRefusedLocked(c)
	case c.role < need:
		if need >= auth.Admin {
			n.refusedLog.log(n.log, "request refused", "remote", c.remote, "op", req.Op.String(), "key", req.Key, "needs", need.String(), "has", c.role.String())
		}
		n.core.Refuse(now, id, req.Op, req.Key, n.gate.refusal(need, c.role))
		n.carryOutLocked(k)
		return n.strangerRefusedLocked(c)
	default:
		// Peer messages are no client requests: their connection's
		// answers are not counted.
		if need == auth.Peer || opIndex[req.Op] < 0 {
			if !c.peer.Swap(true) && c.tcp != nil {
				c.tcp.SetWriteBuffer(peerSendBuffer)
			}
		}
		if req.Op == proto.OpWatch {
			if why := n.watchRefusalLocked(c, req); why != "" {
				n.core.Refuse(now, id, req.Op, req.Key, why)
				return false
			}
		}
		n.core.Request(now, id, *req)
		if req.Op == proto.OpWatch || req.Op == proto.OpUnwatch {
			n.watchesChangedLocked(c)
		}
	}
	return false
}

// startSnapshot sends a new standby's snapshot from a goroutine of its
// own, a slice per hold of the mutex, never running ahead of what the
// standby reads, for as long as the core asks for more (ActFeed).
func (n *Node) startSnapshot(c *conn) {
	c.out.setStream()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for c.out.waitRoom(n.ctx) {
			if !c.feed.next() {
				return
			}
			n.mu.Lock()
			if c.gone {
				n.mu.Unlock()
				break
			}
			n.core.SnapshotSlice(n.now(), core.ConnID(c.id))
			n.unlock(nil)
		}
		c.feed.stop()
	}()
}

// keysPause is the pause between two slices of a key listing: Go's
// mutex would otherwise hand the lock straight back to the scanner, and
// the clients waiting for it would wait for the whole scan.
const keysPause = 50 * time.Microsecond

// scanKeys drives the key listings the core scans for c (ActScan), a
// slice per hold of the node mutex, so that others are served in
// between; one slice at a time runs, the listings of every address
// taking turns (turns.go).
func (n *Node) scanKeys(c *conn) {
	ok := n.scanTurns.take(n.ctx, c.ip)
	for ok {
		if !c.scan.next() {
			n.scanTurns.give()
			return
		}
		n.mu.Lock()
		if c.gone {
			n.mu.Unlock()
			n.scanTurns.give()
			break
		}
		n.core.KeysSlice(n.now(), core.ConnID(c.id))
		n.unlock(nil)
		// In line for the next slice before the pause: the other
		// listings' slices run meanwhile.
		ok = n.scanTurns.pass(n.ctx, c.ip, func() { time.Sleep(keysPause) })
	}
	c.scan.stop()
}
