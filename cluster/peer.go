package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// peer is another node of --peers, as this node's heartbeat link sees it.
// Liveness is judged only from answers on the link this node dialled, so
// a one-way partition looks the same from both sides of each link.
type peer struct {
	addr string
	idx  int // priority: position in --peers

	// Guarded by n.mu.
	heard  time.Time // last heartbeat answer
	down   bool      // the last dial was refused or failed
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
	lastErr   string // why the last dial failed, logged once
	// staleUntil: the role moved between this node and the peer; until
	// then a heartbeat answer still in flight from before the move may
	// report the peer's old role, so its claim to be active is ignored.
	staleUntil time.Time
}

// afterRoleMove marks what this node knows of p after a handoff between
// them, ahead of p's next heartbeat: its role, and a short window in
// which answers sent before the move are not believed.
func (n *Node) afterRoleMove(p *peer, role Role, now time.Time) {
	p.role = string(role)
	p.heard = now
	p.down = false
	p.staleUntil = now.Add(3*n.cfg.Heartbeat + 50*time.Millisecond)
}

func (p *peer) aliveLocked(now time.Time, timeout time.Duration) bool {
	return !p.down && !p.heard.IsZero() && now.Sub(p.heard) < timeout
}

// beatLocked is this node's heartbeat: sent as P, or as the answer to one.
func (n *Node) beatLocked() proto.Beat {
	b := proto.Beat{
		From:   n.self,
		Self:   n.self,
		Role:   string(n.role),
		Token:  n.eng.HighWater(),
		Seq:    n.seq,
		Active: n.active,
		Flags:  proto.BeatFlags{Sticky: n.sticky, Synced: n.synced, Fresh: n.role == Active && n.fresh},
	}
	if n.role == Active && !n.pinnedAt.IsZero() {
		b.Flags.Pinned, b.Flags.PinnedAge = true, n.now().Sub(n.pinnedAt).Truncate(time.Millisecond)
	}
	return b
}

func (n *Node) kickSupervisor() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// beatLoop keeps a heartbeat link to p: dial, send P every heartbeat, read
// the answers; redial at once when the link breaks.
func (n *Node) beatLoop(p *peer) {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		nc, r, err := n.dialPeer(n.ctx, p.addr)
		if err != nil {
			n.mu.Lock()
			wasUp := !p.down && !p.heard.IsZero()
			// A refused dial means nothing listens there: the node is
			// down now, no need to wait out the failure timeout. A peer
			// that fails to authenticate is not one to follow either.
			p.down = true
			p.role = ""
			logged := p.lastErr
			p.lastErr = shortErr(err)
			n.mu.Unlock()
			if wasUp || (isAuthErr(err) && logged != shortErr(err)) {
				n.log.Info("peer unreachable", "peer", p.addr, "err", shortErr(err))
				n.kickSupervisor()
			}
			if !sleepCtx(n.ctx, n.cfg.Heartbeat) {
				return
			}
			continue
		}
		n.mu.Lock()
		p.lastErr = ""
		n.mu.Unlock()
		n.runBeatLink(p, nc, r)
	}
}

func (n *Node) runBeatLink(p *peer, nc net.Conn, r *bufio.Reader) {
	defer nc.Close()
	stop := make(chan struct{})
	go func() {
		select {
		case <-n.ctx.Done():
		case <-stop:
		}
		nc.Close()
	}()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			nc.SetReadDeadline(time.Now().Add(n.cfg.FailureTimeout))
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			a, err := proto.ParseAnswer(line)
			if err != nil || a.Kind != proto.OpBeat {
				continue
			}
			bt, err := proto.ParseBeatAnswer(a)
			if err != nil {
				n.refusedLog.log(n.log, "malformed heartbeat answer", "peer", p.addr, "err", err.Error())
				continue
			}
			n.heardBeat(p, bt)
		}
	}()
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	defer close(stop)
	buf := make([]byte, 0, 128)
	for {
		n.mu.Lock()
		buf = proto.AppendBeat(buf[:0], n.beatLocked())
		n.mu.Unlock()
		nc.SetWriteDeadline(time.Now().Add(n.cfg.FailureTimeout))
		if _, err := nc.Write(buf); err != nil {
			return
		}
		select {
		case <-t.C:
		case <-readDone:
			return
		case <-n.ctx.Done():
			return
		}
	}
}

