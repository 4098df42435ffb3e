package core

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// handoff is a transfer of the active role in flight: the successor has
// been told (an H record at the end of its stream) and this node waits
// for its confirmation (O) before redirecting everyone there.
type handoff struct {
	to       string
	reason   string
	sticky   bool
	token    uint64 // the high-water mark in the H record: names this handoff
	started  time.Time
	deadline time.Time // confirmation due by then
	done     []func(newActive string, err error)
	// resolving: the successor did not confirm in time, or its stream
	// closed. It may have taken the role all the same, so this node
	// serves nothing until the successor says whether it did (C).
	resolving    bool
	why          string
	askID        uint64    // the C in flight, 0 when none
	resolveSince time.Time // when settling began
}

// handoffRequest serves "H label [addr]": a command (sticky) or a peer's
// take-back (label takeback, not sticky).
func (c *Core) handoffRequest(now time.Time, cn *conn, req proto.Request) {
	label := req.Key
	id := cn.id
	answer := func(newActive string, err error) {
		cn := c.conns[id]
		if cn == nil {
			return
		}
		if err != nil {
			c.sendNow(cn, refused(proto.OpHandoff, label, NoLimit), proto.AppendError(c.buf[:0], label, proto.OpHandoff, err.Error()))
			return
		}
		c.sendNow(cn, answered(proto.OpHandoff, label, OK), proto.AppendFields(c.buf[:0], proto.OpHandoff, label, proto.WordOK, newActive))
	}
	switch c.role {
	case HandingOff:
		if c.handoff.resolving {
			answer("", errors.New("a handoff to "+c.handoff.to+" is being settled; retry in a moment"))
			return
		}
		if req.Addr == "" || req.Addr == c.handoff.to {
			c.handoff.done = append(c.handoff.done, answer)
			return
		}
		answer("", errors.New("a handoff to "+c.handoff.to+" is already in progress; retry when it ends"))
		return
	case Active:
	default:
		c.sendNow(cn, answered(proto.OpHandoff, label, Moved), proto.AppendMoved(c.buf[:0], label, c.redirectTarget(now)))
		return
	}
	sticky := label != TakebackLabel
	reason := "requested by " + cn.remote
	if !sticky {
		reason = "take-back by " + req.Addr
	}
	if err := c.startHandoff(now, req.Addr, reason, sticky, answer); err != nil {
		answer("", err)
	}
}

// waitingHandoff is a handoff asked for when no standby was caught up yet
// but one was on its way (its snapshot being sent, or a live standby about
// to subscribe, as right after an earlier handoff): it starts as soon as
// one is caught up, or fails when until passes.
type waitingHandoff struct {
	to, reason string
	sticky     bool
	done       func(string, error)
	until      time.Time
}

// startHandoff hands the active role to `to`, or to the caught-up standby
// of highest priority when to is "". done is called with the outcome. When
// no standby is caught up but one is on its way, the handoff waits for it
// up to a failure timeout.
func (c *Core) startHandoff(now time.Time, to, reason string, sticky bool, done func(string, error)) error {
	if c.role != Active {
		return errors.New("this node is not active")
	}
	if c.waiting != nil {
		return errors.New("a handoff is already waiting for a standby to catch up; retry when it ends")
	}
	target, err := c.handoffTarget(to)
	if !c.pausedSince.IsZero() {
		// This node did not run for a while and first checks whether
		// another took over: the handoff waits for that.
		target, err = nil, errors.New("this node is checking whether another took over while it was stopped; retry in a moment")
	}
	if err != nil {
		if !c.pausedSince.IsZero() || c.standbyOnItsWay(now, to) {
			c.waiting = &waitingHandoff{to: to, reason: reason, sticky: sticky, done: done, until: now.Add(c.cfg.FailureTimeout)}
			c.log.Info("handoff waits for a standby to catch up", "self", c.self, "to", to, "reason", reason)
			return nil
		}
		return err
	}
	c.beginHandoff(now, target, reason, sticky, done)
	return nil
}

// handoffTarget is the stream of the caught-up standby to hand off to.
func (c *Core) handoffTarget(to string) (*conn, error) {
	var target *conn
	for _, s := range c.streams {
		if s.stream.syncing || s.stream.version >= 2 && s.stream.acked < s.stream.synced {
			// Still syncing, or its snapshot is sent but not yet
			// acknowledged as applied: handed the role now, it could
			// refuse the handoff record and be left without the state.
			continue
		}
		if to != "" {
			if s.stream.from == to {
				target = s
				break
			}
			continue
		}
		if target == nil || c.priorityOf(s.stream.from) < c.priorityOf(target.stream.from) {
			target = s
		}
	}
	if target != nil {
		return target, nil
	}
	if to == c.self {
		return nil, errors.New(to + " is already active")
	}
	if to != "" {
		return nil, errors.New(to + " is not a caught-up standby of this node (not in --peers, down, or not synced yet); check lockctl status")
	}
	return nil, errors.New("no standby is caught up to take the role; start one or check lockctl status")
}

