package cluster

import (
	"slices"
	"sync"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
)

// Carrying out what the core asks.
//
// Every event goes to the core under n.mu; what the events asked comes
// back as one core.Ready, which the goroutine that fed them carries out
// after it lets go of the mutex (unlock): the next goroutine's events
// run meanwhile. Readies are carried out in the order they were taken:
// a goroutine takes applyMu before it lets go of n.mu, so the next one to
// take a Ready waits, still holding n.mu, until the one before is carried
// out. What carries a Ready out therefore never takes n.mu: it writes to
// buffers and sockets, starts goroutines, and leaves what it must tell
// the core (a grant whose connection went, a connection ready for more
// watch news) in n.feedback, which the same goroutine feeds the core
// once it is done, under n.mu again.
//
// applyMu guards n.ready, n.feedback, the statistics of answers
// (n.stats), n.follow, and n.conns for reading: the map changes under
// both locks.

// carry is what the goroutine carrying out a Ready knows of itself.
type carry struct {
	// by is the connection whose reader carries it out, if any: a key
	// listing of by is scanned by that reader (scan is set).
	by   *conn
	scan bool
	// direct collects the connections whose answers this goroutine
	// writes itself once the Ready is carried out (outwriter.go).
	direct *flushList
	// atOnce counts the answers to by's requests given by the events
	// that took them up, for the request duration.
	atOnce uint64
	logged bool // records went to the log: the syncer is woken
}

// feedback is an event a carried-out Ready has for the core.
type feedback struct {
	undelivered bool      // send: a grant whose connection is gone
	send        core.Send // (its line is not kept)
	watch       *conn     // a connection ready for the next watch news
}

// unlock lets go of n.mu, which the caller holds after feeding the core
// events, and carries out what they asked. k says who carries it out;
// nil for a goroutine with no connection of its own.
func (n *Node) unlock(k *carry) {
	if k == nil {
		k = &carry{}
	}
	for {
		if !n.core.Pending() {
			n.armLocked(n.core.NextWake())
			n.mu.Unlock()
			return
		}
		n.applyMu.Lock()
		n.core.TakeReady(&n.ready)
		n.armLocked(n.ready.Wake)
		n.mu.Unlock()
		for i := range n.ready.Actions {
			n.carryOut(&n.ready.Actions[i], k)
		}
		if k.logged {
			k.logged = false
			n.disk.kick()
		}
		fb := n.feedback
		n.feedback = nil
		n.applyMu.Unlock()
		if len(fb) == 0 {
			return
		}
		n.mu.Lock()
		now := n.now()
		for _, f := range fb {
			switch {
			case f.undelivered:
				n.core.Undelivered(now, f.send)
			case !f.watch.gone:
				n.core.WatchSlice(now, core.ConnID(f.watch.id))
			}
		}
	}
}

// carryOutLocked carries out what the events so far asked and takes
// n.mu again: for an answer of the shell's own, which must follow theirs.
func (n *Node) carryOutLocked(k *carry) {
	if n.core.Pending() {
		n.unlock(k)
		n.mu.Lock()
	}
}

// armLocked makes sure the timer fires by wake, the core's next need of
// a Tick. n.mu is held.
func (n *Node) armLocked(wake time.Time) {
	if n.timer == nil || !n.armedAt.IsZero() && !wake.Before(n.armedAt) {
		return // not running yet (Run arms it), or armed soon enough
	}
	n.armedAt = wake
	n.timer.Reset(max(wake.Sub(n.now()), 0))
}

