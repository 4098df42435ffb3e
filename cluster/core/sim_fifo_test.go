package core

// FIFO across failover and handoff, checked end to end.
//
// The promise: when waiters b then c of a key were queued at the active
// and their J records reached a standby, and that standby takes the role
// (a failover or a handoff), and both b and c re-send their acquire with
// the same id to it within the grace, then it grants b before c, unless
// b's wait ended first, b was withdrawn, or b's connection to it closed
// (its client dropped or gave up) before c's grant, or both are readers
// of the key (readers do not hold each other back: b, a set, may wait
// for its other keys while c reads).
//
// Which histories it covers:
//   - What the successor was told is read from the records it applied (J
//     appends a waiter to its key's tail, moving it there if known; D and
//     a G with the id forget it; a new stream starts from nothing, its
//     snapshot lists them again), not from its core. The stream is in
//     order, so if c's J reached the successor, b's did too, with the
//     place the active gave it; a waiter whose J never arrived is no part
//     of the promise.
//   - J and D are not acknowledged, and need not be. A waiter has no
//     answer to hold back until it is granted, and the grant's G is
//     acknowledged in sync mode like any other. A J lost with a crash
//     leaves its waiter out of the successor's places: it re-sends and
//     joins the tail, as a newcomer, with nothing promised it had been
//     told. What a standby did apply is ordered, and the ghost places keep
//     a c that re-sends first from overtaking a b that re-sends within the
//     grace: the place at the head is kept free for b meanwhile. So the
//     checker holds the promise for every J the successor applied, acked
//     or not.
//   - While every fault so far was one that loses nothing (s.faulty, as
//     for mutual exclusion): a kill -9 or a freeze of the active under
//     synchronous replication, and every graceful move (SIGINT, lockctl
//     handoff) in either mode, which is what lockd promises. After a crash
//     in async mode, a partition, or a shutdown without a handoff, two
//     nodes may serve at once, or the successor may have missed records
//     it would need, and nothing is promised. A wiped state is exempt by
//     construction: a restarted node applied no records, so it keeps no
//     places. A frozen active is a failover like a crash to its standbys;
//     when it thaws and yields, its waiters are moved (M) long after the
//     grace, so they join the tail, and nothing is promised of them.
//   - Margins of a millisecond on the grace and on the waits keep the
//     checker from judging instants where the engine's own deadlines fall.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// fifoShadow is what a standby was told of the active's waiters: by key,
// in queue order.
type fifoShadow map[string][]fifoPlace

type fifoPlace struct {
	id     string
	until  time.Duration // when its wait ends; 0: never
	shared bool          // a reader
}

// fifoEpoch is one stretch of a node serving as active after it took
// the role with the places of its predecessor's waiters.
type fifoEpoch struct {
	gen   int
	from  time.Duration
	order map[string][]fifoPlace
	ws    map[string]*fifoWaiter // by id
	key   map[string]string      // the key of each id
}

// fifoWaiter is what became of a waiter the successor kept a place for.
type fifoWaiter struct {
	arrived   time.Duration // its re-sent acquire reached the node; -1: not yet
	conn      *simConn      // the connection it came on
	member    bool          // it came within the grace and its wait: its place was kept for it
	granted   bool
	ended     bool          // answered otherwise, withdrawn, or its connection closed
	overtaken []string      // granted before it came: each must not have been, if it comes in time
	overAt    time.Duration // when the first of them was
}

// fifoGrace is the grace a new active keeps places for, as the core
// computes it (Core.ghostGrace).
func (s *sim) fifoGrace() time.Duration {
	return min(max(s.cfg.failure, 500*time.Millisecond), 5*time.Second)
}

// fifoChecked reports whether the promise applies to the run now.
func (s *sim) fifoChecked() bool { return !s.faulty }

// fifoRecord updates n's shadow after it applied a record.
func (s *sim) fifoRecord(n *simNode, a proto.Answer) {
	if k := proto.RecordKind(a.Kind); k != proto.RecJoined && k != proto.RecLeft && k != proto.RecHeld {
		return
	}
	rec, err := proto.ParseRecord(a)
	if err != nil || rec.ID == "" {
		return
	}
	if s.fifoShadows == nil {
		s.fifoShadows = make(map[int]fifoShadow)
	}
	sh := s.fifoShadows[n.idx]
	for k, ps := range sh {
		if i := slices.IndexFunc(ps, func(p fifoPlace) bool { return p.id == rec.ID }); i >= 0 {
			sh[k] = slices.Delete(ps, i, i+1)
		}
	}
	if rec.Kind != proto.RecJoined {
		return
	}
	if sh == nil {
		sh = make(fifoShadow)
		s.fifoShadows[n.idx] = sh
	}
	p := fifoPlace{id: rec.ID, shared: rec.Shared}
	if rec.Wait > 0 {
		p.until = s.now + rec.Wait
	}
	sh[rec.Key] = append(sh[rec.Key], p)
}

// fifoForget drops n's shadow: a new stream (its snapshot lists the
// waiters again) or a new incarnation.
func (s *sim) fifoForget(n *simNode) { delete(s.fifoShadows, n.idx) }

