package cluster

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// handoff is a transfer of the active role in flight: the successor has
// been told (an H record at the end of its stream) and this node waits
// for its confirmation (O) before redirecting everyone there.
type handoff struct {
	to      string
	reason  string
	sticky  bool
	token   uint64 // the high-water mark in the H record: names this handoff
	started time.Time
	timer   *time.Timer
	done    []func(newActive string, err error)
	// resolving: the successor did not confirm in time, or its stream
	// closed. It may have taken the role all the same, so this node
	// serves nothing until the successor says whether it did (C).
	resolving bool
	why       string
}

// maxParked bounds the lock requests held back during a handoff; later
// ones are redirected to the successor at once.
const maxParked = 100_000

// handleHandoffRequest serves "H label [addr]": a command (sticky) or a
// peer's take-back (label takeback, not sticky).
func (n *Node) handleHandoffRequest(c *conn, req proto.Request) {
	label := req.Key
	answer := func(newActive string, err error) {
		if err != nil {
			c.send(func(b []byte) []byte { return proto.AppendError(b, label, proto.OpHandoff, err.Error()) })
			return
		}
		c.send(func(b []byte) []byte { return proto.AppendFields(b, proto.OpHandoff, label, proto.WordOK, newActive) })
	}
	switch n.role {
	case HandingOff:
		if n.handoff.resolving {
			answer("", errors.New("a handoff to "+n.handoff.to+" is being settled; retry in a moment"))
			return
		}
		if req.Addr == "" || req.Addr == n.handoff.to {
			n.handoff.done = append(n.handoff.done, answer)
			return
		}
		answer("", errors.New("a handoff to "+n.handoff.to+" is already in progress; retry when it ends"))
		return
	case Active:
	default:
		c.send(func(b []byte) []byte { return proto.AppendMoved(b, label, n.redirectTarget()) })
		return
	}
	sticky := label != takebackLabel
	reason := "requested by " + c.remote
	if !sticky {
		reason = "take-back by " + req.Addr
	}
	if err := n.startHandoffLocked(req.Addr, reason, sticky, answer); err != nil {
		answer("", err)
	}
}

// startHandoffLocked hands the active role to `to`, or to the caught-up
// standby of highest priority when to is "". done is called with the
// outcome.
func (n *Node) startHandoffLocked(to, reason string, sticky bool, done func(string, error)) error {
	if n.role != Active {
		return errors.New("this node is not active")
	}
	var stream *conn
	for _, c := range n.streams {
		if c.syncing {
			continue
		}
		if to != "" {
			if c.subFrom == to {
				stream = c
				break
			}
			continue
		}
		if stream == nil || n.priorityOf(c.subFrom) < n.priorityOf(stream.subFrom) {
			stream = c
		}
	}
	if stream == nil {
		if to == n.self {
			return errors.New(to + " is already active")
		}
		if to != "" {
			return errors.New(to + " is not a caught-up standby of this node (not in --peers, down, or not synced yet); check lockctl status")
		}
		return errors.New("no standby is caught up to take the role; start one or check lockctl status")
	}
	to = stream.subFrom
	now := n.now()
	h := &handoff{to: to, reason: reason, sticky: sticky, started: now, done: []func(string, error){done}}
	n.handoff = h
	n.setRoleLocked(HandingOff, n.self, "handing off to "+to+": "+reason)
	// Fire due deadlines first so the successor gets the state as of now.
	n.advanceLocked(now)
	h.token = n.eng.HighWater()
	// A handoff by command pins the role on its target: nodes that were
	// running when it happened do not take it back by priority.
	rec := proto.Record{Kind: proto.RecHandoff, From: to, Token: h.token, Seq: n.seq, Pinned: sticky}
	stream.send(func(b []byte) []byte { return proto.AppendRecord(b, rec) })
	h.timer = time.AfterFunc(handoffTimeout, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.handoff == h {
			n.handoffUnconfirmedLocked("the successor " + to + " did not confirm within " + handoffTimeout.String())
		}
	})
	return nil
}

// takeoverConfirmed ends a handoff: the successor serves, so this node
// redirects its waiters and held-back requests there and follows it.
func (n *Node) takeoverConfirmed(c *conn, req proto.Request) {
	h := n.handoff
	if h == nil || !c.sub || c.subFrom != h.to {
		return
	}
	n.observe(req.Token, c.remote)
	n.handoffDoneLocked(h, h.reason)
}

// handoffDoneLocked ends a handoff the successor took.
func (n *Node) handoffDoneLocked(h *handoff, reason string) {
	h.timer.Stop()
	n.handoff = nil
	now := n.now()
	gap := now.Sub(h.started)
	n.sticky = h.sticky
	if p := n.peerByAddr(h.to); p != nil {
		n.afterRoleMove(p, Active, now)
	}
	n.hint, n.hintUntil = h.to, now.Add(n.cfg.FailureTimeout)
	n.setRoleLocked(Standby, h.to, "handed off: "+reason)
	n.log.Info("handoff complete", "self", n.self, "to", h.to, "reason", reason, "gap", gap.Round(time.Microsecond).String(), "sticky", h.sticky)
	n.dropWaitersLocked(h.to)
	n.closeStreamsLocked(h.to)
	n.replayParkedLocked()
	if !n.leaving {
		n.ensureFollowLocked(h.to)
	}
	for _, f := range h.done {
		f(h.to, nil)
	}
}