// carryOut carries out one action of the core. applyMu is held, n.mu is
// not.
func (n *Node) carryOut(a *core.Action, k *carry) {
	switch a.Kind {
	case core.ActSend:
		n.send(a.Send, k)
	case core.ActScan:
		if c := n.conns[uint64(a.Conn)]; c != nil && c.scan.ask() {
			if c == k.by {
				k.scan = true // its reader scans it before reading on
			} else if n.ctx != nil {
				n.wg.Add(1)
				go func() {
					defer n.wg.Done()
					n.scanKeys(c)
				}()
			} else {
				c.scan.stop()
			}
		}
	case core.ActFeed:
		if c := n.conns[uint64(a.Conn)]; c != nil && c.feed.ask() {
			n.startSnapshot(c)
		}
	case core.ActClose:
		if c := n.conns[uint64(a.Conn)]; c != nil {
			c.flushAndClose()
		}
	case core.ActBeat:
		if l := n.links[a.Peer]; l != nil {
			l.queue(a.Line)
		}
	case core.ActFollow:
		n.followTarget(a.Peer)
	case core.ActStreamReply:
		if f := n.follow; f != nil && f.target == a.Peer {
			f.reply(a.Line, k.direct)
		}
	case core.ActStreamEnd:
		if f := n.follow; f != nil && f.target == a.Peer {
			f.end(a.Err)
		}
	case core.ActRoleChanged:
		// A standby's replication position follows the active's: what
		// it was then says nothing of when this node made its records.
		n.seqsStale.Store(true)
		n.watchesStale.Store(true)
	case core.ActAsk:
		if n.ctx != nil {
			n.wg.Add(1)
			// (Its own copy of the line: the Ready's room is reused.)
			go n.ask(a.ID, a.Peer, slices.Clone(a.Line), a.Timeout)
		}
	case core.ActStopped:
		n.stopOnce.Do(func() { close(n.stopped) })
	case core.ActLog:
		if d := n.disk; d != nil {
			d.log.Append(a.At.UnixNano(), a.Line)
			k.logged = true
		}
	case core.ActWatchDrain:
		n.watchDrain(a.Conn)
	}
}

// send queues the core's answer s for its connection and counts it. A
// grant that finds its connection gone goes back to the core
// (Undelivered), so that the lock is released rather than held by no one.
func (n *Node) send(s core.Send, k *carry) {
	c := n.conns[uint64(s.Conn)]
	if c != nil {
		n.countAnswer(c, &s, k)
		if c.out.queue(s.Line, k.direct) {
			return
		}
	}
	if s.Outcome == core.Granted {
		s.Line = nil
		n.feedback = append(n.feedback, feedback{undelivered: true, send: s})
	}
}

// followTarget keeps the replication stream from target open, or none
// when target is "".
func (n *Node) followTarget(target string) {
	if f := n.follow; f != nil {
		if f.target == target {
			return
		}
		f.stop()
		n.follow = nil
	}
	if target != "" && n.ctx != nil {
		n.follow = newFollowStream(n, target)
		n.wg.Add(1)
		go n.follow.run()
	}
}

// duty is work a goroutine does for a connection while the core asks for
// it (a key listing's slices, a snapshot's): at most one goroutine runs
// it, and an ask while it runs is one more round for it.
type duty struct {
	mu      sync.Mutex
	due     bool
	running bool
}

// ask says a round is due, and reports whether the caller is to start the
// goroutine that runs it (none runs).
func (d *duty) ask() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.due = true
	if d.running {
		return false
	}
	d.running = true
	return true
}

// next reports whether a round is due, taking it; when none is, the
// goroutine is done, and the next ask starts another.
func (d *duty) next() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.due {
		d.due = false
		return true
	}
	d.running = false
	return false
}

// stop ends the goroutine's run whatever is due: the connection is gone.
func (d *duty) stop() {
	d.mu.Lock()
	d.due, d.running = false, false
	d.mu.Unlock()
}

// busy reports whether a goroutine runs d.
func (d *duty) busy() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running
}

// watchDrain carries out ActWatchDrain: c was sent watch news, and the
// core is told (WatchSlice) once c has written what it holds, to send the
// latest state of what changed meanwhile (outWriter.watchWhenDrained).
// applyMu is held.
func (n *Node) watchDrain(id core.ConnID) {
	c := n.conns[uint64(id)]
	if c != nil && c.out.watchWhenDrained() {
		n.feedback = append(n.feedback, feedback{watch: c})
	}
}

// watchSlice has the core send c the watch news that waited for room.
func (n *Node) watchSlice(c *conn) {
	n.mu.Lock()
	if !c.gone {
		n.core.WatchSlice(n.now(), core.ConnID(c.id))
	}
	n.unlock(nil)
}
