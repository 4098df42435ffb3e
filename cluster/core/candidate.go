package core

import (
	"slices"
	"time"
)

// Who takes the role when no node holds it.

// candidate is the node that should be active when none is: among the
// live nodes, the first in priority order of the best tier (in sync with
// the last active and synced; synced; any). A node that gave the role up
// by command (sticky) is as good a successor as any: sticky is about
// taking the role back by priority (maybeTakeBack), not about who
// replaces a node that failed.
func (c *Core) candidate(now time.Time) string {
	cs := c.candidates(now)
	if !slices.ContainsFunc(cs, func(x cand) bool { return x.inSync && x.synced }) {
		// No standby holds every answer of the last active, and a node
		// restored from its data directory is among the candidates (a
		// restart of the whole cluster, or of a node while no active
		// runs): the most recent state serves first, whatever the
		// priority, so that no state a client was told of is replaced
		// by an older one (disk.go).
		if addr, ok := newestRestored(cs); ok {
			return addr
		}
	}
	if !c.deferSince.IsZero() && (now.Sub(c.deferSince) >= c.cfg.FailureTimeout || c.peersSettled(now)) {
		// The candidate this node left the role to has not taken it: the
		// standbys may disagree on which of them the last active waited
		// for (each heard its last heartbeat at another moment), or on
		// their positions (each knows another's as of its last answer),
		// each leaving the role to another. Once every live peer has
		// answered a heartbeat sent since this node began to wait, with
		// no active to apply from, the positions are final and known
		// alike to all of them; a failure timeout later, they are
		// anyway. The synced standby that applied the most goes first,
		// so the new active holds every answer any of them acknowledged.
		if addr, ok := mostApplied(cs); ok {
			return addr
		}
	}
	// This node knows its own position exactly, a peer's as of its last
	// answer: a live synced peer ahead of this node is ahead (a standby
	// that did not run for a while still counts itself in sync). This
	// node then leaves the role to the peers ahead of it, whatever its
	// priority, and ranks those by priority alone, as what it knows of
	// their positions may be a heartbeat old.
	// A peer ahead may not know it is, and leave the role to this node:
	// see peersSettled above.
	ahead := func(x cand) bool { return x.synced && x.seq > c.seq }
	behind := slices.ContainsFunc(cs[1:], ahead)
	tiers := []func(cand) bool{
		// Synchronous replication: a standby that acknowledged every
		// answer the active gave holds them all; it goes first.
		func(x cand) bool { return x.inSync && x.synced },
		func(x cand) bool { return x.synced },
		func(x cand) bool { return true },
	}
	for _, ok := range tiers {
		best := cand{idx: -1}
		for _, x := range cs {
			if ok(x) && (!behind || ahead(x)) && (best.idx < 0 || x.idx < best.idx) {
				best = x
			}
		}
		if best.idx >= 0 {
			return best.addr
		}
	}
	return c.self
}

// cand is a node that may take the role, as candidate weighs it.
type cand struct {
	addr   string
	idx    int
	synced bool
	inSync bool // the last active waited for its acknowledgements
	state  stateAge
	seq    uint64 // the records it has applied
}

// candidates are this node and the live peers.
func (c *Core) candidates(now time.Time) []cand {
	isr := func(addr string) bool { return slices.Contains(c.activeISR, addr) }
	selfInSync := isr(c.self) && c.synced
	cs := []cand{{c.self, c.selfIdx, c.synced, selfInSync, c.stateAge(), c.seq}}
	for _, p := range c.peers {
		if p.alive(now, c.cfg.FailureTimeout) {
			// A synced standby whose position is at least this node's,
			// which the last active waited for, holds every answer that
			// active gave too: as good as one it waited for. (The last
			// heartbeats of the active may have told the standbys
			// different lists; this keeps two of them from each taking
			// the role as the only one in sync.)
			inSync := isr(p.addr) || selfInSync && p.synced && p.seq >= c.seq
			cs = append(cs, cand{p.addr, p.idx, p.synced, inSync, stateAge{p.restored, p.top, p.seq}, p.seq})
		}
	}
	return cs
}

// peersSettled reports whether every live peer answered a heartbeat this
// node sent since it began to wait (deferRound) with no active to follow:
// their positions are final, and each of them knows this node's.
func (c *Core) peersSettled(now time.Time) bool {
	live := 0
	for _, p := range c.peers {
		if !p.alive(now, c.cfg.FailureTimeout) {
			continue
		}
		if p.version < 2 || p.round < c.deferRound || p.active != "" || p.role == string(Active) {
			return false
		}
		live++
	}
	return live > 0
}

// newestRestored is the synced candidate with the newest state (the
// first in priority among equals), when a candidate was restored from
// its data directory.
func newestRestored(cs []cand) (string, bool) {
	if !slices.ContainsFunc(cs, func(x cand) bool { return x.state.restored }) {
		return "", false
	}
	best := -1
	for i, x := range cs {
		if x.synced && (best < 0 || x.state.newer(cs[best].state) || !cs[best].state.newer(x.state) && x.idx < cs[best].idx) {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	return cs[best].addr, true
}

// mostApplied is the synced candidate that applied the most records (the
// first in priority among equals).
func mostApplied(cs []cand) (string, bool) {
	best := cand{idx: -1}
	for _, x := range cs {
		if x.synced && (best.idx < 0 || x.seq > best.seq || x.seq == best.seq && x.idx < best.idx) {
			best = x
		}
	}
	return best.addr, best.idx >= 0
}