// heardBeat records a heartbeat answer from p.
func (n *Node) heardBeat(p *peer, bt proto.Beat) {
	n.mu.Lock()
	now := n.now()
	changed := p.down || p.heard.IsZero() || p.role != bt.Role || p.active != bt.Active
	wasDown := p.down || p.heard.IsZero() || now.Sub(p.heard) >= n.cfg.FailureTimeout
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
	if bt.Role == string(Active) {
		n.activeSeq = bt.Seq
	}
	n.observe(bt.Token, p.addr)
	n.mu.Unlock()
	if wasDown {
		n.log.Info("peer reachable", "peer", p.addr, "role", bt.Role)
	}
	if changed {
		n.kickSupervisor()
	}
}

// answerBeat answers a peer's heartbeat with this node's state.
func (n *Node) answerBeat(c *conn, now time.Time, req proto.Request) {
	bt, err := proto.ParseBeat(req)
	if err != nil {
		c.send(func(b []byte) []byte { return proto.AppendError(b, req.Key, proto.OpBeat, err.Error()) })
		return
	}
	// The sender's token may come from a competing active: never issue
	// one at or below it.
	n.observe(bt.Token, req.Key)
	ans := n.beatLocked()
	ans.From = req.Key
	c.send(func(b []byte) []byte { return proto.AppendBeatAnswer(b, ans) })
}

// superviseLoop re-evaluates the role every heartbeat and whenever a peer
// changes.
func (n *Node) superviseLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
		}
		n.mu.Lock()
		n.superviseLocked(time.Since(start))
		n.mu.Unlock()
	}
}

// candidateLocked is the node that should be active when none is: among
// the live nodes, the first in priority order of the best tier (synced
// and not sticky; synced; not sticky; any).
func (n *Node) candidateLocked(now time.Time) string {
	type cand struct {
		addr           string
		idx            int
		synced, sticky bool
	}
	cs := []cand{{n.self, n.selfIdx, n.synced, n.sticky}}
	for _, p := range n.peers {
		if p.aliveLocked(now, n.cfg.FailureTimeout) {
			cs = append(cs, cand{p.addr, p.idx, p.synced, p.sticky})
		}
	}
	tiers := []func(cand) bool{
		func(c cand) bool { return c.synced && !c.sticky },
		func(c cand) bool { return c.synced },
		func(c cand) bool { return !c.sticky },
		func(c cand) bool { return true },
	}
	for _, ok := range tiers {
		best := cand{idx: -1}
		for _, c := range cs {
			if ok(c) && (best.idx < 0 || c.idx < best.idx) {
				best = c
			}
		}
		if best.idx >= 0 {
			return best.addr
		}
	}
	return n.self
}

func (n *Node) peerByAddr(addr string) *peer {
	for _, p := range n.peers {
		if p.addr == addr {
			return p
		}
	}
	return nil
}

func (n *Node) priorityOf(addr string) int {
	if addr == n.self {
		return n.selfIdx
	}
	if p := n.peerByAddr(addr); p != nil {
		return p.idx
	}
	return 1 << 30
}