// standbyOnItsWay reports whether a standby (to, or any when to is "")
// is syncing from this node or is live and about to subscribe.
func (c *Core) standbyOnItsWay(now time.Time, to string) bool {
	for _, s := range c.streams {
		if s.stream.syncing && (to == "" || s.stream.from == to) {
			return true
		}
	}
	for _, p := range c.peers {
		if (to == "" || p.addr == to) && p.alive(now, c.cfg.FailureTimeout) && (p.role == string(Standby) || p.role == string(Joining)) {
			return true
		}
	}
	return false
}

// retryWaitingHandoff starts the waiting handoff if its standby caught up,
// or fails it at its deadline.
func (c *Core) retryWaitingHandoff(now time.Time) {
	w := c.waiting
	if w == nil {
		return
	}
	if c.role != Active {
		c.failWaitingHandoff("this node is no longer active")
		return
	}
	target, err := c.handoffTarget(w.to)
	if err == nil && c.pausedSince.IsZero() {
		c.waiting = nil
		c.beginHandoff(now, target, w.reason, w.sticky, w.done)
		return
	}
	if err == nil {
		err = errors.New("this node is checking whether another took over while it was stopped; retry in a moment")
	}
	if !now.Before(w.until) {
		c.waiting = nil
		w.done("", err)
	}
}

func (c *Core) failWaitingHandoff(why string) {
	if w := c.waiting; w != nil {
		c.waiting = nil
		w.done("", errors.New("handoff not started: "+why))
	}
}

// beginHandoff tells the successor on target's stream to take over.
func (c *Core) beginHandoff(now time.Time, target *conn, reason string, sticky bool, done func(string, error)) {
	to := target.stream.from
	// Standbys still syncing cannot be handed the role and would be left
	// half-synced whatever happens: they subscribe again.
	for _, s := range slices.Clone(c.streams) {
		if s.stream.syncing {
			c.dropStream(s)
		}
	}
	h := &handoff{to: to, reason: reason, sticky: sticky, started: now, deadline: now.Add(c.cfg.HandoffTimeout), done: []func(string, error){done}}
	c.handoff = h
	c.setRole(HandingOff, c.self, "handing off to "+to+": "+reason)
	// Fire due deadlines first so the successor gets the state as of now.
	c.advance(now)
	h.token = c.eng.HighWater()
	// A handoff by command pins the role on its target: nodes that were
	// running when it happened do not take it back by priority.
	c.send(target, record, proto.AppendRecord(c.buf[:0], proto.Record{Kind: proto.RecHandoff, From: to, Token: h.token, Seq: c.seq, Pinned: sticky}))
}

// handoffRecord applies an H record read on the stream from f.target:
// everything before it is applied, so the role is this node's. It
// confirms with O on the same stream and stops following.
func (c *Core) handoffRecord(now time.Time, f *follower, rec proto.Record) error {
	if tok, ok := c.cancelled[f.target]; ok && tok == rec.Token {
		// The giver asked (C) before this record was read, was told it
		// was not taken, and serves again.
		delete(c.cancelled, f.target)
		return errors.New("handoff from " + f.target + " was cancelled")
	}
	if f.syncing {
		return errors.New("handoff from " + f.target + " before the snapshot completed")
	}
	if !c.pausedSince.IsZero() {
		// This node did not run for a while: the record may be older than
		// the giver's patience (it may have given up and served again).
		// Taking it now could make two actives: the giver asks (C) and
		// hears it was not taken.
		return errors.New("handoff from " + f.target + " read after this node did not run for a while; not taken")
	}
	c.observe(now, rec.Token, f.target)
	c.takenFrom, c.takenToken = f.target, rec.Token
	c.count.HandoffsTaken++
	c.count.Promotions-- // promote counts it; it is a handoff, not a failover
	c.sticky = false
	if p := c.peerByAddr(f.target); p != nil {
		c.afterRoleMove(now, p, Standby)
	}
	target := f.target
	c.follow = nil // promote must not close the stream before O is written
	c.promote(now, "handoff from "+target)
	if rec.Pinned {
		c.pinnedAt = now
	}
	c.act(Action{Kind: ActStreamReply, Peer: target}, proto.AppendTakeover(c.buf[:0], c.self, c.eng.HighWater()))
	c.act(Action{Kind: ActFollow}, nil)
	return nil
}

