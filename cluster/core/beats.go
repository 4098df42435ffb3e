package core

import (
	"time"

	"github.com/lockd-io/lockd/proto"
)

// peer is another node of --peers, as this node's heartbeat link to it
// sees it. Liveness is judged only from answers on the link this node
// dialled, so a one-way partition looks the same from both sides of each
// link.
type peer struct {
	addr string
	idx  int // priority: position in --peers

	heard  time.Time // last heartbeat answer
	down   bool      // the link failed (a refused dial: nothing listens there)
	role   string
	token  uint64
	seq    uint64
	active string
	sticky bool
	synced bool
	// pinned: it is active by a handoff asked for by command, pinnedAge
	// ago (a duration, since clocks differ between machines).
	pinned    bool
	pinnedAge time.Duration
	fresh     bool   // active that started empty and has fed no standby yet
	restored  bool   // started from its data directory, not synced or active since
	paused    bool   // did not run for a while and has not heard its peers since
	base, top uint64 // its state's newest token when it became active, and now
	baseSeq   uint64 // its replication position when it became active
	prev      string // the active it took the role from
	// round: the round of this node's heartbeat its last answer echoed
	// (see Core.activeRound).
	round uint64
	news  bool // heard since this node's pause began (see maybeResume)
	// deniedAt: the peer answered this node's last dial with a refused
	// handshake (TLS, peer secret): it runs, but cannot be heard.
	deniedAt time.Time
	// claimedAt: when the peer's own heartbeat to this node last said it
	// is active, and claimed, its claim then. Liveness is judged from
	// answers only (above); a peer's heartbeat is only ever a reason not
	// to take the role, or to give it up, when its answers cannot be
	// had (mayServe, supervise).
	claimedAt time.Time
	claimed   claim
	// beatAt: when the peer's own heartbeat last reached this node,
	// whatever it said: it runs.
	beatAt  time.Time
	version int // the peer messages it speaks (proto.PeerVersion); 0 until heard

	// staleUntil: the role moved between this node and the peer; until
	// then a heartbeat answer still in flight from before the move may
	// report the peer's old role, so its claim to be active is ignored.
	staleUntil time.Time
}

func (p *peer) alive(now time.Time, timeout time.Duration) bool {
	return !p.down && !p.heard.IsZero() && now.Sub(p.heard) < timeout
}

// afterRoleMove marks what this node knows of p after a handoff between
// them, ahead of p's next heartbeat: its role, and a short window in
// which answers sent before the move are not believed.
func (c *Core) afterRoleMove(now time.Time, p *peer, role Role) {
	p.role = string(role)
	p.heard = now
	p.down = false
	p.staleUntil = now.Add(3*c.cfg.Heartbeat + 50*time.Millisecond)
}

func (c *Core) peerByAddr(addr string) *peer {
	for _, p := range c.peers {
		if p.addr == addr {
			return p
		}
	}
	return nil
}

func (c *Core) priorityOf(addr string) int {
	if addr == c.self {
		return c.selfIdx
	}
	if p := c.peerByAddr(addr); p != nil {
		return p.idx
	}
	return 1 << 30
}

// beat is this node's heartbeat: sent as P, or as the answer to one.
func (c *Core) beat(now time.Time) proto.Beat {
	b := proto.Beat{
		From:   c.self,
		Self:   c.self,
		Role:   string(c.role),
		Token:  c.eng.HighWater(),
		Seq:    c.seq,
		Active: c.active,
		Flags:  proto.BeatFlags{Sticky: c.sticky, Synced: c.synced, Fresh: c.role == Active && c.fresh, Top: c.top, Restored: c.disk.restored, Paused: !c.pausedSince.IsZero()},
	}
	b.Flags.Version = proto.PeerVersion
	if c.role == Active {
		b.Flags.Base, b.Flags.BaseSeq, b.Flags.Prev = c.base, c.baseSeq, c.prev
		b.Flags.InSync = c.inSync()
	}
	if c.role == Active && !c.pinnedAt.IsZero() {
		b.Flags.Pinned, b.Flags.PinnedAge = true, now.Sub(c.pinnedAt).Truncate(time.Millisecond)
	}
	return b
}

