package cluster

import (
	"time"

	"github.com/lockd-io/lockd/cluster/core"
)

// shellOut carries the core's actions out (core.Ready). Its methods run
// under n.mu, as stepLocked takes each action in order.
type shellOut Node

// applyLocked carries out one action of the core. n.mu is held.
func (n *Node) applyLocked(a *core.Action) {
	o := (*shellOut)(n)
	switch a.Kind {
	case core.ActSend:
		if !o.Send(a.Send) && a.Send.Outcome == core.Granted {
			// The connection went before the core heard: the lock is
			// released rather than held by no one.
			n.core.Undelivered(n.now(), a.Send)
		}
	case core.ActScan:
		o.Scan(a.Conn)
	case core.ActFeed:
		o.Feed(a.Conn)
	case core.ActClose:
		o.Close(a.Conn)
	case core.ActBeat:
		o.Beat(a.Peer, a.Line)
	case core.ActFollow:
		o.Follow(a.Peer)
	case core.ActStreamReply:
		o.StreamReply(a.Peer, a.Line)
	case core.ActStreamEnd:
		o.StreamEnd(a.Peer, a.Err)
	case core.ActRoleChanged:
		o.RoleChanged(a.Role, a.Active)
	case core.ActAsk:
		o.Ask(a.ID, a.Peer, a.Line, a.Timeout)
	case core.ActStopped:
		o.Stopped()
	case core.ActLog:
		o.Log(a.At, a.Line)
	case core.ActWatchDrain:
		o.WatchDrain(a.Conn)
	}
}

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