func (n *Node) superviseLocked(since time.Duration) {
	if n.closing || n.leaving {
		return
	}
	now := n.now()
	// Who else claims the role, highest priority first.
	otherActive := ""
	for _, p := range n.peers {
		if p.aliveLocked(now, n.cfg.FailureTimeout) && p.role == string(Active) && !now.Before(p.staleUntil) {
			otherActive = p.addr
			break
		}
	}
	switch n.role {
	case Active:
		for _, p := range n.peers {
			if !p.aliveLocked(now, n.cfg.FailureTimeout) || p.role != string(Active) || now.Before(p.staleUntil) {
				continue
			}
			// Two actives: an active that holds the cluster's state beats
			// one that started empty and has fed no standby yet (it never
			// synced: it missed the state); otherwise priority decides.
			if n.fresh != p.fresh {
				if n.fresh {
					n.demoteLocked(p.addr, "an active with the cluster's state is reachable ("+p.addr+"); this one started empty")
					return
				}
				continue
			}
			if p.idx < n.selfIdx {
				n.demoteLocked(p.addr, "a higher-priority active is reachable ("+p.addr+")")
				return
			}
		}
		n.markStreamsLocked()
	case HandingOff:
		// The handoff ends by confirmation, abort or timeout.
	case Joining, Standby:
		if otherActive != "" {
			if n.active != otherActive || n.role == Joining {
				n.setRoleLocked(Standby, otherActive, "following the active")
			}
			n.ensureFollowLocked(otherActive)
			n.maybeTakeBackLocked(now)
			return
		}
		// No live active. A joining node first gives every peer one
		// chance to answer, so a restart does not grab the role from a
		// live active it has not heard yet.
		if n.role == Joining && !n.allPeersKnownLocked() && since < n.cfg.FailureTimeout {
			return
		}
		if n.active != "" && n.active != n.self {
			if p := n.peerByAddr(n.active); p != nil && p.aliveLocked(now, n.cfg.FailureTimeout) && p.role == string(HandingOff) {
				return // its handoff is in progress; wait for the outcome
			}
		}
		if n.hint != "" && now.Before(n.hintUntil) {
			if p := n.peerByAddr(n.hint); p != nil && p.aliveLocked(now, n.cfg.FailureTimeout) {
				// The old active said the role went to hint: wait for
				// its heartbeats to say so rather than compete.
				if n.active != n.hint {
					n.setRoleLocked(Standby, n.hint, "the previous active handed the role to "+n.hint)
				}
				return
			}
		}
		cand := n.candidateLocked(now)
		if cand == n.self {
			reason := "no active node is reachable"
			if n.active != "" {
				reason = "the active " + n.active + " is unreachable"
			}
			n.promoteLocked(reason)
			return
		}
		if n.role == Joining {
			n.setRoleLocked(Standby, "", "waiting for "+cand+" to become active")
		} else if n.active != "" {
			n.setRoleLocked(Standby, "", "the active "+n.active+" is unreachable; "+cand+" has priority")
		}
		n.stopFollowLocked()
	}
}

func (n *Node) allPeersKnownLocked() bool {
	for _, p := range n.peers {
		if !p.down && p.heard.IsZero() {
			return false
		}
	}
	return true
}

// promoteLocked makes this node active: a new token epoch above every
// token it has seen, then the leases that ran out meanwhile are reclaimed.
func (n *Node) promoteLocked(reason string) {
	n.stopFollowLocked()
	n.pinnedAt = time.Time{}
	now := n.now()
	n.eng.Succeed(now)
	n.setRoleLocked(Active, n.self, reason)
	n.fresh = !n.synced
	n.synced = true
	n.log.Info("promoted", "self", n.self, "reason", reason, "holders", len(n.eng.Snapshot(now).Holders), "token_floor", n.eng.HighWater())
	n.advanceLocked(now)
	n.armTimerLocked()
}

// demoteLocked steps down to standby behind to: waiters move there, the
// replication streams this node fed are closed so their standbys follow
// the new active.
func (n *Node) demoteLocked(to, reason string) {
	n.log.Info("demoted", "self", n.self, "to", to, "reason", reason)
	n.setRoleLocked(Standby, to, reason)
	n.dropWaitersLocked(to)
	n.closeStreamsLocked(to)
	n.ensureFollowLocked(to)
}

// dropWaitersLocked answers every waiter with M to.
func (n *Node) dropWaitersLocked(to string) {
	evs := n.eng.DropWaiters(nil)
	for _, ev := range evs {
		if c := n.conns[ev.Waiter.Conn]; c != nil {
			c.answerA(ev.Key, ev.Waiter.Seq, proto.AppendMoved(nil, ev.Key, to))
		}
	}
}

// closeStreamsLocked ends every replication stream this node feeds,
// telling each standby where the role went so it follows the new active
// without waiting to hear it from heartbeats (and without promoting
// itself in the meantime).
func (n *Node) closeStreamsLocked(to string) {
	for _, c := range n.streams {
		c.sub = false
		c.send(func(b []byte) []byte { return proto.AppendMoved(b, proto.WordNone, to) })
		c.flushAndClose()
	}
	n.streams = nil
}

