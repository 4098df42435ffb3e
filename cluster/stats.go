package cluster

import (
	"sync/atomic"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
)

// What the shell counts for an operator, beyond what package core
// counts: the answers it carries to clients (requests by op and outcome,
// how long they took, how long acquires waited), connections, the limits
// it enforces, and how far behind each standby is in time. Answers are
// counted as the Ready that holds them is carried out, under applyMu
// (carry.go); the limits with atomics. Node.Metrics reads it, with the
// core's Counters and Status, under one hold of both locks.
//
// Every answer comes from the core as a core.Send that names the op and
// key of the request it answers, its outcome, the limit a refusal hit,
// and how long the request waited for it (or that the event that took
// the request up answered it): the shell never reads the answer's
// bytes, and keeps no record of the requests not answered yet.

// The client requests counted, by op, in the order of proto's table;
// their labels are proto's names for them, and one more label counts
// lines that were no request.
var countedOps = func() (ops []proto.Op) {
	for _, op := range proto.Ops() {
		if op.Class() == proto.ClassClient {
			ops = append(ops, op)
		}
	}
	return ops
}()

// Labels of the requests by op and outcome.
var (
	opNames = func() []string {
		n := make([]string, 0, len(countedOps)+1)
		for _, op := range countedOps {
			n = append(n, op.Name())
		}
		return append(n, "invalid")
	}()
	outcomeNames = [...]string{"granted", "timeout", "ok", "notheld", "moved", "error", "cancelled"}
)

var numOps = len(opNames)

const numOutcomes = len(outcomeNames)

// Outcomes, indexes of outcomeNames.
const (
	outGranted = iota
	outTimeout
	outOK
	outNotHeld
	outMoved
	outError
	outCancelled
)

// opIndex maps an op letter to its index in opNames, or -1 for a peer
// message (heartbeats, replication), which is not a client request.
var opIndex = func() (t [256]int8) {
	for i := range t {
		t[i] = int8(numOps - 1) // invalid: no request, or an unknown op
	}
	for i, op := range countedOps {
		t[op] = int8(i)
	}
	for _, op := range proto.Ops() {
		if op.Class() == proto.ClassPeer {
			t[op] = -1
		}
	}
	return t
}()

// Limits, the labels of the limits-hit counter.
var LimitNames = [...]string{
	"max_keys",          // --max-keys: an acquire of a new key refused
	"max_waiters",       // --max-waiters: an acquire refused, its key's queue full
	"max_total_waiters", // --max-total-waiters
	"max_conn_waiters",  // waiting acquires of one connection (core.MaxConnWaiters)
	"max_conns",         // --max-conns: a connection refused, or one not authenticated closed to make room
	"max_conns_per_ip",  // --max-conns-per-ip
	"max_conn_output",   // --max-conn-output: a client that did not read its answers disconnected
	"max_output",        // --max-output
	"stream_buffer",     // a standby's replication stream too far behind, dropped
	"line_length",       // a request line longer than proto.MaxLineLen
	"line_timeout",      // --line-timeout
	"auth_timeout",      // --auth-timeout
}

const (
	limMaxKeys = iota
	limMaxWaiters
	limMaxTotalWaiters
	limMaxConnWaiters
	limMaxConns
	limMaxConnsPerIP
	limMaxConnOutput
	limMaxOutput
	limStreamBuffer
	limLineLength
	limLineTimeout
	limAuthTimeout
	numLimits
)

// Buckets of the histograms, upper bounds.
var (
	// requestDurationBounds: from reading a request to queueing its answer.
	requestDurationBounds = []time.Duration{
		25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second,
	}
	// acquireWaitBounds: from taking an acquire up to granting it.
	acquireWaitBounds = []time.Duration{
		time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
		5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute,
	}
)

// timedBatches: one batch of requests in timedBatches read on a
// connection is timed for the request duration, the first one included.
// Reading the clock twice per batch would cost a client that sends one
// request at a time a few percent of the node's time per request.
const timedBatches = 8

// shellStats is what the shell counts of answers. Guarded by
// Node.applyMu.
type shellStats struct {
	requests [][numOutcomes]uint64 // by opIndex
	latency  histogram
	wait     histogram
	atOnce   uint64 // acquires granted at once: waits of 0, not yet in wait
}

func (s *shellStats) init() {
	s.requests = make([][numOutcomes]uint64, numOps)
	s.latency.init(requestDurationBounds)
	s.wait.init(acquireWaitBounds)
}

// countAnswer counts s, an answer about to be written to c, under the op
// and outcome of the request it answers, as the core says them, with how
// long it waited; the limit a refused acquire hit is counted too.
// applyMu is held.
func (n *Node) countAnswer(c *conn, s *core.Send, k *carry) {
	if s.Outcome == core.NoOutcome || c.peer.Load() {
		return
	}
	st := &n.stats
	outcome := outcomeOf[s.Outcome]
	op := s.Op
	switch {
	case s.AtOnce:
		if c == k.by {
			k.atOnce++
		}
		if outcome == outGranted {
			st.atOnce++
		}
	case outcome == outGranted:
		st.wait.add(s.Waited, 1)
	case op != proto.OpAcquire:
		st.latency.add(s.Waited, 1)
	}
	if i := opIndex[op]; i >= 0 {
		st.requests[i][outcome]++
	}
	if s.Limit != core.NoLimit {
		n.limitHit(limitOf[s.Limit])
	}
}

