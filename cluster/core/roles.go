package core

import (
	"slices"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// supervise re-evaluates the role: every heartbeat, and whenever what
// this node knows of a peer changes. Each role has its own rules.
func (c *Core) supervise(now time.Time) {
	if !c.leaving {
		switch c.role {
		case Active:
			c.superviseActive(now)
		case HandingOff:
			// The handoff ends by confirmation, or is settled by asking.
		case Joining, Standby:
			c.superviseStandby(now)
		}
	}
	// Requests a joining node held (parks) go where they belong once it
	// follows an active or took the role.
	if len(c.parked) > 0 && !c.parks() {
		c.replayParked(now)
	}
}

// superviseActive steps down when another active holds a newer state, or
// wins by priority (yieldsTo); otherwise it marks the streams.
func (c *Core) superviseActive(now time.Time) {
	if p, why := c.activeToYieldTo(now); p != nil {
		c.demote(now, p.addr, why)
		return
	}
	c.markStreams()
}

// activeToYieldTo is the other active this one steps down for, if any,
// and why.
func (c *Core) activeToYieldTo(now time.Time) (*peer, string) {
	for _, p := range c.peers {
		if !p.alive(now, c.cfg.FailureTimeout) || p.role != string(Active) || now.Before(p.staleUntil) {
			continue
		}
		if p.paused || p.round < c.activeRound && p.version >= 2 {
			// It did not run for a while (it yields once it has heard
			// this node), or its answer was written before this node
			// took the role: no news of a newer active.
			continue
		}
		if yield, why := c.yieldsTo(p, p.claim()); yield {
			return p, why
		}
	}
	for _, p := range c.peers {
		// An active that refuses this node's handshake cannot be heard,
		// but its own heartbeats say what it holds: the same rule
		// decides, and it decides the same from this node's answers.
		if c.refusedRecently(now, p) && now.Sub(p.claimedAt) < c.cfg.FailureTimeout {
			if yield, why := c.yieldsTo(p, p.claimed); yield {
				return p, why + "; it refuses this node's handshake"
			}
		}
	}
	return nil, ""
}

// superviseStandby follows the active when there is one, and otherwise
// waits, or takes the role when this node is the candidate.
func (c *Core) superviseStandby(now time.Time) {
	if a := c.activeToFollow(now); a != "" {
		c.deferSince = time.Time{}
		if a == c.hint {
			// Heard as active: the hint did its job. Were it kept, a
			// crash of that node before the hint expires would leave
			// every standby waiting for it (followHint).
			c.hint, c.hintFrom, c.hintUntil = "", "", time.Time{}
		}
		if c.active != a || c.role == Joining {
			c.setRole(Standby, a, "following the active")
		}
		c.ensureFollow(a)
		c.maybeTakeBack(now)
		return
	}
	if c.waitToJoin(now) || c.activeHandingOff(now) || c.followHint(now) || c.mustWait(now) {
		return
	}
	cand := c.candidate(now)
	if cand != c.self {
		if c.deferSince.IsZero() {
			c.deferSince, c.deferRound = now, c.round+1
		}
		c.wantSince = time.Time{}
		if c.role == Joining {
			c.setRole(Standby, "", "waiting for "+cand+" to become active")
		} else if c.active != "" {
			c.setRole(Standby, "", "the active "+c.active+" is unreachable; "+cand+" has priority")
		}
		c.stopFollow()
		return
	}
	if !c.synced && !c.disk.restored && c.anyPeerAlive(now) {
		// This node holds no state: it takes the role only if it is
		// still the one to a heartbeat later, on answers sent after it
		// decided. What it heard of its peers may be a heartbeat old (a
		// standby that synced since, from an active that just went), and
		// an empty active beside one that holds the state loses what
		// that one answered.
		if c.wantSince.IsZero() {
			c.wantSince = now
		}
		if now.Sub(c.wantSince) < c.cfg.Heartbeat {
			return
		}
	}
	c.deferSince, c.wantSince = time.Time{}, time.Time{}
	reason := "no active node is reachable"
	if c.active != "" {
		reason = "the active " + c.active + " is unreachable"
	}
	c.promote(now, reason)
}

// activeToFollow is the live active a standby follows, "" when none.
// When two claim the role (they have not met yet, or just have), it is
// the one that will stay. A paused node speaks of its role as of before
// it stopped, and within staleUntil the role a handoff told this node is
// believed over a heartbeat from before it.
func (c *Core) activeToFollow(now time.Time) string {
	var claims []*peer
	for _, p := range c.peers {
		if p.alive(now, c.cfg.FailureTimeout) && p.role == string(Active) && !p.paused {
			claims = append(claims, p)
		}
	}
	a := ""
	for _, p := range claims {
		if !slices.ContainsFunc(claims, func(q *peer) bool { return q != p && peerYields(p, q) }) {
			a = p.addr
			break
		}
	}
	if a == "" && len(claims) > 0 {
		a = claims[0].addr
	}
	if a != "" && a == c.hintFrom && c.hint != a && now.Before(c.hintUntil) {
		// That active itself said, on its stream or in answer to Y, that
		// the role went to hint: its heartbeats from before are stale.
		// Follow hint now (followHint) rather than a heartbeat later, or
		// a new active in sync mode waits that long for this standby.
		if p := c.peerByAddr(c.hint); p != nil && p.alive(now, c.cfg.FailureTimeout) {
			return ""
		}
	}
	return a
}

// followHint follows the node the last active said it handed the role
// to, or waits for it, until the hint expires; it reports whether it did.
func (c *Core) followHint(now time.Time) bool {
	if c.hint == "" || !now.Before(c.hintUntil) {
		return false
	}
	if p := c.peerByAddr(c.hint); p != nil && p.alive(now, c.cfg.FailureTimeout) {
		// Wait for its heartbeats to say so rather than compete.
		if c.active != c.hint {
			c.setRole(Standby, c.hint, "the previous active handed the role to "+c.hint)
		}
		c.ensureFollow(c.hint)
		return true
	}
	// Not heard yet (it may have just restarted, or its dial failed
	// before it took the role): wait for it rather than compete.
	return true
}

// mustWait reports whether a standby with no live active must not take
// the role yet: it cannot tell whether another node serves.
func (c *Core) mustWait(now time.Time) bool {
	switch {
	case !c.pausedSince.IsZero():
		return true // what this node knows of its peers is stale: hear them first
	case c.mayServe(now) != nil:
		return true // a peer that may be active refuses this node, or is not heard
	case c.follow != nil && c.follow.open && !c.follow.ending && c.follow.target == c.active:
		// The stream from the active is still open: it is alive, or its
		// stream ends in a moment, after a last record that may say where
		// the role went (a handoff). Its heartbeat link closing first
		// says neither.
		return true
	}
	for _, p := range c.peers {
		if !p.alive(now, c.cfg.FailureTimeout) && now.Sub(p.beatAt) < c.cfg.FailureTimeout {
			// It runs (its heartbeats reach this node), but this node has
			// not heard its answers yet, and so neither its role nor its
			// state: hear it first.
			return true
		}
		if p.alive(now, c.cfg.FailureTimeout) && p.paused && p.role == string(Active) {
			// An active that did not run for a while decides within a
			// failure timeout whether it serves on or steps down: taking
			// the role meanwhile would make two.
			return true
		}
	}
	return false
}

// waitToJoin reports whether a joining node still gives every peer one
// chance to answer, so that a restart does not grab the role from a live
// active it has not heard yet.
func (c *Core) waitToJoin(now time.Time) bool {
	return c.role == Joining && !c.allPeersKnown() && now.Sub(c.start) < c.cfg.FailureTimeout
}

// activeHandingOff reports whether the active this node knows is live and
// handing the role over: its handoff is in progress; wait for the outcome.
func (c *Core) activeHandingOff(now time.Time) bool {
	if c.active == "" || c.active == c.self {
		return false
	}
	p := c.peerByAddr(c.active)
	return p != nil && p.alive(now, c.cfg.FailureTimeout) && p.role == string(HandingOff)
}

// yieldsTo decides, when this active meets another active p, whether
// this one steps down. Both run the same rule on the same facts, so
// exactly one yields:
//
//   - an active that holds the cluster's state beats one that started
//     empty and has fed no standby (it never synced: it missed the state);
//   - an active whose state is a prefix of the other's yields: the other
//     began serving from a state at least as new as everything this one
//     holds, grants, renewals and releases (it took over while this one
//     was stopped or cut off), or this one took over from the other and
//     has changed nothing since, while the other served on;
//   - otherwise both served clients on their own (a split brain), and the
//     lower priority yields (docs/cluster.md, Partitions). Its grants of the split are
//     lost; their tokens are below everything the survivor issues next.
func (c *Core) yieldsTo(p *peer, theirs claim) (bool, string) {
	me := claim{addr: c.self, idx: c.selfIdx, fresh: c.role == Active && c.fresh, base: c.base, top: c.top, baseSeq: c.baseSeq, seq: c.seq, prev: c.prev}
	switch yields(me, theirs) {
	case yieldFresh:
		return true, "an active with the cluster's state is reachable (" + p.addr + "); this one started empty"
	case yieldNewer:
		return true, "an active with newer state is reachable (" + p.addr + ")"
	case yieldPriority:
		return true, "a higher-priority active is reachable (" + p.addr + ")"
	}
	return false, ""
}

// claim is what decides between two actives: priority, whether it
// started empty, and its state: the newest token and the replication
// position it began from (base, baseSeq), and now (top, seq). Positions
// count renewals and releases too, which tokens do not; a peer of an
// older version says no baseSeq, and its claim is judged by its tokens.
type claim struct {
	addr         string
	idx          int
	fresh        bool
	base, top    uint64
	baseSeq, seq uint64
	prev         string // the active it took the role from
	noSeq        bool
}

func (p *peer) claim() claim {
	return claim{addr: p.addr, idx: p.idx, fresh: p.fresh, base: p.base, top: p.top, baseSeq: p.baseSeq, seq: p.seq, prev: p.prev, noSeq: p.version < 4}
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
	// the reverse holds too, the states are the same). The positions
	// are of one lineage when the tokens say so: a standby takes its
	// active's position with its state.
	useSeq := !a.noSeq && !b.noSeq
	bHasA := b.base >= a.top && (!useSeq || b.baseSeq >= a.seq)
	aHasB := a.base >= b.top && (!useSeq || a.baseSeq >= b.seq)
	// Whether each changed its state since it began serving.
	aMoved := a.top > a.base || useSeq && a.seq > a.baseSeq
	bMoved := b.top > b.base || useSeq && b.seq > b.baseSeq
	switch {
	case bHasA && !aHasB:
		return yieldNewer
	case aHasB && !bHasA:
		return yieldNot
	case bHasA && aHasB:
		// The same state on both: priority decides.
	case !aMoved && bMoved && a.prev == b.addr:
		// a took over from b and changed nothing since; b served on (a
		// partition): a's state is a part of b's, and a yields.
		return yieldNewer
	case !bMoved && aMoved && b.prev == a.addr:
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
	return yields(p.claim(), q.claim()) != yieldNot
}

// allPeersKnown reports whether this node has heard every peer since it
// started. A peer whose port refused a dial is not known yet: nodes
// started together open their ports a few milliseconds apart, and the
// one that was not listening at the first dial answers the next a
// heartbeat later; taking the role before hearing it made two actives at
// a cold start. Nor is a peer that refused the handshake: it runs.
func (c *Core) anyPeerAlive(now time.Time) bool {
	for _, p := range c.peers {
		if p.alive(now, c.cfg.FailureTimeout) {
			return true
		}
	}
	return false
}

func (c *Core) allPeersKnown() bool {
	for _, p := range c.peers {
		if p.heard.IsZero() {
			return false
		}
	}
	return true
}

// promote makes this node active: a new token epoch above every token it
// has seen, then the leases that ran out meanwhile are reclaimed.
func (c *Core) promote(now time.Time, reason string) {
	if c.prev = c.active; c.active == c.self {
		c.prev = ""
	}
	c.stopFollow()
	c.pinnedAt = time.Time{}
	c.sticky = false // it holds the role again: "gave it up" no longer describes it
	c.eng.Succeed(now)
	c.setRole(Active, c.self, reason)
	c.count.Promotions++
	c.base, c.baseSeq = c.top, c.seq
	c.activeRound = c.round + 1
	c.pausedSince = time.Time{}
	c.fresh = !c.synced
	c.synced = true
	c.disk.restored = false
	c.expectInSync(now)
	c.log.Info("promoted", "self", c.self, "reason", reason, "holders", c.eng.Held(), "token_floor", c.eng.HighWater())
	if len(c.changes) == maxChanges {
		c.changes = append(c.changes[:0], c.changes[1:]...)
	}
	c.changes = append(c.changes, proto.RoleChange{At: now, From: c.prev, To: c.self, Reason: reason})
	c.queueGhosts(now)
	c.cancelsDue(now)
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

// keepISR records, as this node hands the role to `to`, the standbys
// that were in sync with it: until the new active's heartbeats name its
// own, they are the ones to take over should it fail at once, and every
// standby, which heard the same list in this node's heartbeats, picks the
// same candidate (an old list here, or none, made this node pick itself
// while the standby in sync picked itself too).
func (c *Core) keepISR(to string) {
	c.activeISR = slices.DeleteFunc(c.inSync(), func(a string) bool { return a == to })
}

// TakebackLabel marks a handoff asked for by a peer taking its role back
// by priority: unlike one asked for by command, it does not make the
// giver sticky.
const TakebackLabel = proto.LabelTakeback

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
	c.act(Action{Kind: ActAsk, ID: c.nextAsk, Peer: peer, Timeout: timeout}, b)
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