// fifoPromoted: n became active; the places it was told of are the
// order it owes.
func (s *sim) fifoPromoted(n *simNode) {
	sh := s.fifoShadows[n.idx]
	delete(s.fifoShadows, n.idx)
	if s.fifoEpochs == nil {
		s.fifoEpochs = make(map[int]*fifoEpoch)
	}
	e := &fifoEpoch{gen: n.gen, from: s.now, order: make(map[string][]fifoPlace), ws: make(map[string]*fifoWaiter), key: make(map[string]string)}
	for k, ps := range sh {
		for _, p := range ps {
			if p.until != 0 && p.until <= s.now+time.Millisecond {
				continue // its wait ended: no place is kept
			}
			e.order[k] = append(e.order[k], p)
			e.ws[p.id] = &fifoWaiter{arrived: -1}
			e.key[p.id] = k
		}
	}
	s.fifoEpochs[n.idx] = e
	if len(e.ws) > 1 {
		s.fifoPromotions++
	}
}

// fifoDemoted: n no longer serves; what it owed ends.
func (s *sim) fifoDemoted(n *simNode) { delete(s.fifoEpochs, n.idx) }

func (s *sim) fifoEpoch(n *simNode) *fifoEpoch {
	e := s.fifoEpochs[n.idx]
	if e == nil || e.gen != n.gen {
		return nil
	}
	return e
}

// fifoArrived: an acquire reached n on the client connection c.
func (s *sim) fifoArrived(n *simNode, c *simConn, req proto.Request) {
	if s.fifoConnAcq == nil {
		s.fifoConnAcq = make(map[*simConn]string)
	}
	s.fifoConnAcq[c] = req.ID
	e := s.fifoEpoch(n)
	if e == nil || req.ID == "" || req.Try {
		return
	}
	w := e.ws[req.ID]
	if w == nil || e.key[req.ID] != req.Key || w.arrived >= 0 || w.ended {
		return
	}
	w.arrived, w.conn = s.now, c
	until := e.until(req.ID)
	w.member = s.now < e.from+s.fifoGrace()-time.Millisecond && (until == 0 || s.now < until-time.Millisecond)
	if w.member && len(w.overtaken) > 0 && s.fifoChecked() {
		s.fail("FIFO across failover: node %d granted %s's acquire %v at %.4fs, ahead of %s, which was queued before it and came back within the grace (%.4fs)",
			n.idx, e.key[req.ID], w.overtaken, w.overAt.Seconds(), req.ID, s.now.Seconds())
	}
	if w.member {
		s.fifoMembers++
	}
}

func (e *fifoEpoch) until(id string) time.Duration {
	for _, p := range e.order[e.key[id]] {
		if p.id == id {
			return p.until
		}
	}
	return 0
}

// fifoAnswered: n answers the acquire outstanding on client connection c.
func (s *sim) fifoAnswered(n *simNode, c *simConn, outcome Outcome) {
	e := s.fifoEpoch(n)
	if e == nil {
		return
	}
	id := s.fifoConnAcq[c]
	w := e.ws[id]
	if w == nil || w.conn != c || w.granted || w.ended {
		return
	}
	if outcome != Granted {
		w.ended = true
		return
	}
	w.granted = true
	if !w.member {
		return
	}
	key := e.key[id]
	shared := false
	for _, p := range e.order[key] {
		if p.id == id {
			shared = p.shared
		}
	}
	for _, p := range e.order[key] {
		if p.id == id {
			break
		}
		if p.shared && shared {
			continue // readers: neither holds the other back
		}
		b := e.ws[p.id]
		if !b.granted && b.member && n.holdsID(key, p.id) {
			// Granted in the same step, its answer not written yet (in
			// sync mode it waits for the standbys, and one written by
			// the acquire's own call goes after those it routed).
			b.granted = true
		}
		switch {
		case b.granted && b.member:
			s.fifoKept++
		case b.granted || b.ended:
		case p.until != 0 && p.until <= s.now+time.Millisecond:
			// its wait ended, or ends now
		case b.arrived < 0:
			// Not back yet: its place should have held id back, if it
			// comes within the grace.
			if len(b.overtaken) == 0 {
				b.overAt = s.now
			}
			b.overtaken = append(b.overtaken, id)
		case b.member && s.fifoChecked():
			s.fail("FIFO across failover: node %d granted %s to %s ahead of %s, which was queued before it, came back within the grace at %.4fs, and still waits",
				n.idx, key, id, p.id, b.arrived.Seconds())
		}
	}
}

// fifoClosed: the server side of client connection c closed on n.
func (s *sim) fifoClosed(n *simNode, c *simConn) {
	if e := s.fifoEpoch(n); e != nil {
		if w := e.ws[s.fifoConnAcq[c]]; w != nil && w.conn == c {
			w.ended = true
		}
	}
	delete(s.fifoConnAcq, c)
}

// holdsID reports whether the acquire with id holds key on n now.
func (n *simNode) holdsID(key, id string) bool {
	hs, _, _ := n.core.Engine().InspectN(n.clock(), key, 0)
	for _, h := range hs {
		if h.ID == id {
			return true
		}
	}
	return false
}

