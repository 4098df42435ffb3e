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
	base, top uint64 // its state's newest token when it became active, and now
	news      bool   // heard since this node's pause began (see maybeResume)
	version   int    // the peer messages it speaks (proto.PeerVersion); 0 until heard

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
		Flags:  proto.BeatFlags{Sticky: c.sticky, Synced: c.synced, Fresh: c.role == Active && c.fresh, Top: c.top, Restored: c.disk.restored},
	}
	b.Flags.Version = proto.PeerVersion
	if c.role == Active {
		b.Flags.Base = c.base
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
	p.base, p.top = f.Base, f.Top
	p.restored = f.Restored
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
func (c *Core) PeerDown(now time.Time, addr, why string) {
	c.noteTime(now)
	p := c.peerByAddr(addr)
	if p == nil {
		return
	}
	wasUp := !p.down && !p.heard.IsZero()
	p.down = true
	p.role = ""
	if why == ErrRefused.Error() {
		p.news = true // nothing listens there: that is news
	}
	if wasUp {
		c.log.Info("peer unreachable", "peer", p.addr, "err", why)
		c.unexpect(now, p.addr)
		c.supervise(now)
	}
	c.maybeResume(now)
}

// answerBeat answers a peer's heartbeat with this node's state.
func (c *Core) answerBeat(now time.Time, cn *conn, req proto.Request) {
	bt, err := proto.ParseBeat(req)
	if err != nil {
		c.sendNow(cn, record, proto.AppendError(c.buf[:0], req.Key, proto.OpBeat, err.Error()))
		return
	}
	// The sender's token may come from a competing active: never issue
	// one at or below it.
	c.observe(now, bt.Token, req.Key)
	if p := c.peerByAddr(req.Key); p != nil {
		// A restarted standby says what it speaks here first: it learns
		// where to subscribe from the answer.
		p.version = max(bt.Flags.Version, 1)
	}
	ans := c.beat(now)
	ans.From = req.Key
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