// takeoverConfirmed ends a handoff: the successor serves, so this node
// redirects its waiters and held-back requests there and follows it.
func (c *Core) takeoverConfirmed(now time.Time, cn *conn, m *proto.PeerMessage) {
	h := c.handoff
	if h == nil || cn.stream == nil || cn.stream.from != h.to || h.resolving {
		return
	}
	c.observe(now, m.Token, cn.remote)
	c.handoffDone(now, h, h.reason)
}

// handoffDone ends a handoff the successor took.
func (c *Core) handoffDone(now time.Time, h *handoff, reason string) {
	c.handoff = nil
	c.keepISR(h.to)
	if c.count.HandoffsGiven == nil {
		c.count.HandoffsGiven = make(map[string]uint64)
	}
	c.count.HandoffsGiven[handoffReason(h.sticky, h.reason)]++
	gap := now.Sub(h.started)
	c.sticky = h.sticky
	if p := c.peerByAddr(h.to); p != nil {
		c.afterRoleMove(now, p, Active)
	}
	c.hint, c.hintUntil, c.hintFrom = h.to, now.Add(c.cfg.FailureTimeout), c.self
	c.settleHeld(true)
	c.setRole(Standby, h.to, "handed off: "+reason)
	c.log.Info("handoff complete", "self", c.self, "to", h.to, "reason", reason, "gap", gap.Round(time.Microsecond).String(), "sticky", h.sticky)
	c.dropWaiters(h.to)
	c.closeStreams(h.to)
	c.replayParked(now)
	if !c.leaving {
		c.ensureFollow(h.to)
	}
	for _, f := range h.done {
		f(h.to, nil)
	}
}

// handoffUnconfirmed starts settling a handoff the successor did not
// confirm: it may have taken the role (its O lost with the stream), or
// not. Serving again on a guess could leave two actives, so this node
// keeps holding lock requests back and asks the successor (C).
func (c *Core) handoffUnconfirmed(now time.Time, why string) {
	h := c.handoff
	if h == nil || h.resolving {
		return
	}
	h.resolving, h.why, h.resolveSince = true, why, now
	c.log.Warn("handoff unconfirmed: asking the successor whether it took the role", "self", c.self, "to", h.to, "why", why)
	// The stream to the successor ends here: nothing more is sent to a
	// node whose role is unknown, and a later stream starts afresh.
	for _, s := range c.streams {
		if s.stream.from == h.to {
			s.stream = nil
			c.act(Action{Kind: ActClose, Conn: s.id}, nil)
		}
	}
	c.streams = deleteNoStream(c.streams)
	c.askResolve(h)
}

func deleteNoStream(ss []*conn) []*conn {
	out := ss[:0]
	for _, s := range ss {
		if s.stream != nil {
			out = append(out, s)
		}
	}
	clear(ss[len(out):])
	return out
}

// Words of the answer to C.
const (
	wordTaken     = "taken"
	wordCancelled = "cancelled"
	// wordUnknown: the successor restarted since the handoff may have
	// begun, and cannot tell whether it took it: the giver steps back and
	// the usual rules pick the active (handoffLost).
	wordUnknown = "unknown"
)

// askResolve asks h's successor whether it took the role: "C SELF TOKEN".
func (c *Core) askResolve(h *handoff) {
	age := proto.FormatSeconds(c.lastEvent.Sub(h.started))
	h.askID = c.ask(h.to, proto.AppendFields(nil, proto.OpResolve, c.self, strconv.FormatUint(h.token, 10), age), c.cfg.FailureTimeout)
}

// resolveAnswered settles h by the successor's answer to C: taken ->
// follow it, cancelled -> serve again (it will ignore the late H record).
// A successor that cannot be asked and is gone (its port refuses, or it
// stays unreachable for the failure timeout) cannot be serving from this
// handoff, unless partitioned, which is the ordinary failover case: the
// role goes to the best live node by the usual rules. Until then, C is
// asked again every heartbeat.
func (c *Core) resolveAnswered(now time.Time, h *handoff, a proto.Answer, err error) {
	h.askID = 0
	if err == nil && (a.Kind != proto.OpResolve || len(a.Fields) != 1) {
		err = errors.New(answerText(a))
	}
	switch {
	case err == nil && a.Fields[0] == wordTaken:
		c.handoffDone(now, h, "confirmed by "+h.to+" after "+h.why)
	case err == nil && a.Fields[0] == wordCancelled:
		c.abortHandoff(now, h.why+"; "+h.to+" did not take the role")
	case err == nil && a.Fields[0] == wordUnknown:
		c.handoffLost(now, h, errors.New(h.to+" restarted and cannot tell whether it took the role"))
	case err == nil:
		// An answer this node cannot read: ask again.
	case now.Sub(h.resolveSince) >= c.cfg.FailureTimeout || errors.Is(err, ErrRefused):
		c.handoffLost(now, h, err)
	}
}

