package core

import (
	"slices"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// supervise re-evaluates the role: every heartbeat, and whenever what
// this node knows of a peer changes.
func (c *Core) supervise(now time.Time) {
	if c.leaving {
		return
	}
	// Who else claims the role. When two do (they have not met yet, or
	// just have), the one that will stay is the one to follow.
	var claims []*peer
	for _, p := range c.peers {
		// Within staleUntil the role is the one a handoff told this
		// node, not a heartbeat from before it: believed.
		if p.alive(now, c.cfg.FailureTimeout) && p.role == string(Active) {
			claims = append(claims, p)
		}
	}
	otherActive := ""
	for _, p := range claims {
		stays := true
		for _, q := range claims {
			if q != p && peerYields(p, q) {
				stays = false
			}
		}
		if stays {
			otherActive = p.addr
			break
		}
	}
	if otherActive == "" && len(claims) > 0 {
		otherActive = claims[0].addr
	}
	switch c.role {
	case Active:
		for _, p := range c.peers {
			if !p.alive(now, c.cfg.FailureTimeout) || p.role != string(Active) || now.Before(p.staleUntil) {
				continue
			}
			if yield, why := c.yieldsTo(p); yield {
				c.demote(now, p.addr, why)
				return
			}
		}
		c.markStreams()
	case HandingOff:
		// The handoff ends by confirmation, or is settled by asking.
	case Joining, Standby:
		if otherActive != "" && otherActive == c.hintFrom && c.hint != otherActive && now.Before(c.hintUntil) {
			// That active itself said, on its stream or in answer to Y,
			// that the role went to hint: its heartbeats from before
			// are stale. Follow hint now (below) rather than a
			// heartbeat later, or a new active in sync mode waits that
			// long for this standby.
			if p := c.peerByAddr(c.hint); p != nil && p.alive(now, c.cfg.FailureTimeout) {
				otherActive = ""
			}
		}
		if otherActive != "" {
			c.deferSince = time.Time{}
			if c.active != otherActive || c.role == Joining {
				c.setRole(Standby, otherActive, "following the active")
			}
			c.ensureFollow(otherActive)
			c.maybeTakeBack(now)
			return
		}
		// No live active. A joining node first gives every peer one
		// chance to answer, so a restart does not grab the role from a
		// live active it has not heard yet.
		if c.role == Joining && !c.allPeersKnown() && now.Sub(c.start) < c.cfg.FailureTimeout {
			return
		}
		if c.active != "" && c.active != c.self {
			if p := c.peerByAddr(c.active); p != nil && p.alive(now, c.cfg.FailureTimeout) && p.role == string(HandingOff) {
				return // its handoff is in progress; wait for the outcome
			}
		}
		if c.hint != "" && now.Before(c.hintUntil) {
			if p := c.peerByAddr(c.hint); p != nil && p.alive(now, c.cfg.FailureTimeout) {
				// The old active said the role went to hint: wait for
				// its heartbeats to say so rather than compete.
				if c.active != c.hint {
					c.setRole(Standby, c.hint, "the previous active handed the role to "+c.hint)
				}
				c.ensureFollow(c.hint)
				return
			}
			if !c.has(bugNoWait) {
				// Not heard yet (it may have just restarted, or its
				// dial failed before it took the role): wait for it,
				// at most until the hint expires, rather than compete.
				return
			}
		}
		if !c.pausedSince.IsZero() {
			return // what this node knows of its peers is stale: hear them first
		}
		if f := c.follow; f != nil && f.open && f.target == c.active && !c.has(bugNoWait) {
			// The stream from the active is still open: it is alive, or
			// its stream ends in a moment, after a last record that may
			// say where the role went (a handoff). Its heartbeat link
			// closing first says neither.
			return
		}
		cand := c.candidate(now)
		if cand != c.self && c.deferSince.IsZero() {
			c.deferSince = now
		}
		if cand == c.self {
			c.deferSince = time.Time{}
			reason := "no active node is reachable"
			if c.active != "" {
				reason = "the active " + c.active + " is unreachable"
			}
			c.promote(now, reason)
			return
		}
		if c.role == Joining {
			c.setRole(Standby, "", "waiting for "+cand+" to become active")
		} else if c.active != "" {
			c.setRole(Standby, "", "the active "+c.active+" is unreachable; "+cand+" has priority")
		}
		c.stopFollow()
	}
}

// yieldsTo decides, when this active meets another active p, whether
// this one steps down. Both run the same rule on the same facts, so
// exactly one yields:
//
//   - an active that holds the cluster's state beats one that started
//     empty and has fed no standby (it never synced: it missed the state);
//   - an active whose state is a prefix of the other's yields: the other
//     began serving from a state newer than anything this one holds (it
//     took over while this one was stopped or cut off), or this one has
//     granted nothing since it began while the other has newer grants;
//   - otherwise both served clients on their own (a split brain), and the
//     lower priority yields (docs/cluster.md, Partitions). Its grants of the split are
//     lost; their tokens are below everything the survivor issues next.
func (c *Core) yieldsTo(p *peer) (bool, string) {
	me := claim{idx: c.selfIdx, fresh: c.role == Active && c.fresh, base: c.base, top: c.top}
	switch yields(me, claim{idx: p.idx, fresh: p.fresh, base: p.base, top: p.top}) {
	case yieldFresh:
		return true, "an active with the cluster's state is reachable (" + p.addr + "); this one started empty"
	case yieldNewer:
		return true, "an active with newer state is reachable (" + p.addr + ")"
	case yieldPriority:
		if !c.has(bugNoDemote) {
			return true, "a higher-priority active is reachable (" + p.addr + ")"
		}
	}
	return false, ""
}

// claim is what decides between two actives: priority, whether it
// started empty, and its state's tokens.
type claim struct {
	idx       int
	fresh     bool
	base, top uint64
}

// Why one active yields to another.
const (
	yieldNot = iota
	yieldFresh
	yieldNewer
	yieldPriority
)

// yields decides whether a yields to b (see yieldsTo).
func yields(a, b claim) int {
	if a.fresh != b.fresh {
		if a.fresh {
			return yieldFresh
		}
		return yieldNot
	}
	// b began from all a holds: a's state is a prefix of b's (and, when
	// the reverse holds too, the states are the same).
	bHasA := b.base >= a.top
	aHasB := a.base >= b.top
	switch {
	case bHasA && !aHasB:
		return yieldNewer
	case aHasB && !bHasA:
		return yieldNot
	case bHasA && aHasB:
		// The same state on both: priority decides.
	case a.top == a.base && b.top > a.base:
		return yieldNewer
	case b.top == b.base && a.top > b.base:
		return yieldNot
	}
	if b.idx < a.idx {
		return yieldPriority
	}
	return yieldNot
}

// peerYields reports whether active p yields to active q, as each of them
// will decide once they hear each other.
func peerYields(p, q *peer) bool {
	return yields(claim{p.idx, p.fresh, p.base, p.top}, claim{q.idx, q.fresh, q.base, q.top}) != yieldNot
}

func (c *Core) allPeersKnown() bool {
	for _, p := range c.peers {
		if !p.down && p.heard.IsZero() {
			return false
		}
	}
	return true
}

// candidate is the node that should be active when none is: among the
// live nodes, the first in priority order of the best tier (in sync with
// the last active, synced and not sticky; synced; not sticky; any).
func (c *Core) candidate(now time.Time) string {
	type cand struct {
		addr           string
		idx            int
		synced, sticky bool
		inSync         bool // the last active waited for its acknowledgements
		state          stateAge
	}
	isr := func(addr string) bool { return slices.Contains(c.activeISR, addr) }
	cs := []cand{{c.self, c.selfIdx, c.synced, c.sticky, isr(c.self), c.stateAge()}}
	for _, p := range c.peers {
		if p.alive(now, c.cfg.FailureTimeout) {
			cs = append(cs, cand{p.addr, p.idx, p.synced, p.sticky, isr(p.addr), stateAge{p.restored, p.top, p.seq}})
		}
	}
	if !slices.ContainsFunc(cs, func(x cand) bool { return x.inSync && x.synced && !x.sticky }) {
		// No standby holds every answer of the last active, and a node
		// restored from its data directory is among the candidates (a
		// restart of the whole cluster, or of a node while no active
		// runs): the most recent state serves first, whatever the
		// priority, so that no state a client was told of is replaced
		// by an older one (disk.go).
		best := -1
		for i, x := range cs {
			if x.synced && !x.sticky && (best < 0 || x.state.newer(cs[best].state) || !cs[best].state.newer(x.state) && x.idx < cs[best].idx) {
				best = i
			}
		}
		if best >= 0 && slices.ContainsFunc(cs, func(x cand) bool { return x.state.restored }) {
			return cs[best].addr
		}
	}
	if !c.deferSince.IsZero() && now.Sub(c.deferSince) >= c.cfg.FailureTimeout {
		// The candidate this node left the role to has not taken it for
		// a failure timeout: the standbys may disagree on which of them
		// the last active waited for (each heard its last heartbeat at
		// another moment), each leaving the role to the other. The
		// records each has applied are final by now and heard by all:
		// the synced standby that applied the most goes first, so the
		// new active holds every answer any of them acknowledged.
		best := cand{idx: -1}
		var bestSeq uint64
		for _, x := range cs {
			seq := c.seq
			if x.addr != c.self {
				seq = c.peerByAddr(x.addr).seq
			}
			if !x.synced || x.sticky {
				continue
			}
			if best.idx < 0 || seq > bestSeq || (seq == bestSeq && x.idx < best.idx) {
				best, bestSeq = x, seq
			}
		}
		if best.idx >= 0 {
			return best.addr
		}
	}
	tiers := []func(cand) bool{
		// Synchronous replication: a standby that acknowledged every
		// answer the active gave holds them all; it goes first.
		func(x cand) bool { return x.inSync && x.synced && !x.sticky },
		func(x cand) bool { return x.synced && !x.sticky },
		func(x cand) bool { return x.synced },
		func(x cand) bool { return !x.sticky },
		func(x cand) bool { return true },
	}
	for _, ok := range tiers {
		best := cand{idx: -1}
		for _, x := range cs {
			if ok(x) && (best.idx < 0 || x.idx < best.idx) {
				best = x
			}
		}
		if best.idx >= 0 {
			return best.addr
		}
	}
	return c.self
}

// promote makes this node active: a new token epoch above every token it
// has seen, then the leases that ran out meanwhile are reclaimed.
func (c *Core) promote(now time.Time, reason string) {
	c.stopFollow()
	c.pinnedAt = time.Time{}
	if !c.has(bugNoSucceed) {
		c.eng.Succeed(now)
	}
	c.setRole(Active, c.self, reason)
	c.count.Promotions++
	c.base = c.top
	c.pausedSince = time.Time{}
	c.fresh = !c.synced
	c.synced = true
	c.disk.restored = false
	c.expectInSync(now)
	c.log.Info("promoted", "self", c.self, "reason", reason, "holders", c.eng.Held(), "token_floor", c.eng.HighWater())
	c.queueGhosts(now)
	c.advance(now)
}

// demote steps down to standby behind to: waiters move there, the
// replication streams this node fed are closed so their standbys follow
// the new active.
func (c *Core) demote(now time.Time, to, reason string) {
	c.log.Info("demoted", "self", c.self, "to", to, "reason", reason)
	c.count.Demotions++
	c.settleHeld(false)
	c.setRole(Standby, to, reason)
	c.pausedSince = time.Time{}
	c.dropWaiters(to)
	c.closeStreams(to)
	c.replayParked(now)
	c.failWaitingHandoff(to + " is active now")
	c.ensureFollow(to)
}

// TakebackLabel marks a handoff asked for by a peer taking its role back
// by priority: unlike one asked for by command, it does not make the
// giver sticky.
const TakebackLabel = "takeback"

// maybeTakeBack asks a lower-priority active to hand the role back once
// this node has synced.
func (c *Core) maybeTakeBack(now time.Time) {
	if c.sticky || !c.synced || c.takeback != 0 || c.active == "" || c.priorityOf(c.active) < c.selfIdx {
		return
	}
	if c.follow == nil || !c.follow.live {
		return
	}
	if p := c.peerByAddr(c.active); p != nil && p.pinned && now.Sub(c.start) >= p.pinnedAge {
		// Someone moved the role there by command while this node ran:
		// respect it. Only a node restarted since then takes it back.
		return
	}
	if now.Sub(c.lastTake) < c.cfg.FailureTimeout {
		return
	}
	c.lastTake = now
	c.log.Info("taking the role back", "self", c.self, "from", c.active)
	c.takeback = c.ask(c.active, proto.AppendFields(nil, proto.OpHandoff, TakebackLabel, c.self), c.cfg.HandoffTimeout+2*time.Second)
}

// ask sends b to peer through Out.Ask and returns the id its answer
// will carry.
func (c *Core) ask(peer string, b []byte, timeout time.Duration) uint64 {
	c.nextAsk++
	c.out.Ask(c.nextAsk, peer, b, timeout)
	return c.nextAsk
}

// Answered reports the answer to Ask id from peer, or err when there is
// none (the peer could not be reached, or did not answer in time).
func (c *Core) Answered(now time.Time, id uint64, a proto.Answer, err error) {
	c.noteTime(now)
	switch {
	case id == 0:
	case id == c.takeback:
		c.takeback = 0
		if err == nil && a.Kind != proto.OpHandoff {
			err = errorf("%s", answerText(a))
		}
		if err != nil {
			c.log.Warn("take-back refused", "self", c.self, "err", err.Error())
		}
	case c.handoff != nil && id == c.handoff.askID:
		c.resolveAnswered(now, c.handoff, a, err)
	}
}