// fifoScripted is a waiter of a scripted history: it acquires key on the
// active with its id, and when its connection to the active drops or is
// moved, waits until another node is active, pauses, and re-sends the
// same acquire there. Granted, it releases at once.
type fifoScripted struct {
	s      *sim
	idx    int
	id     string
	line   string
	pause  time.Duration // before re-sending to the new active
	sent   int           // the node its acquire went to last
	served bool
	keep   bool // holds on, not releasing when granted
}

func (w *fifoScripted) send(to int) {
	s := w.s
	w.sent = to
	s.dial(-1-w.idx, to, kindClient, func(c *simConn, err error) {
		if err != nil {
			w.again()
			return
		}
		c.onLine = func(line []byte) {
			a, err := proto.ParseAnswer(line)
			if err != nil {
				s.fail("%s: unreadable answer %q", w.id, line)
				return
			}
			s.logf("%s <- node %d: %s", w.id, to, string(line[:len(line)-1]))
			switch a.Kind {
			case proto.OpAcquire:
				if !w.served {
					w.served = true
					s.fifoGrants = append(s.fifoGrants, w.id)
					if !w.keep {
						c.toServer([]byte("R " + a.Key + " " + a.Fields[0] + "\n"))
					}
				}
			case proto.KindMoved:
				c.close(0, "moved")
				w.again()
			}
		}
		c.onClose = func(string) {
			if !w.served && !w.keep {
				w.again()
			}
		}
		s.logf("%s -> node %d: %s", w.id, to, w.line)
		c.toServer([]byte(w.line + "\n"))
	})
}

// again re-sends the acquire to the active node other than the one it
// was sent to, once there is one, after w's pause.
func (w *fifoScripted) again() {
	s := w.s
	for _, n := range s.nodes {
		if n.idx != w.sent && n.state == nodeUp && n.core.Role() == Active {
			s.at(w.pause, func() { w.send(n.idx) })
			return
		}
	}
	s.at(5*time.Millisecond, w.again)
}

// Three waiters queue behind a holder; the active fails (kill -9) or
// hands off (SIGINT); the waiters come back to the new active in the
// reverse order, within the grace. They are granted in their old order;
// a successor that keeps no places (the planted bug) would grant them in
// the order they came back, which the FIFO invariant reports.
func TestSimFIFOAcrossFailover(t *testing.T) {
	for _, fault := range []string{"crash", "sigint"} {
		for _, planted := range []string{"", "no-waiter-places"} {
			t.Run(fault+"/"+planted, func(t *testing.T) {
				if planted != "" {
					needPlantable(t)
				}
				s := newSim(1, simOptions{planted: planted, script: []simFault{}, cfg: func(c *simConfig) {
					c.nodes, c.clients, c.keys, c.faults = 3, 0, 1, 0
					c.calm, c.async = true, false
				}})
				s.runUntil(time.Second)
				if s.nodes[0].core.Role() != Active || !s.nodes[1].core.Synced() || !s.nodes[2].core.Synced() {
					t.Fatalf("the cluster did not settle:\n%s", s.report())
				}
				holder := &fifoScripted{s: s, idx: 50, id: "h", line: "A k0 2 0 id=h", keep: true}
				holder.send(0)
				s.runUntil(1100 * time.Millisecond)
				var ws []*fifoScripted
				for i, id := range []string{"b", "c", "d"} {
					w := &fifoScripted{s: s, idx: 51 + i, id: id, line: "A k0 5 0 id=" + id, pause: time.Duration(2-i) * 30 * time.Millisecond}
					ws = append(ws, w)
					s.at(time.Duration(i)*10*time.Millisecond, func() { w.send(0) })
				}
				s.runUntil(1300 * time.Millisecond)
				s.fifoGrants = nil
				s.fault(fault, 0, 10*time.Second)
				s.runUntil(6 * time.Second)
				got := strings.Join(s.fifoGrants, " ")
				if planted == "" {
					// The history is the one described: the successor was
					// told of b, c, d and they came back in the reverse
					// order, each in time for its place.
					var e *fifoEpoch
					for _, x := range s.fifoEpochs {
						if x.ws["b"] != nil {
							e = x
						}
					}
					if e == nil || !e.ws["d"].member || !e.ws["c"].member || !e.ws["b"].member ||
						!(e.ws["d"].arrived < e.ws["c"].arrived && e.ws["c"].arrived < e.ws["b"].arrived) {
						t.Fatalf("the successor was not told of b, c, d, or they did not come back in time, d first:\n%s", s.report())
					}
					if got != "b c d" || len(s.failures) > 0 {
						t.Fatalf("grants after the %s: %q, want \"b c d\"\n%s", fault, got, s.report())
					}
					return
				}
				// The run stops at the report, as the first grant, d's,
				// is written.
				if len(s.failures) == 0 || !strings.Contains(s.failures[0], "granted k0 to d ahead of b") {
					t.Fatalf("the FIFO invariant did not report the reshuffled queue (grants %q): %q\n%s", got, s.failures, s.report())
				}
			})
		}
	}
}
