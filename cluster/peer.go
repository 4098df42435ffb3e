package cluster

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
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
	fresh     bool // active that started empty and has fed no standby yet
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

// pinWord is the flag of an active that got the role by command.
const pinWord = "pinned"

func (p *peer) aliveLocked(now time.Time, timeout time.Duration) bool {
	return !p.down && !p.heard.IsZero() && now.Sub(p.heard) < timeout
}

func (n *Node) flagsLocked() string {
	var f []string
	if n.sticky {
		f = append(f, "sticky")
	}
	if n.synced {
		f = append(f, "synced")
	}
	if n.role == Active && n.fresh {
		f = append(f, "fresh")
	}
	if n.role == Active && !n.pinnedAt.IsZero() {
		f = append(f, pinWord+":"+strconv.FormatInt(n.now().Sub(n.pinnedAt).Milliseconds(), 10))
	}
	if len(f) == 0 {
		return proto.WordNone
	}
	return strings.Join(f, ",")
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
		d := net.Dialer{Timeout: n.cfg.FailureTimeout}
		nc, err := d.DialContext(n.ctx, "tcp", p.addr)
		if err != nil {
			n.mu.Lock()
			wasUp := !p.down && !p.heard.IsZero()
			// A refused dial means nothing listens there: the node is
			// down now, no need to wait out the failure timeout.
			p.down = true
			p.role = ""
			n.mu.Unlock()
			if wasUp {
				n.log.Info("peer unreachable", "peer", p.addr, "err", shortErr(err))
				n.kickSupervisor()
			}
			if !sleepCtx(n.ctx, n.cfg.Heartbeat) {
				return
			}
			continue
		}
		n.runBeatLink(p, nc)
	}
}

