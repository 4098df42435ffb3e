package core

import (
	"slices"
	"strings"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// Synchronous replication.
//
// A standby acknowledges on its stream (V FROM SEQ) every batch of
// records it applied. The active answers a client only once every standby
// in sync has applied every change made so far: an answer is held until
// the committed position passes the position the node had when it was
// given (a release that granted a waiter, a renewal...). Acknowledgements
// cover everything written before them, so one round trip releases every
// answer given meanwhile: the group commit of a database.
//
// The standbys in sync are the caught-up ones that keep acknowledging: a
// standby joins once it has acknowledged its snapshot, and leaves when an
// answer has waited for it longer than Config.SyncTimeout, or its stream
// closes. The active names them in its heartbeats (isr:), and when it
// fails the standbys promote one of them first: it holds every answer
// the active gave. With no standby in sync the active is degraded: it
// answers at once, as in async mode, and says so (S, lockctl status, the
// log), since one live node is enough to serve (docs/cluster.md, Consistency).
//
// A new active waits the same way for the standbys that were in sync with
// the last one (they hold what it answered) to subscribe and catch up,
// for a sync timeout at most: else a second failure right after the first
// could lose what the new active answers meanwhile.
//
// Answers on one connection keep their order: once one is held, every
// later answer on that connection waits behind it. Peer messages
// (heartbeats, handoffs) and redirects say nothing about the lock state:
// they are written at once (sendNow).

// heldAnswer is an answer waiting for acknowledgements.
type heldAnswer struct {
	need    uint64 // written once committed reaches it
	needLog uint64 // and once the disk has this many records (disk.go)
	since   time.Time
	line    heldLine
}

// heldLine is an answer written later, and what it says.
type heldLine struct {
	a    answer
	line []byte
}

// emit writes an answer to a client now, or holds it until the standbys
// in sync have applied every change made so far. Streams are written at
// once.
func (c *Core) emit(cn *conn, a answer, b []byte) bool {
	if cn.stream != nil || len(cn.held) == 0 && (c.seq <= c.committed || !c.waits()) && c.onDisk() {
		return c.write(cn.id, a, b)
	}
	if len(cn.held) == 0 {
		c.holding = append(c.holding, cn)
	}
	cn.held = append(cn.held, heldAnswer{need: c.seq, needLog: c.disk.n, since: c.lastEvent, line: heldLine{c.later(a), cn.holdLine(b)}})
	return true
}

// later is a, an answer written after the event being handled: it says
// when its request was taken up, for Send.Waited.
func (c *Core) later(a answer) answer {
	if a.taken != 0 || a.outcome == NoOutcome {
		return a
	}
	t := &c.taking
	if t.at != 0 && t.open && t.op == a.op && t.key == a.key {
		return a.takenAt(t.at)
	}
	return a.takenAt(c.lastEvent.UnixNano())
}

// holdLine keeps a copy of b, an answer held, in cn's buffer of held
// lines: a buffer reused once every held answer is written costs no
// allocation per answer.
func (cn *conn) holdLine(b []byte) []byte {
	start := len(cn.heldBuf)
	cn.heldBuf = append(cn.heldBuf, b...)
	return cn.heldBuf[start:len(cn.heldBuf):len(cn.heldBuf)]
}

// compactHeld moves the lines still held to the front of the buffer once
// the written ones take more than half of it, so that a connection whose
// answers never all catch up does not grow it without bound.
func (cn *conn) compactHeld() {
	used := 0
	for _, h := range cn.held {
		used += len(h.line.line)
	}
	if used > len(cn.heldBuf)/2 {
		return
	}
	buf := cn.heldBuf[:0]
	for j := range cn.held {
		l := cn.held[j].line.line
		start := len(buf)
		buf = append(buf, l...) // moves down: l starts at or after start
		cn.held[j].line.line = buf[start:len(buf):len(buf)]
	}
	cn.heldBuf = buf
}

// sendNow writes b at once, behind the answers held on cn if any.
func (c *Core) sendNow(cn *conn, a answer, b []byte) bool {
	c.buf = b[:0]
	if len(cn.held) > 0 {
		return c.emit(cn, a, b)
	}
	return c.write(cn.id, a, b)
}

// write hands b, which says a, to the shell for connection id. It
// reports false when the core knows id is gone.
func (c *Core) write(id ConnID, a answer, b []byte) bool {
	if c.conns[id] == nil {
		return false
	}
	s := Send{Conn: id, Op: a.op, Outcome: a.outcome, Limit: a.limit, Key: a.key, Token: a.token}
	c.stamp(&s, a)
	c.act(Action{Kind: ActSend, Conn: id, Send: s}, b)
	return true
}

// waits reports whether answers wait for standbys: sync mode, active,
// and a standby in sync or expected.
func (c *Core) waits() bool {
	if c.cfg.Async || len(c.peers) == 0 || c.role != Active && c.role != HandingOff {
		return false
	}
	if len(c.expect) > 0 {
		return true
	}
	for _, s := range c.streams {
		if s.stream.inSync {
			return true
		}
	}
	return false
}

// expectInSync makes a new active wait for the standbys that were in sync
// with the last one.
func (c *Core) expectInSync(now time.Time) {
	c.committed = c.seq
	c.expect = c.expect[:0]
	if c.cfg.Async {
		return
	}
	for _, a := range c.activeISR {
		if p := c.peerByAddr(a); p != nil && p.alive(now, c.cfg.FailureTimeout) {
			c.expect = append(c.expect, a)
		}
	}
	c.expectUntil = now.Add(c.cfg.SyncTimeout)
	c.setDegraded(now, len(c.expect) == 0 && len(c.peers) > 0)
}

// expectLive makes an active that did not run for a while wait for every
// live peer to follow it and acknowledge, up to the sync timeout.
func (c *Core) expectLive(now time.Time) {
	if c.cfg.Async {
		return
	}
	c.committed = c.seq
	c.expect = c.expect[:0]
	for _, p := range c.peers {
		if p.alive(now, c.cfg.FailureTimeout) {
			c.expect = append(c.expect, p.addr)
		}
	}
	c.expectUntil = now.Add(c.cfg.SyncTimeout)
}

// unexpect stops waiting for addr to join.
func (c *Core) unexpect(now time.Time, addr string) {
	if i := slices.Index(c.expect, addr); i >= 0 {
		c.expect = slices.Delete(c.expect, i, i+1)
		c.commit(now)
	}
}

// checkExpect stops waiting for the expected standbys that did not catch
// up within the sync timeout.
//
// Not while paused (Paused): the timeout ran out while this node was
// stopped, not because a standby is slow, and another node may have taken
// the role meanwhile without the answers held here. Dropping the standbys
// then would write those answers although no standby holds their changes;
// they wait until the pause ends (the node serves on, and the standbys are
// timed again) or the node steps down (settleHeld). checkHeld likewise.
func (c *Core) checkExpect(now time.Time) {
	if len(c.expect) == 0 || now.Before(c.expectUntil) || c.Paused() {
		return
	}
	c.log.Warn("standby did not catch up with the new active within --sync-timeout: answers stop waiting for it", "self", c.self, "standbys", strings.Join(c.expect, ","), "sync_timeout", c.cfg.SyncTimeout.String())
	c.expect = c.expect[:0]
	c.commit(now)
}

// inSync lists the standbys answers wait for, in priority order.
func (c *Core) inSync() []string {
	if c.cfg.Async {
		return nil
	}
	var out []string
	for _, s := range c.streams {
		if s.stream.inSync {
			out = append(out, s.stream.from)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return c.priorityOf(a) - c.priorityOf(b) })
	return out
}

// applied records a standby's acknowledgement "V FROM SEQ" on its stream.
func (c *Core) applied(now time.Time, cn *conn, m *proto.PeerMessage) {
	s := cn.stream
	if s == nil || s.from != m.From || s.syncing {
		return
	}
	s.acked = max(s.acked, m.Seq)
	if !s.inSync && s.acked >= s.synced && !c.cfg.Async {
		s.inSync = true
		c.log.Info("standby in sync: answers wait for it", "self", c.self, "standby", s.from)
		if i := slices.Index(c.expect, s.from); i >= 0 {
			c.expect = slices.Delete(c.expect, i, i+1)
		}
	}
	c.commit(now)
}

// commit moves the committed position to what every standby in sync has
// applied (to the node's own position when none is: degraded), and
// writes the held answers it releases.
func (c *Core) commit(now time.Time) {
	if c.cfg.Async {
		return
	}
	if c.role != Active && c.role != HandingOff {
		// Nothing waits on a node that is not active (settleHeld ran).
		c.committed = c.seq
		c.release(c.releasable)
		return
	}
	committed, any := c.seq, len(c.expect) > 0
	if any {
		committed = c.committed // an expected standby has acknowledged nothing here yet
	}
	for _, s := range c.streams {
		if s.stream.inSync {
			committed = min(committed, s.stream.acked)
			any = true
		}
	}
	c.setDegraded(now, !any && len(c.peers) > 0)
	c.committed = max(c.committed, committed)
	c.release(c.releasable)
}

// release writes the held answers ok lets go, in order per connection.
// A connection whose answers are all written is sent the watch news that
// waited behind them.
func (c *Core) release(ok func(heldAnswer) bool) {
	keep := c.holding[:0]
	var news []*conn
	for _, cn := range c.holding {
		i := 0
		for ; i < len(cn.held) && ok(cn.held[i]); i++ {
			h := cn.held[i].line
			c.write(cn.id, h.a, h.line)
		}
		if i == len(cn.held) {
			clear(cn.held)
			cn.held, cn.heldBuf = cn.held[:0], cn.heldBuf[:0]
			if len(cn.watches) > 0 {
				news = append(news, cn)
			}
			continue
		}
		cn.held = cn.held[i:]
		if i > 0 {
			cn.compactHeld()
		}
		keep = append(keep, cn)
	}
	clear(c.holding[len(keep):])
	c.holding = keep
	for _, cn := range news {
		c.sendDueWatches(c.lastEvent, cn)
	}
}

// setDegraded records whether the active has no standby in sync. It
// logs nothing yet: every active starts degraded until its standbys have
// subscribed and caught up, which on a normal start takes well under
// degradedGrace; warnDegraded warns of one that stays so.
func (c *Core) setDegraded(now time.Time, d bool) {
	if d == c.degraded {
		return
	}
	c.degraded = d
	if d {
		c.degradedSince = now
		return
	}
	if c.degradedWarned {
		c.log.Info("replication in sync again", "self", c.self, "standbys", len(c.inSync()))
	}
	c.degradedWarned = false
}

// degradedGrace is how long an active may have no standby in sync before
// it warns: long enough for standbys started with it to subscribe and
// catch up, short enough that an operator hears of a cluster running
// without a copy.
func (c *Core) degradedGrace() time.Duration { return 5 * c.cfg.FailureTimeout }

// warnDegraded warns, once per spell, of an active that has had no
// standby in sync for degradedGrace.
func (c *Core) warnDegraded(now time.Time) {
	if !c.degraded || c.degradedWarned || c.role != Active || now.Sub(c.degradedSince) < c.degradedGrace() {
		return
	}
	c.degradedWarned = true
	c.log.Warn("replication degraded: no standby in sync, answers do not wait for one, and a crash of this node may lose them",
		"self", c.self, "for", now.Sub(c.degradedSince).Round(time.Millisecond).String())
}

// heldDeadline is when the oldest held answer times out.
func (c *Core) heldDeadline() (time.Time, bool) {
	var oldest time.Time
	if c.cfg.Async || len(c.peers) == 0 {
		return oldest, false // answers wait for the disk only
	}
	for _, cn := range c.holding {
		for _, h := range cn.held {
			if !c.waitsForStandbys(h) {
				continue // only for the disk: no standby to drop, no deadline
			}
			if oldest.IsZero() || h.since.Before(oldest) {
				oldest = h.since
			}
			break
		}
	}
	return oldest.Add(c.cfg.SyncTimeout), !oldest.IsZero()
}

// waitsForStandbys reports whether h waits for a standby's
// acknowledgement, not only for the disk.
func (c *Core) waitsForStandbys(h heldAnswer) bool {
	return !c.cfg.Async && len(c.peers) > 0 && h.need > c.committed
}

// checkHeld drops from the standbys in sync those an answer has waited
// for longer than the sync timeout: a slow or silent standby must not hold
// every client back. They rejoin when they catch up.
func (c *Core) checkHeld(now time.Time) {
	d, ok := c.heldDeadline()
	if !ok || now.Before(d) || c.Paused() {
		return
	}
	var need uint64
	for _, cn := range c.holding {
		for _, h := range cn.held {
			if now.Sub(h.since) >= c.cfg.SyncTimeout {
				need = max(need, h.need)
			}
		}
	}
	for _, s := range c.streams {
		if s.stream.inSync && s.stream.acked < need {
			s.stream.inSync = false
			s.stream.synced = c.seq // rejoins once it has applied what is written now
			c.log.Warn("standby out of sync: no acknowledgement within --sync-timeout", "self", c.self, "standby", s.stream.from, "sync_timeout", c.cfg.SyncTimeout.String())
		}
	}
	c.commit(now)
}

// settleHeld ends the holding when this node stops being active: after a
// handoff the successor has every change (it applied the stream up to the
// H record), so the answers are written; otherwise (demoted, a handoff
// lost) their changes may be lost, so they are not given: the connections
// are closed, and their clients ask again where the role is.
func (c *Core) settleHeld(handedOff bool) {
	c.expect = c.expect[:0]
	if handedOff {
		c.committed = c.seq
		c.release(func(heldAnswer) bool { return true })
		return
	}
	for _, cn := range c.holding {
		cn.held = nil
		c.act(Action{Kind: ActClose, Conn: cn.id}, nil)
	}
	c.holding = c.holding[:0]
	c.committed = c.seq
	c.expect = c.expect[:0]
	c.degraded, c.degradedWarned = false, false // not active: nothing to say
}

// StreamAck says the shell fed the stream from target a batch of
// records: the core replies its acknowledgement on it (V), one line
// however many records, unless there is nothing new to acknowledge or
// its active does not read acknowledgements.
func (c *Core) StreamAck(now time.Time, target string) {
	c.noteTime(now)
	f := c.follow
	pos, ok := c.ackPos()
	if f == nil || f.target != target || !f.open || f.ending || f.syncing || !ok || f.acked == pos && !f.ackDue {
		return
	}
	if p := c.peerByAddr(target); p == nil || p.version < 2 {
		return
	}
	f.acked, f.ackDue = pos, false
	c.act(Action{Kind: ActStreamReply, Peer: target}, proto.AppendApplied(c.buf[:0], c.self, pos))
}
