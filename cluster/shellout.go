package cluster

import (
	"time"

	"github.com/lockd-io/lockd/cluster/core"
)

// shellOut carries the core's actions out (core.Out). Its methods run
// under n.mu, from inside a core call.
type shellOut Node

func (o *shellOut) Send(s core.Send) bool {
	n := (*Node)(o)
	c := n.conns[uint64(s.Conn)]
	if c == nil {
		return false
	}
	n.countAnswer(c, &s)
	return c.queue(s.Line, n.direct)
}

// Scan has the key listing of id scanned by the reader that applies its
// request when the request is being applied, so that it is answered
// before the requests that follow it; otherwise (a listing held back
// during a handoff) by a goroutine of its own. A Scan while one of them
// drives c's listings asks it for one more slice.
func (o *shellOut) Scan(id core.ConnID) {
	n := (*Node)(o)
	c := n.conns[uint64(id)]
	if c == nil {
		return
	}
	c.scanDue = true
	if c.scanner {
		return
	}
	if n.stats.cur.c == c {
		c.scanner = true
		n.scanning = c
		return
	}
	if n.ctx == nil {
		return
	}
	c.scanner = true
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.scanKeys(c)
	}()
}

// Feed has a new standby's snapshot sent by a goroutine of its own
// (startSnapshot); a Feed while it runs asks it for one more slice.
func (o *shellOut) Feed(id core.ConnID) {
	n := (*Node)(o)
	c := n.conns[uint64(id)]
	if c == nil {
		return
	}
	c.feedDue = true
	if !c.feeder {
		c.feeder = true
		n.startSnapshot(c)
	}
}

func (o *shellOut) Close(id core.ConnID) {
	if c := (*Node)(o).conns[uint64(id)]; c != nil {
		c.flushAndClose()
	}
}

func (o *shellOut) Beat(peer string, b []byte) {
	if l := (*Node)(o).links[peer]; l != nil {
		l.queue(b)
	}
}

func (o *shellOut) Follow(target string) {
	n := (*Node)(o)
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

func (o *shellOut) StreamReply(target string, b []byte) {
	n := (*Node)(o)
	if f := n.follow; f != nil && f.target == target {
		if n.playing(faultLoseTakeover) {
			f.stop()
			return
		}
		f.reply(b)
	}
}

func (o *shellOut) StreamEnd(target string, err error) {
	if f := (*Node)(o).follow; f != nil && f.target == target {
		f.end(err)
	}
}

// RoleChanged starts the record of this node's replication position
// afresh: a standby's position follows the active's, so what it was
// then says nothing of when this node produced its records.
func (o *shellOut) RoleChanged(core.Role, string) {
	(*Node)(o).stats.seqs.reset()
	(*Node)(o).watchesStale = true
}

func (o *shellOut) Ask(id uint64, peer string, b []byte, timeout time.Duration) {
	n := (*Node)(o)
	if n.ctx == nil {
		return
	}
	n.wg.Add(1)
	go n.ask(id, peer, b, timeout)
}

func (o *shellOut) Stopped() {
	close((*Node)(o).stopped)
}
