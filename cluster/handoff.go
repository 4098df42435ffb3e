package cluster

import (
	"errors"
	"strconv"
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
	started time.Time
	timer   *time.Timer
	done    []func(newActive string, err error)
}

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
	tok := strconv.FormatUint(n.eng.HighWater(), 10)
	seq := strconv.FormatUint(n.seq, 10)
	fields := []string{tok, seq}
	if sticky {
		// A handoff by command pins the role on its target: nodes that
		// were running when it happened do not take it back by priority.
		fields = append(fields, pinWord)
	}
	stream.send(func(b []byte) []byte { return proto.AppendFields(b, proto.RecHandoff, to, fields...) })
	h.timer = time.AfterFunc(handoffTimeout, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.handoff == h {
			n.abortHandoffLocked("the successor " + to + " did not confirm within " + handoffTimeout.String())
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
	h.timer.Stop()
	n.handoff = nil
	gap := n.now().Sub(h.started)
	n.eng.Observe(n.now(), req.Token)
	n.sticky = h.sticky
	now := n.now()
	if p := n.peerByAddr(h.to); p != nil {
		n.afterRoleMove(p, Active, now)
	}
	n.hint, n.hintUntil = h.to, now.Add(n.cfg.FailureTimeout)
	n.setRoleLocked(Standby, h.to, "handed off: "+h.reason)
	n.log.Info("handoff complete", "self", n.self, "to", h.to, "reason", h.reason, "gap", gap.Round(time.Microsecond).String(), "sticky", h.sticky)
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

// abortHandoffLocked takes the role back after a failed handoff and
// serves the held-back requests here.
func (n *Node) abortHandoffLocked(why string) {
	h := n.handoff
	if h == nil {
		return
	}
	h.timer.Stop()
	n.handoff = nil
	n.log.Warn("handoff aborted", "self", n.self, "to", h.to, "why", why)
	// The successor may have promoted anyway: a later token epoch keeps
	// every token issued here above its tokens once their heartbeats
	// meet, and the demotion rule settles who stays active.
	n.eng.Succeed(n.now())
	n.setRoleLocked(Active, n.self, "handoff aborted: "+why)
	n.replayParkedLocked()
	for _, f := range h.done {
		f("", errors.New("handoff to "+h.to+" failed: "+why+"; "+n.self+" is still active"))
	}
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
