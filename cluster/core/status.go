package core

import (
	"slices"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// Self is this node's address as written in --peers.
func (c *Core) Self() string { return c.self }

// Config is the configuration the core runs with, defaults filled in.
func (c *Core) Config() Config { return c.cfg }

// Role is this node's role now.
func (c *Core) Role() Role { return c.role }

// Active is the address of the active this node knows of, "" when none.
func (c *Core) Active() string { return c.active }

// Synced reports whether this node holds the cluster's state: it synced
// from an active, or was active, since it started.
func (c *Core) Synced() bool { return c.synced }

// Seq is the number of state changes this node has applied.
func (c *Core) Seq() uint64 { return c.seq }

// HighWater is the highest token this node knows of.
func (c *Core) HighWater() uint64 { return c.eng.HighWater() }

// Engine is the lock state machine this core drives, for reads (tests,
// listings). Changing it from outside breaks replication.
func (c *Core) Engine() *engine.Engine { return c.eng }

// Peers lists the other nodes, in priority order.
func (c *Core) Peers() []string {
	out := make([]string, len(c.peers))
	for i, p := range c.peers {
		out[i] = p.addr
	}
	return out
}

// PausedAt reports whether this node is paused at now: it found, or
// will find at its next event, that it did not run for a failure timeout
// less a heartbeat (see noteTime), and has not heard its peers since.
// The probes and metrics ask between events; S asks after noteTime ran.
func (c *Core) PausedAt(now time.Time) bool {
	return !c.pausedSince.IsZero() || c.didNotRun(now)
}

// shown is the role and active this node reports: while paused it
// serves nothing and does not know who is active (another node may have
// taken over while it did not run), so it says joining, active unknown,
// rather than repeat the role it had when it stopped.
func (c *Core) shown(now time.Time) (Role, string) {
	if c.PausedAt(now) {
		return Joining, ""
	}
	return c.role, c.active
}

// Status is this node's view of itself and of the cluster, as S answers.
func (c *Core) Status(now time.Time) proto.Status {
	role, active := c.shown(now)
	keys, waiters := c.eng.Stats()
	if c.role != Active {
		// A standby's queues are the places it keeps for the active's
		// waiters (J records): what it would queue if it took the role.
		waiters = len(c.rwaitKey)
	}
	st := proto.Status{
		Self:    c.self,
		Role:    string(role),
		Active:  active,
		Token:   c.eng.HighWater(),
		Seq:     c.seq,
		Uptime:  now.Sub(c.start),
		Keys:    keys,
		Waiters: waiters,
		Sticky:  c.sticky,
		// Degraded is an active's word: a standby waits for nothing.
		Replication: map[bool]string{true: "async", false: "sync"}[c.cfg.Async],
		Degraded:    c.degraded && role == Active,
		Durability:  c.Durability(),
		Changes:     slices.Clone(c.changes),
	}
	head := c.seq
	if c.role != Active {
		head = max(c.activeSeq, c.seq)
	}
	all := make([]proto.PeerStatus, 0, len(c.peers)+1)
	selfStatus := proto.PeerStatus{Addr: c.self, Role: string(role), Reachable: true, Seq: c.seq, Lag: head - c.seq, Token: c.eng.HighWater()}
	inserted := false
	for _, p := range c.peers {
		if !inserted && p.idx > c.selfIdx {
			all = append(all, selfStatus)
			inserted = true
		}
		ps := proto.PeerStatus{Addr: p.addr, Role: p.role, Reachable: p.alive(now, c.cfg.FailureTimeout), Seq: p.seq, Token: p.token}
		if !ps.Reachable {
			ps.Role = "down"
		} else if head > p.seq && p.role != string(Active) {
			ps.Lag = head - p.seq
		}
		if ps.Role == "" {
			ps.Role = "unknown"
		}
		all = append(all, ps)
	}
	if !inserted {
		all = append(all, selfStatus)
	}
	st.Peers = all
	return st
}

// redirectTarget is where a client should go: the active, or while none
// is known, the node expected to become active.
func (c *Core) redirectTarget(now time.Time) string {
	if c.active != "" {
		return c.active
	}
	if cand := c.candidate(now); cand != "" {
		return cand
	}
	return c.self
}
