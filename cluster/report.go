package cluster

import (
	"slices"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/engine"
)

// Metrics is what a node counts and knows, for an operator: one
// consistent reading, taken under one hold of the node mutex.
type Metrics struct {
	Self     string
	Counters core.Counters
	Health   Health
	Peers    []PeerMetrics // the other nodes, in priority order

	HeldLocks   int    // keys held
	Keys        int    // keys held or waited on
	Waiters     int    // acquires queued
	TokenEpoch  uint64 // the highest token this node knows of >> engine.CounterBits: Unix milliseconds
	Seq         uint64 // replication position: state changes applied
	ConnsOpen   int
	ConnsTotal  uint64 // accepted since start
	OutputBytes int64  // answers queued and not yet written, every connection
	// NoActive is how long this node has now been without an active it
	// can reach (0 while it knows one); NoActiveTotal adds every earlier
	// stretch.
	NoActive      time.Duration
	NoActiveTotal time.Duration

	Requests        []RequestCount
	RequestDuration Histogram
	AcquireWait     Histogram
	Limits          map[string]uint64 // hits, by LimitNames
}

// PeerMetrics is another node as this one sees it.
type PeerMetrics struct {
	Addr      string
	Role      string // as it last said; "down" when not reachable
	Reachable bool
	// Replication lag, known on the active for each reachable standby:
	// the records the standby is behind, as of its last heartbeat answer,
	// and how long ago the active first held the oldest of them (an upper
	// bound within a heartbeat; see seqRing.age). HasLag is false
	// elsewhere.
	HasLag     bool
	LagRecords uint64
	LagSeconds float64
}

// RequestCount is how many client requests of one op had one outcome.
type RequestCount struct {
	Op, Outcome string
	N           uint64
}

// Histogram is a histogram as Prometheus exposes it.
type Histogram struct {
	Bounds []float64 // upper bounds, seconds
	Counts []uint64  // observations at or below each bound (cumulative)
	Count  uint64    // every observation
	Sum    float64   // their sum, seconds
}

// Metrics reads everything this node counts, under one hold of its
// mutex (and of applyMu, for the answers counted): a scrape costs the
// clients one short wait, whatever it reads.
func (n *Node) Metrics() Metrics {
	m := Metrics{Self: n.self, Limits: make(map[string]uint64, numLimits)}
	for i, name := range LimitNames {
		m.Limits[name] = n.limits[i].Load()
	}
	m.OutputBytes = n.output.bytes.Load()
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	m.Counters = n.core.Counters()
	st := n.core.Status(now)
	m.Health = n.healthLocked(now, st)
	m.Keys, m.Waiters = st.Keys, st.Waiters
	m.HeldLocks = n.core.Engine().Held()
	m.TokenEpoch = st.Token >> engine.CounterBits
	m.Seq = st.Seq
	m.ConnsOpen = len(n.conns)
	m.ConnsTotal = n.nextConnID
	m.NoActiveTotal = m.Counters.NoActiveTotal
	if since := m.Counters.NoActiveSince; !since.IsZero() {
		m.NoActive = now.Sub(since)
		m.NoActiveTotal += m.NoActive
	}
	active := m.Health.Role == Active
	n.sampleSeqLocked(now)
	for _, p := range st.Peers {
		if p.Addr == n.self {
			continue
		}
		pm := PeerMetrics{Addr: p.Addr, Role: p.Role, Reachable: p.Reachable}
		if active && p.Reachable && p.Role != string(Active) {
			pm.HasLag, pm.LagRecords = true, p.Lag
			if age, ok := n.seqs.age(now, p.Seq, st.Seq); ok {
				pm.LagSeconds = age.Seconds()
			}
		}
		m.Peers = append(m.Peers, pm)
	}
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	// A copy: the cancelled are the core's count, added anew each time.
	requests := slices.Clone(n.stats.requests)
	for i, op := range countedOps {
		requests[i][outCancelled] += m.Counters.Cancelled[op-'A']
	}
	for i := range requests {
		for j, v := range requests[i] {
			if v > 0 {
				m.Requests = append(m.Requests, RequestCount{Op: opNames[i], Outcome: outcomeNames[j], N: v})
			}
		}
	}
	m.RequestDuration = n.stats.latency.export()
	n.stats.wait.add(0, n.stats.atOnce)
	n.stats.atOnce = 0
	m.AcquireWait = n.stats.wait.export()
	return m
}