// ErrRefused is the error a shell passes to Answered when the peer's
// address refused the connection: nothing listens there.
var ErrRefused = errors.New("connection refused")

// answerResolve serves "C FROM TOKEN" from the node that handed off to
// this one: taken when this node took that handoff or serves as active
// anyway (the asker must not serve too), else cancelled, and the handoff
// record is ignored if it arrives later.
func (c *Core) answerResolve(cn *conn, m *proto.PeerMessage) {
	word := wordCancelled
	switch {
	case c.role == Active || c.role == HandingOff:
		word = wordTaken
	case c.takenFrom == m.From && c.takenToken == m.Token:
		word = wordTaken
	case m.Age > 0 && c.lastEvent.Sub(c.start) < m.Age:
		// This node has run for less than the handoff's age: it may have
		// taken it before it restarted, and cannot tell. (The age runs
		// until C was sent, this node's time until C arrived: a node
		// that ran when the handoff began counts more.)
		word = wordUnknown
	default:
		if c.cancelled == nil {
			c.cancelled = make(map[string]uint64)
		}
		c.cancelled[m.From] = m.Token
	}
	c.log.Info("handoff settled", "self", c.self, "from", m.From, "remote", cn.remote, "answer", word)
	c.sendNow(cn, record, proto.AppendFields(c.buf[:0], proto.OpResolve, m.From, word))
}

// abortHandoff takes the role back after a handoff the successor is known
// not to have taken, and serves the held-back requests here.
func (c *Core) abortHandoff(now time.Time, why string) {
	h := c.handoff
	if h == nil {
		return
	}
	for _, p := range c.peers {
		if p.alive(now, c.cfg.FailureTimeout) && p.role == string(Active) && !p.paused {
			// The role moved on meanwhile (this node did not run, say):
			// serving again would make two actives.
			c.handoffLost(now, h, errors.New(p.addr+" is active"))
			return
		}
	}
	c.handoff = nil
	c.count.HandoffsFailed++
	c.log.Warn("handoff aborted", "self", c.self, "to", h.to, "why", why)
	if c.leaving {
		// Shutting down: serving again only to exit would grant locks
		// that no standby has, under tokens a successor may not exceed.
		c.settleHeld(false)
		c.setRole(Standby, "", "handoff aborted while shutting down: "+why)
		c.dropWaiters(c.redirectTarget(now))
		c.replayParked(now)
		for _, f := range h.done {
			f("", errors.New("handoff to "+h.to+" failed: "+why))
		}
		return
	}
	c.eng.Succeed(now)
	c.setRole(Active, c.self, "handoff aborted: "+why)
	c.replayParked(now)
	for _, f := range h.done {
		f("", errors.New("handoff to "+h.to+" failed: "+why+"; "+c.self+" is still active"))
	}
}

// handoffLost ends a handoff whose successor cannot be asked: it is down.
// Nobody serves from this node's state now, so it steps back like any
// standby that lost its active, and the usual rules pick the next active
// (this node, most likely, with a new token epoch).
func (c *Core) handoffLost(now time.Time, h *handoff, err error) {
	c.handoff = nil
	c.count.HandoffsFailed++
	why := h.why + "; " + h.to + " cannot be reached"
	if err != nil {
		why += " (" + err.Error() + ")"
	}
	c.log.Warn("handoff failed", "self", c.self, "to", h.to, "why", why)
	c.settleHeld(false)
	c.setRole(Standby, "", "handoff failed: "+why)
	c.dropWaiters(c.redirectTarget(now))
	c.replayParked(now)
	for _, f := range h.done {
		f("", errors.New("handoff to "+h.to+" failed: "+why+"; the cluster elects the next active by priority"))
	}
	c.supervise(now)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// answerText is an answer as a person reads it.
func answerText(a proto.Answer) string {
	return strings.TrimSpace(string(a.Kind) + " " + a.Key + " " + strings.Join(a.Fields, " "))
}
