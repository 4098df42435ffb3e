package core

import "time"

// Counters are what this node counts for an operator (metrics): events
// since it started. The shell reads them with Counters under the same
// mutex as every other call; the core only adds to plain fields, so
// counting costs the hot path nothing but an increment.
type Counters struct {
	Grants          uint64 // locks granted (at once or to a waiter)
	Releases        uint64 // R answered ok
	ReleasesNotHeld uint64 // R answered notheld
	Renewals        uint64 // N answered ok
	Expiries        uint64 // leases that ran out
	Timeouts        uint64 // waits that ended without a grant (T)
	Redirects       uint64 // requests answered M: this node is not active
	Refusals        uint64 // requests answered E by the core (limits, grammar)
	Withdrawals     uint64 // waiters withdrawn by X
	// Cancelled counts the client requests left unanswered as their
	// connection closed (waiting acquires, key listings, requests held
	// back during a handoff), by op: Cancelled[op-'A'].
	Cancelled [26]uint64

	Promotions uint64 // became active without a handoff (failover, start)
	Demotions  uint64 // stepped down for another active
	// Handoffs this node gave away, by reason: command (lockctl
	// handoff), shutdown (SIGINT, SIGTERM), takeback (a higher-priority
	// node took its role back); and those it took, and those that failed.
	HandoffsGiven  map[string]uint64
	HandoffsTaken  uint64
	HandoffsFailed uint64

	SnapshotsSent    uint64        // snapshots sent to standbys
	SnapshotDuration time.Duration // their total time, from subscribe to synced
	Pauses           uint64        // times this node found it had not run for a failure timeout

	// NoActiveSince is when this node last found no active it could
	// reach (zero while one is known), and NoActiveTotal the time it has
	// spent so in all, up to then.
	NoActiveSince time.Time
	NoActiveTotal time.Duration
}

// Counters returns a copy of what this node has counted.
func (c *Core) Counters() Counters {
	k := c.count
	k.HandoffsGiven = make(map[string]uint64, len(c.count.HandoffsGiven))
	for r, v := range c.count.HandoffsGiven {
		k.HandoffsGiven[r] = v
	}
	return k
}

// noteActive records whether an active is known, for NoActiveSince.
func (c *Core) noteActive(now time.Time) {
	none := c.active == "" || c.role == HandingOff
	switch {
	case none && c.count.NoActiveSince.IsZero():
		c.count.NoActiveSince = now
	case !none && !c.count.NoActiveSince.IsZero():
		c.count.NoActiveTotal += now.Sub(c.count.NoActiveSince)
		c.count.NoActiveSince = time.Time{}
	}
}

// handoffReason is the metric label of a handoff's reason.
func handoffReason(sticky bool, reason string) string {
	switch {
	case reason == "shutdown":
		return "shutdown"
	case !sticky:
		return "takeback"
	}
	return "command"
}

// Following reports the replication stream this node follows: its
// target ("" when none) and whether it is live (the snapshot applied and
// the stream running). For readiness probes.
func (c *Core) Following() (target string, live bool) {
	if c.follow == nil {
		return "", false
	}
	return c.follow.target, c.follow.live
}

// Paused reports whether this node is paused after it found it had not
// run for a failure timeout: it decides nothing until it hears its peers.
func (c *Core) Paused() bool { return !c.pausedSince.IsZero() }

// Leaving reports whether this node is shutting down.
func (c *Core) Leaving() bool { return c.leaving }