// maybeTakeBackLocked asks a lower-priority active to hand the role back
// once this node has synced.
func (n *Node) maybeTakeBackLocked(now time.Time) {
	if n.sticky || !n.synced || n.takeback || n.active == "" || n.priorityOf(n.active) < n.selfIdx {
		return
	}
	if n.follow == nil || !n.follow.live {
		return
	}
	if p := n.peerByAddr(n.active); p != nil && p.pinned && now.Sub(n.base) >= p.pinnedAge {
		// Someone moved the role there by command while this node ran:
		// respect it. Only a node restarted since then takes it back.
		return
	}
	if now.Sub(n.lastTake) < n.cfg.FailureTimeout {
		return
	}
	n.takeback = true
	n.lastTake = now
	target := n.active
	n.log.Info("taking the role back", "self", n.self, "from", target)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		err := n.askHandoff(target)
		n.mu.Lock()
		n.takeback = false
		n.mu.Unlock()
		if err != nil {
			n.log.Warn("take-back refused", "self", n.self, "from", target, "err", err.Error())
		}
	}()
}

// askHandoff sends "H takeback SELF" to the active and waits for its answer.
func (n *Node) askHandoff(target string) error {
	ctx, cancel := context.WithTimeout(n.ctx, handoffTimeout+2*time.Second)
	defer cancel()
	nc, r, err := n.dialPeer(ctx, target)
	if err != nil {
		return err
	}
	defer nc.Close()
	dl, _ := ctx.Deadline()
	nc.SetDeadline(dl)
	if _, err := nc.Write(proto.AppendFields(nil, proto.OpHandoff, takebackLabel, n.self)); err != nil {
		return err
	}
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	a, err := proto.ParseAnswer(line)
	if err != nil {
		return err
	}
	if a.Kind != proto.OpHandoff {
		return errors.New(strings.TrimSpace(string(line)))
	}
	return nil
}

// takebackLabel marks a handoff asked for by a peer taking its role back
// by priority: unlike one asked for by command, it does not make the
// giver sticky.
const takebackLabel = "takeback"

// follower is the replication stream this standby reads from the active.
type follower struct {
	target string
	cancel context.CancelFunc
	live   bool // snapshot applied, stream running
}

func (n *Node) ensureFollowLocked(target string) {
	if n.follow != nil && n.follow.target == target {
		return
	}
	n.stopFollowLocked()
	ctx, cancel := context.WithCancel(n.ctx)
	f := &follower{target: target, cancel: cancel}
	n.follow = f
	n.wg.Add(1)
	go n.followLoop(ctx, f)
}

func (n *Node) stopFollowLocked() {
	if n.follow != nil {
		n.follow.cancel()
		n.follow = nil
	}
}

// followLoop keeps a replication stream from f.target until cancelled.
func (n *Node) followLoop(ctx context.Context, f *follower) {
	defer n.wg.Done()
	for ctx.Err() == nil {
		err := n.followOnce(ctx, f)
		n.mu.Lock()
		f.live = false
		n.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			n.log.Debug("replication stream ended", "self", n.self, "active", f.target, "err", shortErr(err))
		}
		n.kickSupervisor()
		if !sleepCtx(ctx, n.cfg.Heartbeat) {
			return
		}
	}
}