// HeardBeat records the answer peer gave to this node's heartbeat.
func (c *Core) HeardBeat(now time.Time, addr string, bt proto.Beat) {
	c.noteTime(now)
	p := c.peerByAddr(addr)
	if p == nil {
		return
	}
	changed := p.down || p.heard.IsZero() || p.role != bt.Role || p.active != bt.Active
	wasDown := p.down || p.heard.IsZero() || now.Sub(p.heard) >= c.cfg.FailureTimeout
	p.heard = now
	p.down = false
	p.deniedAt = time.Time{}
	if now.Before(p.staleUntil) && p.role != bt.Role {
		// Possibly sent before the handoff: keep what the handoff told us.
		changed = false
	} else {
		p.role = bt.Role
	}
	p.token = bt.Token
	p.seq = bt.Seq
	p.active = bt.Active
	f := bt.Flags
	p.sticky, p.synced, p.fresh, p.pinned, p.pinnedAge = f.Sticky, f.Synced, f.Fresh, f.Pinned, f.PinnedAge
	p.base, p.top, p.baseSeq, p.prev = f.Base, f.Top, f.BaseSeq, f.Prev
	p.restored, p.paused = f.Restored, f.Paused
	p.round = f.Round
	p.version = max(f.Version, 1)
	if bt.Role == string(Active) && bt.Self == c.active {
		c.activeISR = f.InSync
	}
	if bt.Role == string(Active) {
		c.activeSeq = bt.Seq
	}
	c.observe(now, bt.Token, p.addr)
	if wasDown {
		c.log.Info("peer reachable", "peer", p.addr, "role", bt.Role)
	}
	if !c.pausedSince.IsZero() && bt.Flags.Round >= c.pauseRound {
		p.news = true
		changed = true
	}
	if changed {
		c.supervise(now)
	}
	c.maybeResume(now)
}

// PeerDown records that the link to peer failed: a dial refused or timed
// out, or the link broke. why is logged once per change.
//
// Only a refused dial (ErrRefused: nothing listens there) says the peer
// is down. A link that broke (a reset, a firewall reloaded, a peer that
// restarts) says nothing of the process at the other end: the shell dials
// again at once, and the peer is down when that dial is refused, or when
// it has not been heard for a failure timeout. Taking a broken link for a
// dead peer would let a standby take the role beside a live active.
func (c *Core) PeerDown(now time.Time, addr, why string) {
	c.noteTime(now)
	p := c.peerByAddr(addr)
	if p == nil {
		return
	}
	if why != ErrRefused.Error() {
		c.log.Debug("peer link lost", "peer", p.addr, "err", why)
		c.maybeResume(now)
		return
	}
	wasUp := !p.down && !p.heard.IsZero()
	p.down = true
	p.role = ""
	p.claimedAt, p.beatAt = time.Time{}, time.Time{} // the process that said so is gone
	if c.hint == p.addr {
		// The node the role was handed to is gone too: waiting for it
		// to be heard (followHint) would only keep the role empty.
		c.hint, c.hintFrom, c.hintUntil = "", "", time.Time{}
	}
	if !c.pausedSince.IsZero() && now.Sub(c.pausedSince) >= c.cfg.Heartbeat {
		// Nothing listens there: news, from a dial made since the
		// pause began (the shell dials again a heartbeat after a
		// refusal; one read right after the pause may be older).
		p.news = true
	}
	if wasUp {
		c.log.Info("peer unreachable", "peer", p.addr, "err", why)
		c.unexpect(now, p.addr)
		c.supervise(now)
	}
	c.maybeResume(now)
}

// PeerDenied records that peer refused this node's handshake (its TLS
// or peer secret check failed: a secret rotated on one node first, a
// certificate of the wrong kind, or a stranger's failures pausing this
// address there). The link is down, but the peer runs, and may serve as
// the active: see mayServe.
func (c *Core) PeerDenied(now time.Time, addr, why string) {
	c.noteTime(now)
	p := c.peerByAddr(addr)
	if p == nil {
		return
	}
	wasUp := !p.down && !p.heard.IsZero()
	if p.deniedAt.IsZero() {
		c.log.Warn("peer refuses this node's handshake: it runs, but cannot be heard; check that every node has the same --peer-secret-file and CA", "peer", p.addr, "err", why)
	}
	p.down = true
	p.deniedAt = now
	if wasUp {
		c.unexpect(now, p.addr)
	}
	c.supervise(now)
	c.maybeResume(now)
}