func (n *Node) runBeatLink(p *peer, nc net.Conn) {
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
		r := bufio.NewReader(nc)
		for {
			nc.SetReadDeadline(time.Now().Add(n.cfg.FailureTimeout))
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			a, err := proto.ParseAnswer(line)
			if err != nil || a.Kind != proto.OpBeat || len(a.Fields) < 6 {
				continue
			}
			n.heardBeat(p, a.Fields)
		}
	}()
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	defer close(stop)
	buf := make([]byte, 0, 128)
	for {
		n.mu.Lock()
		buf = proto.AppendFields(buf[:0], proto.OpBeat, n.self, string(n.role), strconv.FormatUint(n.eng.HighWater(), 10), strconv.FormatUint(n.seq, 10), n.flagsLocked())
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

// heardBeat records a heartbeat answer: P FROM SELF ROLE TOKEN SEQ ACTIVE FLAGS.
func (n *Node) heardBeat(p *peer, f []string) {
	tok, _ := strconv.ParseUint(f[2], 10, 64)
	seq, _ := strconv.ParseUint(f[3], 10, 64)
	active := f[4]
	if active == proto.WordNone {
		active = ""
	}
	flags := f[5]
	n.mu.Lock()
	now := n.now()
	changed := p.down || p.heard.IsZero() || p.role != f[1] || p.active != active
	wasDown := p.down || p.heard.IsZero() || now.Sub(p.heard) >= n.cfg.FailureTimeout
	p.heard = now
	p.down = false
	if now.Before(p.staleUntil) && p.role != f[1] {
		// Possibly sent before the handoff: keep what the handoff told us.
		changed = false
	} else {
		p.role = f[1]
	}
	p.token = tok
	p.seq = seq
	p.active = active
	p.sticky, p.synced, p.pinned, p.pinnedAge, p.fresh = false, false, false, 0, false
	for _, fl := range strings.Split(flags, ",") {
		name, arg, _ := strings.Cut(fl, ":")
		switch name {
		case "sticky":
			p.sticky = true
		case "synced":
			p.synced = true
		case "fresh":
			p.fresh = true
		case pinWord:
			ms, _ := strconv.ParseInt(arg, 10, 64)
			p.pinned, p.pinnedAge = true, time.Duration(ms)*time.Millisecond
		}
	}
	if f[1] == string(Active) {
		n.activeSeq = seq
	}
	n.eng.Observe(now, tok)
	n.mu.Unlock()
	if wasDown {
		n.log.Info("peer reachable", "peer", p.addr, "role", f[1])
	}
	if changed {
		n.kickSupervisor()
	}
}

// answerBeat answers a peer's heartbeat with this node's state.
func (n *Node) answerBeat(c *conn, now time.Time, req proto.Request) {
	// The sender's token may come from a competing active: never issue
	// one at or below it.
	n.eng.Observe(now, req.Token)
	active := n.active
	if active == "" {
		active = proto.WordNone
	}
	fields := []string{n.self, string(n.role), strconv.FormatUint(n.eng.HighWater(), 10), strconv.FormatUint(n.seq, 10), active, n.flagsLocked()}
	c.send(func(b []byte) []byte { return proto.AppendFields(b, proto.OpBeat, req.Key, fields...) })
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
	d := net.Dialer{Timeout: n.cfg.FailureTimeout}
	nc, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return err
	}
	defer nc.Close()
	dl, _ := ctx.Deadline()
	nc.SetDeadline(dl)
	if _, err := nc.Write(proto.AppendFields(nil, proto.OpHandoff, takebackLabel, n.self)); err != nil {
		return err
	}
	line, err := bufio.NewReader(nc).ReadSlice('\n')
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
	d := net.Dialer{Timeout: n.cfg.FailureTimeout}
	nc, err := d.DialContext(ctx, "tcp", f.target)
	if err != nil {
		return err
	}
	defer nc.Close()
	go func() {
		<-ctx.Done()
		nc.Close()
	}()
	n.mu.Lock()
	hello := proto.AppendFields(nil, proto.OpSync, n.self, strconv.FormatUint(n.eng.HighWater(), 10))
	n.mu.Unlock()
	if _, err := nc.Write(hello); err != nil {
		return err
	}
	r := bufio.NewReaderSize(nc, 64<<10)
	var snap engine.Snapshot
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
			switch a.Kind {
			case proto.RecHeld:
				if len(a.Fields) != 2 {
					continue
				}
				tok, _ := strconv.ParseUint(a.Fields[0], 10, 64)
				lease, _ := proto.ParseSeconds([]byte(a.Fields[1]))
				if syncing {
					snap.Holders = append(snap.Holders, engine.Holder{Key: a.Key, Token: tok, LeaseLeft: lease})
					continue
				}
				n.eng.ApplyHeld(now, a.Key, tok, lease)
				n.seq++
			case proto.RecFree:
				if len(a.Fields) != 1 {
					continue
				}
				tok, _ := strconv.ParseUint(a.Fields[0], 10, 64)
				n.eng.ApplyFree(a.Key, tok)
				n.seq++
			case proto.RecMark:
				if len(a.Fields) == 2 {
					tok, _ := strconv.ParseUint(a.Fields[0], 10, 64)
					seq, _ := strconv.ParseUint(a.Fields[1], 10, 64)
					n.eng.Observe(now, tok)
					n.activeSeq = seq
				}
			case proto.RecSynced:
				if len(a.Fields) != 3 || a.Fields[0] != "synced" {
					continue
				}
				tok, _ := strconv.ParseUint(a.Fields[1], 10, 64)
				seq, _ := strconv.ParseUint(a.Fields[2], 10, 64)
				snap.Token = tok
				n.eng.Restore(now, snap, nil)
				n.seq = seq
				n.activeSeq = seq
				syncing = false
				n.synced = true
				f.live = true
				n.log.Info("synced", "self", n.self, "active", f.target, "holders", len(snap.Holders), "seq", seq, "took", time.Since(started).Round(time.Microsecond).String())
				snap = engine.Snapshot{}
			case proto.RecHandoff:
				// Everything before this record is applied: the role is ours.
				n.follow = nil
				n.sticky = false
				if p := n.peerByAddr(f.target); p != nil {
					n.afterRoleMove(p, Standby, now)
				}
				n.promoteLocked("handoff from " + f.target)
				if len(a.Fields) > 2 && a.Fields[2] == pinWord {
					n.pinnedAt = now
				}
				tok := n.eng.HighWater()
				n.mu.Unlock()
				nc.SetWriteDeadline(time.Now().Add(n.cfg.FailureTimeout))
				nc.Write(proto.AppendFields(nil, proto.RecTakeover, n.self, strconv.FormatUint(tok, 10)))
				f.cancel()
				return nil
			case proto.KindMoved:
				if len(a.Fields) == 1 && a.Fields[0] != n.self {
					// The role moved: trust the hint for a failure
					// timeout, until heartbeats confirm it.
					n.hint = a.Fields[0]
					n.hintUntil = now.Add(n.cfg.FailureTimeout)
				}
				n.mu.Unlock()
				return errors.New(f.target + " is not active (it points to " + strings.Join(a.Fields, " ") + ")")
			case proto.KindError:
				n.mu.Unlock()
				return errors.New(f.target + " refused the stream: " + a.ErrorText())
			}
		}
		n.mu.Unlock()
	}
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
// snapshot, the synced mark, then every change as it happens.
func (n *Node) subscribe(c *conn, now time.Time, req proto.Request) {
	if n.role != Active {
		c.send(func(b []byte) []byte { return proto.AppendMoved(b, req.Key, n.redirectTarget()) })
		return
	}
	n.eng.Observe(now, req.Token)
	n.advanceLocked(now)
	snap := n.eng.Snapshot(now)
	if !c.sub {
		n.streams = append(n.streams, c)
	}
	c.sub = true
	c.subFrom = req.Key
	c.outMu.Lock()
	c.stream = true
	c.outMu.Unlock()
	n.fresh = false // a standby now holds this node's state: it is the cluster's
	c.send(func(b []byte) []byte {
		for _, h := range snap.Holders {
			b = appendHeld(b, h.Key, h.Token, h.LeaseLeft)
		}
		return proto.AppendFields(b, proto.RecSynced, req.Key, "synced", strconv.FormatUint(snap.Token, 10), strconv.FormatUint(n.seq, 10))
	})
	n.log.Info("standby subscribed", "standby", req.Key, "holders", len(snap.Holders), "seq", n.seq)
}

// markStreamsLocked writes a W mark to every stream: the standbys learn
// the high-water mark and position, and that the active is alive.
func (n *Node) markStreamsLocked() {
	tok := strconv.FormatUint(n.eng.HighWater(), 10)
	seq := strconv.FormatUint(n.seq, 10)
	for _, c := range n.streams {
		c.send(func(b []byte) []byte { return proto.AppendFields(b, proto.RecMark, proto.WordNone, tok, seq) })
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

func shortErr(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused"
	}
	return err.Error()
}