// outcomeOf maps the core's outcomes to indexes of outcomeNames.
var outcomeOf = [...]int{
	core.NoOutcome: outOK,
	core.Granted:   outGranted,
	core.TimedOut:  outTimeout,
	core.OK:        outOK,
	core.NotHeld:   outNotHeld,
	core.Moved:     outMoved,
	core.Refused:   outError,
}

// limitOf maps the limits the core names to indexes of LimitNames.
var limitOf = [...]int{
	core.LimitKeys:         limMaxKeys,
	core.LimitWaiters:      limMaxWaiters,
	core.LimitTotalWaiters: limMaxTotalWaiters,
	core.LimitConnWaiters:  limMaxConnWaiters,
}

// countAuth counts the answer to an I request: a refused one closes the
// connection.
func (n *Node) countAuth(c *conn) {
	outcome := outOK
	if c.isClosed() {
		outcome = outError
	}
	n.countShellAnswer(proto.OpAuth, outcome)
}

// countShellAnswer counts a request the shell answers itself (I).
func (n *Node) countShellAnswer(op proto.Op, outcome int) {
	if i := opIndex[op]; i >= 0 {
		n.applyMu.Lock()
		n.stats.requests[i][outcome]++
		n.applyMu.Unlock()
	}
}

// limitHit counts a limit hit; it takes no lock.
func (n *Node) limitHit(lim int) { n.limits[lim].Add(1) }

// histogram counts durations in buckets, without atomics: its owner
// holds a lock.
type histogram struct {
	bounds []time.Duration
	counts []uint64 // per bucket, the last one past every bound
	sum    time.Duration
}

func (h *histogram) init(bounds []time.Duration) {
	h.bounds = bounds
	h.counts = make([]uint64, len(bounds)+1)
}

// add counts k observations of d.
func (h *histogram) add(d time.Duration, k uint64) {
	i := 0
	for i < len(h.bounds) && d > h.bounds[i] {
		i++
	}
	h.counts[i] += k
	h.sum += d * time.Duration(k)
}

func (h *histogram) export() Histogram {
	out := Histogram{Bounds: make([]float64, len(h.bounds)), Counts: make([]uint64, len(h.bounds)), Sum: h.sum.Seconds()}
	for i, b := range h.bounds {
		out.Count += h.counts[i]
		out.Bounds[i] = b.Seconds()
		out.Counts[i] = out.Count
	}
	out.Count += h.counts[len(h.bounds)]
	return out
}

// seqRing remembers this node's replication position over time, sampled
// as the timer ticks (at least every heartbeat), so that the active can
// tell how old the oldest record a standby lacks is.
type seqRing struct {
	at   [seqSamples]time.Time
	seq  [seqSamples]uint64
	n    int // samples held
	next int // where the next goes
}

const seqSamples = 4096

// seqEvery is the least time between two samples: 4096 of them cover at
// least 40 seconds.
const seqEvery = 10 * time.Millisecond

// reset forgets every sample: the role changed.
func (r *seqRing) reset() { r.n, r.next = 0, 0 }

// sampleSeqLocked records this node's replication position now, starting
// afresh after a role change. n.mu is held.
func (n *Node) sampleSeqLocked(now time.Time) {
	if n.seqsStale.Swap(false) {
		n.seqs.reset()
	}
	n.seqs.sample(now, n.core.Seq())
}

func (r *seqRing) sample(now time.Time, seq uint64) {
	if r.n > 0 {
		last := (r.next + seqSamples - 1) % seqSamples
		if now.Sub(r.at[last]) < seqEvery {
			return
		}
	}
	r.at[r.next], r.seq[r.next] = now, seq
	r.next = (r.next + 1) % seqSamples
	r.n = min(r.n+1, seqSamples)
}

// age is how long ago this node first held a record past seq, given that
// head is its position now: 0 when seq is not behind, at most now minus
// the newest sample at or before seq (rounded up to the sampling), and
// at least the span of every sample when seq is older than all of them.
// ok is false with no samples.
func (r *seqRing) age(now time.Time, seq, head uint64) (time.Duration, bool) {
	if seq >= head {
		return 0, true
	}
	if r.n == 0 {
		return 0, false
	}
	i := r.next
	for k := 0; k < r.n; k++ {
		i = (i + seqSamples - 1) % seqSamples
		if r.seq[i] <= seq {
			return now.Sub(r.at[i]), true
		}
	}
	return now.Sub(r.at[i]), true
}

// limitCounters are the limits hit, counted where the node mutex may not
// be held.
type limitCounters [numLimits]atomic.Uint64