// handoffUnconfirmedLocked starts settling a handoff the successor did
// not confirm: it may have taken the role (its O lost with the stream), or
// not. Serving again on a guess could leave two actives, so this node
// keeps holding lock requests back and asks the successor (resolveLoop).
func (n *Node) handoffUnconfirmedLocked(why string) {
	h := n.handoff
	if h == nil || h.resolving {
		return
	}
	h.timer.Stop()
	h.resolving, h.why = true, why
	n.log.Warn("handoff unconfirmed: asking the successor whether it took the role", "self", n.self, "to", h.to, "why", why)
	// The stream to the successor ends here: nothing more is sent to a
	// node whose role is unknown, and a later stream starts afresh.
	for _, c := range n.streams {
		if c.subFrom == h.to {
			c.sub = false
			c.flushAndClose()
		}
	}
	n.streams = slices.DeleteFunc(n.streams, func(c *conn) bool { return c.subFrom == h.to })
	n.wg.Add(1)
	go n.resolveLoop(h)
}

// resolveLoop asks the successor of h, every heartbeat, whether it took
// the role: "C SELF TOKEN" answered "taken" (it is active: follow it) or
// "cancelled" (it is not, and will ignore the handoff record if it still
// reads it: serve again). A successor that is gone (its port refuses, or
// it stays silent for the failure timeout) cannot be serving from this
// handoff... unless partitioned, which is the ordinary failover case: the
// role goes to the best live node by the usual rules.
func (n *Node) resolveLoop(h *handoff) {
	defer n.wg.Done()
	start := time.Now()
	for {
		answer, err := n.askResolve(h)
		n.mu.Lock()
		if n.handoff != h {
			n.mu.Unlock()
			return
		}
		switch {
		case err == nil && answer == wordTaken:
			n.handoffDoneLocked(h, "confirmed by "+h.to+" after "+h.why)
			n.mu.Unlock()
			return
		case err == nil && answer == wordCancelled:
			n.abortHandoffLocked(h.why + "; " + h.to + " did not take the role")
			n.mu.Unlock()
			return
		case time.Since(start) >= n.cfg.FailureTimeout || errors.Is(err, syscall.ECONNREFUSED):
			n.handoffLostLocked(h, err)
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		if !sleepCtx(n.ctx, n.cfg.Heartbeat) {
			return
		}
	}
}

// Words of the answer to C.
const (
	wordTaken     = "taken"
	wordCancelled = "cancelled"
)

// askResolve sends C to h's successor and returns its answer word.
func (n *Node) askResolve(h *handoff) (string, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.FailureTimeout)
	defer cancel()
	nc, r, err := n.dialPeer(ctx, h.to)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	dl, _ := ctx.Deadline()
	nc.SetDeadline(dl)
	if _, err := nc.Write(proto.AppendFields(nil, proto.OpResolve, n.self, strconv.FormatUint(h.token, 10))); err != nil {
		return "", err
	}
	line, err := r.ReadSlice('\n')
	if err != nil {
		return "", err
	}
	a, err := proto.ParseAnswer(line)
	if err != nil {
		return "", err
	}
	if a.Kind != proto.OpResolve || len(a.Fields) != 1 {
		return "", errors.New(strings.TrimSpace(string(line)))
	}
	return a.Fields[0], nil
}

// answerResolve serves "C FROM TOKEN" from the node that handed off to
// this one: taken when this node took that handoff or serves as active
// anyway (the asker must not serve too), else cancelled, and the handoff
// record is ignored if it arrives later.
func (n *Node) answerResolve(c *conn, req proto.Request) {
	word := wordCancelled
	switch {
	case n.role == Active || n.role == HandingOff:
		word = wordTaken
	case n.takenFrom == req.Key && n.takenToken == req.Token:
		word = wordTaken
	default:
		if n.cancelled == nil {
			n.cancelled = make(map[string]uint64)
		}
		n.cancelled[req.Key] = req.Token
	}
	n.log.Info("handoff settled", "self", n.self, "from", req.Key, "remote", c.remote, "answer", word)
	c.send(func(b []byte) []byte { return proto.AppendFields(b, proto.OpResolve, req.Key, word) })
}

// abortHandoffLocked takes the role back after a handoff the successor is
// known not to have taken, and serves the held-back requests here.
func (n *Node) abortHandoffLocked(why string) {
	h := n.handoff
	if h == nil {
		return
	}
	h.timer.Stop()
	n.handoff = nil
	n.log.Warn("handoff aborted", "self", n.self, "to", h.to, "why", why)
	n.eng.Succeed(n.now())
	n.setRoleLocked(Active, n.self, "handoff aborted: "+why)
	n.replayParkedLocked()
	for _, f := range h.done {
		f("", errors.New("handoff to "+h.to+" failed: "+why+"; "+n.self+" is still active"))
	}
}

// handoffLostLocked ends a handoff whose successor cannot be asked: it is
// down. Nobody serves from this node's state now, so it steps back like
// any standby that lost its active, and the usual rules pick the next
// active (this node, most likely, with a new token epoch).
func (n *Node) handoffLostLocked(h *handoff, err error) {
	h.timer.Stop()
	n.handoff = nil
	why := h.why + "; " + h.to + " cannot be reached"
	if err != nil {
		why += " (" + shortErr(err) + ")"
	}
	n.log.Warn("handoff failed", "self", n.self, "to", h.to, "why", why)
	n.setRoleLocked(Standby, "", "handoff failed: "+why)
	n.dropWaitersLocked(n.redirectTarget())
	n.replayParkedLocked()
	for _, f := range h.done {
		f("", errors.New("handoff to "+h.to+" failed: "+why+"; the cluster elects the next active by priority"))
	}
	n.kickSupervisor()
}

func (n *Node) replayParkedLocked() {
	parked := n.parked
	n.parked = nil
	now := n.now()
	for _, p := range parked {
		if !p.c.gone {
			n.handle(p.c, now, p.req)
		}
	}
	n.armTimerLocked()
}