func (n *Node) followOnce(ctx context.Context, f *follower) error {
	nc, r, err := n.dialPeer(ctx, f.target)
	if err != nil {
		return err
	}
	defer nc.Close()
	go func() {
		<-ctx.Done()
		nc.Close()
	}()
	n.mu.Lock()
	// A handoff cancelled on the stream before this one is settled.
	delete(n.cancelled, f.target)
	hello := proto.AppendSync(nil, n.self, n.eng.HighWater())
	n.mu.Unlock()
	if _, err := nc.Write(hello); err != nil {
		return err
	}
	// Until the synced mark, the snapshot and the changes made while it
	// was sent arrive interleaved, each record the state of its key when
	// written: they build the new state here, by key, and replace the
	// old one at the mark.
	staged := make(map[string]stagedHold)
	syncing := true
	started := time.Now()
	lines := make([][]byte, 0, 64)
	for {
		// Silence longer than the failure timeout means the active is
		// gone even if the socket is not (the active writes a W mark
		// every heartbeat).
		nc.SetReadDeadline(time.Now().Add(n.cfg.FailureTimeout))
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		lines = append(lines[:0], append([]byte(nil), line...))
		for len(lines) < 256 && r.Buffered() > 0 {
			buf, _ := r.Peek(r.Buffered())
			if !containsNL(buf) {
				break
			}
			l, _ := r.ReadSlice('\n')
			lines = append(lines, append([]byte(nil), l...))
		}
		n.mu.Lock()
		if n.follow != f {
			n.mu.Unlock()
			return errors.New("no longer following " + f.target)
		}
		now := n.now()
		for _, l := range lines {
			a, err := proto.ParseAnswer(l)
			if err != nil {
				n.mu.Unlock()
				return err
			}
			if a.Kind == proto.KindMoved && a.Key != proto.WordNone {
				// The answer to Y: this node is not active, ask addr.
				n.mu.Unlock()
				return errors.New(f.target + " is not active (it points to " + strings.Join(a.Fields, " ") + ")")
			}
			rec, err := proto.ParseRecord(a)
			if err != nil {
				n.mu.Unlock()
				return fmt.Errorf("replication stream from %s: %w", f.target, err)
			}
			switch rec.Kind {
			case proto.RecHeld:
				if syncing {
					staged[rec.Key] = stagedHold{rec.Token, now.Add(rec.Lease)}
					continue
				}
				n.eng.ApplyHeld(now, rec.Key, rec.Token, rec.Lease)
				n.seq++
			case proto.RecFree:
				if syncing {
					if h, ok := staged[rec.Key]; ok && h.token == rec.Token {
						delete(staged, rec.Key)
					}
					continue
				}
				n.eng.ApplyFree(rec.Key, rec.Token)
				n.seq++
			case proto.RecMark:
				n.observe(rec.Token, f.target)
				n.activeSeq = rec.Seq
			case proto.RecSynced:
				snap := engine.Snapshot{Token: rec.Token, Holders: make([]engine.Holder, 0, len(staged))}
				for k, h := range staged {
					snap.Holders = append(snap.Holders, engine.Holder{Key: k, Token: h.token, LeaseLeft: max(h.until.Sub(now), 0)})
				}
				staged = nil
				n.observe(rec.Token, f.target)
				n.eng.Restore(now, snap, nil)
				n.seq = rec.Seq
				n.activeSeq = rec.Seq
				syncing = false
				n.synced = true
				f.live = true
				n.log.Info("synced", "self", n.self, "active", f.target, "holders", len(snap.Holders), "seq", rec.Seq, "took", time.Since(started).Round(time.Microsecond).String())
			case proto.RecHandoff:
				if tok, ok := n.cancelled[f.target]; ok && tok == rec.Token {
					// The giver asked (C) before this record was read,
					// was told it was not taken, and serves again.
					delete(n.cancelled, f.target)
					n.mu.Unlock()
					return errors.New("handoff from " + f.target + " was cancelled")
				}
				if syncing {
					n.mu.Unlock()
					return errors.New("handoff from " + f.target + " before the snapshot completed")
				}
				// Everything before this record is applied: the role is ours.
				n.observe(rec.Token, f.target)
				n.takenFrom, n.takenToken = f.target, rec.Token
				n.follow = nil
				n.sticky = false
				if p := n.peerByAddr(f.target); p != nil {
					n.afterRoleMove(p, Standby, now)
				}
				n.promoteLocked("handoff from " + f.target)
				if rec.Pinned {
					n.pinnedAt = now
				}
				tok := n.eng.HighWater()
				n.mu.Unlock()
				if !n.testLoseTakeover.Load() {
					nc.SetWriteDeadline(time.Now().Add(n.cfg.FailureTimeout))
					nc.Write(proto.AppendTakeover(nil, n.self, tok))
				}
				f.cancel()
				return nil
			case proto.KindMoved:
				if rec.Addr != n.self {
					// The role moved: trust the hint for a failure
					// timeout, until heartbeats confirm it.
					n.hint = rec.Addr
					n.hintUntil = now.Add(n.cfg.FailureTimeout)
				}
				n.mu.Unlock()
				return errors.New(f.target + " is not active (it points to " + rec.Addr + ")")
			}
		}
		n.mu.Unlock()
	}
}

// stagedHold is a lock received while a stream syncs: its holder and when
// its lease ends.
type stagedHold struct {
	token uint64
	until time.Time
}

func containsNL(b []byte) bool {
	for _, c := range b {
		if c == '\n' {
			return true
		}
	}
	return false
}