// mayServe returns a peer that may be serving as the active although
// this node does not hear it: its own heartbeats to this node said so
// within a failure timeout (this node's dial to it may be stuck), or it
// refused this node's handshake within a failure timeout (it runs, and
// nothing tells what it does). This node does not take the role beside
// such a peer: silence on one link is no proof that it is down, and two
// actives would grant the same keys. A peer whose secret or certificate
// does not match keeps this node from taking the role until it is
// fixed: the log says which (PeerDenied).
func (c *Core) mayServe(now time.Time) *peer {
	for _, p := range c.peers {
		if now.Sub(p.claimedAt) < c.cfg.FailureTimeout || c.refusedRecently(now, p) {
			return p
		}
	}
	return nil
}

// refusedRecently reports whether p refused this node's handshake within
// a failure timeout.
func (c *Core) refusedRecently(now time.Time, p *peer) bool {
	return !p.deniedAt.IsZero() && now.Sub(p.deniedAt) < c.cfg.FailureTimeout
}

// peerMessage serves a message from another node. Peer messages move
// tokens and roles: only the nodes of --peers may send them, naming
// themselves.
func (c *Core) peerMessage(now time.Time, cn *conn, req proto.Request) {
	m := req.Peer
	if m == nil {
		// Parse sets it for every peer op: this request was made by hand.
		c.send(cn, refused(req.Op, req.Key, NoLimit), proto.AppendError(c.buf[:0], req.Key, req.Op, "a peer message without its fields"))
		return
	}
	if c.peerByAddr(m.From) == nil {
		c.send(cn, refused(req.Op, req.Key, NoLimit), proto.AppendError(c.buf[:0], req.Key, req.Op, m.From+" is not a peer of this node (not in its --peers); peer messages are for lockd nodes"))
		return
	}
	switch req.Op {
	case proto.OpBeat:
		c.answerBeat(now, cn, m)
	case proto.OpSync:
		c.subscribe(now, cn, m)
	case proto.OpResolve:
		c.answerResolve(cn, m)
	case proto.OpApplied:
		c.applied(now, cn, m)
	case proto.OpTakeover:
		c.takeoverConfirmed(now, cn, m)
	}
}

// answerBeat answers a peer's heartbeat with this node's state.
func (c *Core) answerBeat(now time.Time, cn *conn, m *proto.PeerMessage) {
	bt := m.Beat
	// The sender's token may come from a competing active: never issue
	// one at or below it.
	c.observe(now, bt.Token, m.From)
	if p := c.peerByAddr(m.From); p != nil {
		// A restarted standby says what it speaks here first: it learns
		// where to subscribe from the answer.
		p.version = max(bt.Flags.Version, 1)
		p.beatAt = now
		if bt.Role == string(Active) && !bt.Flags.Paused {
			f := bt.Flags
			p.claimedAt = now
			p.claimed = claim{addr: p.addr, idx: p.idx, fresh: f.Fresh, base: f.Base, top: f.Top, baseSeq: f.BaseSeq, seq: bt.Seq, prev: f.Prev, noSeq: f.Version < 4}
		} else if bt.Role != string(Active) {
			// It says itself that it no longer serves (it stepped down):
			// no reason left to wait for it (mayServe).
			p.claimedAt = time.Time{}
		}
	}
	ans := c.beat(now)
	ans.From = m.From
	ans.Flags.Round = bt.Flags.Round
	c.sendNow(cn, record, proto.AppendBeatAnswer(c.buf[:0], ans))
}

// observe takes a token heard from a peer into the engine, so this node
// never issues one at or below it. A token whose epoch is further ahead
// of this node's clock than the engine's MaxEpochAhead is ignored, and
// logged: the clocks of the cluster's machines disagree, or the token is
// forged.
func (c *Core) observe(now time.Time, tok uint64, from string) {
	if !c.eng.Observe(now, tok) && now.Sub(c.skewLogged) >= 10*time.Second {
		c.skewLogged = now
		c.log.Warn("token ignored: its epoch is too far ahead of this node's clock; check the clocks (NTP)", "from", from, "token", tok, "max_clock_skew", c.eng.Config().MaxEpochAhead.String())
	}
}
