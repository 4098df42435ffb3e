package core

import (
	"errors"
	"fmt"
	"time"
)

// The moves operators make every day, as faults of the simulator: a
// second fault while the first failover settles, a freeze of whichever
// node is active, a restart of the first node that takes its role back
// while clients wait and renew short leases, every node started
// together, and a node that refuses its peers' handshakes for a while (a
// stranger's wrong secrets, a secret rotated on one node first). None of
// them is a loss docs/cluster.md admits: the checker exempts none of
// them (a crash inside one still exempts by its own rule, as any crash).

// moveKinds are the faults of this file, added to the seed's choices.
var moveKinds = []string{"double", "freeze-active", "takeback", "coldstart", "deny"}

// move plays one of moveKinds on node i (-1: the active), for dur.
func (s *sim) move(kind string, i int, dur time.Duration) {
	switch kind {
	case "double":
		// A failover, and before it has settled (the new active waits
		// for the standbys in sync, streams snapshots, keeps the old
		// waiters' places), a fault of the new active.
		first := []string{"crash", "vanish", "freeze", "sigint", "handoff"}[s.rng.IntN(5)]
		second := []string{"crash", "freeze", "vanish", "sigint"}[s.rng.IntN(4)]
		s.logf("a %s, then a %s of the next active while the failover settles", first, second)
		s.fault(first, i, dur)
		after := s.cfg.failure + time.Duration(s.rng.Int64N(int64(s.cfg.failure)))
		s.at(after, func() { s.fault(second, -1, 300*time.Millisecond+time.Duration(s.rng.Int64N(int64(2*time.Second)))) })
	case "freeze-active":
		// Whichever node is active now, whatever made it so.
		s.fault("freeze", -1, dur)
	case "takeback":
		// The first node of --peers is killed and restarted after the
		// others took over: it syncs and takes its role back by priority
		// while clients wait in queues and renew short leases.
		s.fault("crash", 0, s.cfg.failure+100*time.Millisecond+time.Duration(s.rng.Int64N(int64(2*time.Second))))
	case "coldstart":
		// Every node is stopped and all start again at the same instant
		// (a deploy of the whole cluster): exactly one of them takes the
		// role.
		s.logf("every node stops, and all start together in %s", dur)
		s.allGo = true
		for _, m := range s.nodes {
			s.fault("crash", m.idx, dur)
		}
		s.allGo = false
		s.coldStart(s.now + dur)
		for _, m := range s.nodes {
			s.at(dur, func() { s.restart(m) }) // those down already too
		}
	case "deny":
		s.deny(i, dur)
	}
}

// --- cold starts ---

// coldStart opens the window after every node (re)started together at
// at: until the next fault, or three failure timeouts once one is
// active, exactly one node may promote itself (a take-back by handoff
// after it is no promotion), none may be demoted, and no two may be
// active at once. Restarts due before at wait for it.
func (s *sim) coldStart(at time.Duration) {
	s.cold = &coldWindow{from: at}
	s.logf("cold start at %.4fs: one promotion, no demotion until it settles", at.Seconds())
}

// coldWindow is a cold start being watched (see coldStart).
type coldWindow struct {
	from    time.Duration
	settled time.Duration // when the window closes, once a node is active
}

// checkCold runs after every event of n.
func (s *sim) checkCold(n *simNode, becameActive, stoppedActive bool) {
	w := s.cold
	if w == nil || s.now < w.from {
		return
	}
	if len(s.blocked) > 0 || s.cutTill+s.cfg.failure > w.from {
		// A partition: a node that hears no peer may take the role on
		// its side (docs/cluster.md, Partitions).
		s.cold = nil
		return
	}
	if w.settled > 0 && s.now >= w.settled {
		s.cold = nil
		return
	}
	if stoppedActive && n.state == nodeUp && n.core.Role() != HandingOff {
		s.fail("cold start: node %d was demoted from the role it took (%s, following %q)", n.idx, n.core.Role(), n.core.Active())
		return
	}
	promotions := 0
	for _, m := range s.nodes {
		if m.state != nodeCrashed && m.bootAt >= w.from {
			promotions += int(m.core.count.Promotions)
		}
	}
	if promotions > 1 {
		s.fail("cold start: %d promotions (node %d is the last), want 1", promotions, n.idx)
		return
	}
	if becameActive {
		for _, m := range s.nodes {
			if m != n && m.state == nodeUp && m.core.Role() == Active {
				s.fail("cold start: nodes %d and %d are both active", m.idx, n.idx)
				return
			}
		}
		if w.settled == 0 {
			w.settled = s.now + 3*s.cfg.failure
		}
	}
}

// endCold closes the window: another fault changes what is expected.
func (s *sim) endCold() { s.cold = nil }

// --- a node that refuses its peers ---

// errDenied is how the simulated shell reports a dial that the peer
// answered with a refused handshake (its TLS or secret check failed),
// as the real shell's dialPeer does.
var errDenied = errors.New("the peer refused this node's handshake")

// deny makes node i refuse every new peer connection (heartbeat links,
// replication streams, questions) for dur, and drops the ones open to it
// now: its peers must dial again and are refused. Clients still reach
// it, and its own dials to its peers still work: it runs, and may be
// the active.
func (s *sim) deny(i int, dur time.Duration) {
	if i < 0 {
		i = s.activeIdx()
	}
	n := s.nodes[i]
	if n.state == nodeCrashed {
		return
	}
	s.logf("node %d refuses its peers' handshakes for %s", i, dur)
	s.denied[i] = s.now + dur
	for _, c := range s.conns {
		if c.open && c.to == i && c.kind != kindClient && c.from >= 0 {
			c.close(0, "connection reset")
			if c.onClose != nil {
				c.onClose("connection reset")
			}
		}
	}
}

// denies reports whether node to refuses a peer connection now.
func (s *sim) denies(from, to int, kind connKind) bool {
	return from >= 0 && kind != kindClient && s.denied[to] > s.now
}

// activeIdx is the node active now (the last of them when two are), or 0.
func (s *sim) activeIdx() int {
	i := 0
	for _, m := range s.nodes {
		if m.state == nodeUp && m.core.Role() == Active {
			i = m.idx
		}
	}
	return i
}

func denialOf(err error) (string, bool) {
	if errors.Is(err, errDenied) {
		return fmt.Sprint(err), true
	}
	return "", false
}