// subscribe turns c into a replication stream for a standby: the
// snapshot, the synced mark, then every change as it happens. A standby
// has one stream: a new one from the same node replaces the old.
func (n *Node) subscribe(c *conn, now time.Time, req proto.Request) {
	if n.role != Active {
		c.send(func(b []byte) []byte { return proto.AppendMoved(b, req.Key, n.redirectTarget()) })
		return
	}
	if c.sub {
		c.send(func(b []byte) []byte {
			return proto.AppendError(b, req.Key, proto.OpSync, "this connection is a replication stream already")
		})
		return
	}
	n.observe(req.Token, req.Key)
	for _, s := range n.streams {
		if s.subFrom == req.Key {
			s.sub = false
			s.flushAndClose()
		}
	}
	n.streams = slices.DeleteFunc(n.streams, func(s *conn) bool { return s.subFrom == req.Key })
	n.advanceLocked(now)
	n.streams = append(n.streams, c)
	c.sub, c.subFrom, c.syncing = true, req.Key, true
	c.outMu.Lock()
	c.stream = true
	c.outMu.Unlock()
	n.log.Info("standby subscribed", "standby", req.Key, "remote", c.remote, "seq", n.seq)
	n.wg.Add(1)
	go n.sendSnapshot(c, req.Key)
}

// snapshotSlice is how many keys one hold of the node mutex puts in a
// snapshot: about a tenth of a millisecond of work.
const snapshotSlice = 4096

// sendSnapshot writes the held locks to a new stream a slice at a time,
// letting other requests in between and never running ahead of what the
// standby reads. Changes made meanwhile go down the same stream as they
// happen (replicate), so every record of a key reflects its state when
// written, and the last one the standby reads is the latest: the standby
// applies them in order and, at the synced mark, holds the active's state.
// (engine.Scan visits every key held for the whole scan at least once.)
func (n *Node) sendSnapshot(c *conn, from string) {
	defer n.wg.Done()
	started := time.Now()
	cursor, held := engine.ScanStart, 0
	var buf []byte
	for {
		if !c.waitRoom() {
			return
		}
		n.mu.Lock()
		if c.gone || !c.sub || n.role != Active {
			n.mu.Unlock()
			return
		}
		now := n.now()
		buf = buf[:0]
		cursor = n.eng.Scan(now, cursor, snapshotSlice, func(h engine.Holder, isHeld bool) {
			if isHeld {
				buf = proto.AppendRecord(buf, proto.Record{Kind: proto.RecHeld, Key: h.Key, Token: h.Token, Lease: h.LeaseLeft})
				held++
			}
		})
		if cursor == 0 {
			buf = proto.AppendRecord(buf, proto.Record{Kind: proto.RecSynced, From: from, Token: n.eng.HighWater(), Seq: n.seq})
			c.syncing = false
			n.fresh = false // a standby now holds this node's state: it is the cluster's
		}
		c.write(buf)
		n.mu.Unlock()
		if cursor == 0 {
			n.log.Info("snapshot sent", "standby", from, "holders", held, "took", time.Since(started).Round(time.Microsecond).String())
			return
		}
	}
}

// markStreamsLocked writes a W mark to every stream: the standbys learn
// the high-water mark and position, and that the active is alive.
func (n *Node) markStreamsLocked() {
	rec := proto.Record{Kind: proto.RecMark, Token: n.eng.HighWater(), Seq: n.seq}
	for _, c := range n.streams {
		c.send(func(b []byte) []byte { return proto.AppendRecord(b, rec) })
	}
}

// observe takes a token heard from a peer (authenticated, or any caller
// on a node that requires no authentication) into the engine, so this
// node never issues one at or below it. A token whose epoch is further
// ahead of this node's clock than --max-clock-skew is ignored, and logged:
// the clocks of the cluster's machines disagree, or the token is forged.
func (n *Node) observe(tok uint64, from string) {
	if !n.eng.Observe(n.now(), tok) {
		n.skewLog.log(n.log, "token ignored: its epoch is too far ahead of this node's clock; check the clocks (NTP)", "from", from, "token", tok, "max_clock_skew", n.eng.Config().MaxEpochAhead.String())
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// isAuthErr reports whether a dial failed past TCP: in TLS or the peer
// secret, which is a configuration to fix rather than a node down.
func isAuthErr(err error) bool {
	var pe *peerAuthError
	return errors.As(err, &pe)
}

func shortErr(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused"
	}
	return err.Error()
}
