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
// it enforces, and how far behind each standby is in time. It is counted
// under the node mutex that the shell holds anyway when it hands a
// request to the core or carries an answer out, or with atomics on the
// rare paths that do not hold it: counting takes no lock of its own.
// Node.Metrics reads it, with the core's Counters and Status, under one
// hold of the mutex.
//
// Every answer comes from the core as a core.Send that names the op and
// key of the request it answers, its outcome and the limit a refusal
// hit: the shell never reads the answer's bytes. It is matched to its
// request the way a client matches it, by (op, key): an answer the core
// gives while the shell applies a request is that request's; any other
// answer on the connection (a waiter granted, timed out or redirected
// later, a request held back during a handoff, a key listing scanned a
// slice at a time) is matched to the oldest unanswered request of the
// connection with that op and key, for how long it took. Only requests
// that are not answered at once are remembered, so the common path costs
// a few comparisons and increments.

// The client requests counted, by op; their labels are proto's names
// for them, and one more label counts lines that were no request.
var countedOps = [...]proto.Op{proto.OpAcquire, proto.OpRelease, proto.OpRenew, proto.OpQueue, proto.OpKeys, proto.OpStatus, proto.OpHandoff, proto.OpAuth, proto.OpWithdraw, proto.OpWatch, proto.OpUnwatch}

// Labels of the requests by op and outcome.
var (
	opNames = func() (n [len(countedOps) + 1]string) {
		for i, op := range countedOps {
			n[i] = op.Name()
		}
		n[len(countedOps)] = "invalid"
		return n
	}()
	outcomeNames = [...]string{"granted", "timeout", "ok", "notheld", "moved", "error", "cancelled"}
)

const (
	numOps      = len(opNames)
	numOutcomes = len(outcomeNames)
)

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
	for _, op := range []proto.Op{proto.OpBeat, proto.OpSync, proto.OpResolve, proto.RecTakeover} {
		t[op] = -1
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

// shellStats is what the shell counts. Guarded by Node.mu.
type shellStats struct {
	// cur is the request being handed to the core, whose answer, if the
	// core gives it at once, is counted as answered at once.
	cur struct {
		c        *conn
		op       proto.Op
		key      string
		answered bool
	}
	requests [numOps][numOutcomes]uint64
	latency  histogram
	wait     histogram
	atOnce   uint64 // acquires granted at once: waits of 0, not yet in wait
	seqs     seqRing
}

// pendingReq is a client request of a connection not answered at once: a
// waiting acquire, or a request held back during a handoff. It is its op
// in the top 8 bits, and below them when the node took it up, in
// nanoseconds since Node.base modulo 2^56 (2.2 years: a wait is shorter,
// and since is computed modulo the same): one word a waiter, as a
// node may hold many. The key is its queue's.
type pendingReq uint64

const pendingAtMask = 1<<56 - 1

func newPendingReq(op proto.Op, at time.Duration) pendingReq {
	return pendingReq(uint64(op)<<56 | uint64(at)&pendingAtMask)
}

func (p pendingReq) op() proto.Op { return proto.Op(p >> 56) }

// since is how long ago, now being now (since Node.base), p was taken up.
func (p pendingReq) since(now time.Duration) time.Duration {
	return time.Duration((uint64(now) - uint64(p)) & pendingAtMask)
}

// pendingQueue is a connection's requests not answered at once with one
// key, in the order sent. It keeps the key, so that a queue that moves
// on is stored back under it without making it again from an answer's
// bytes.
type pendingQueue struct {
	key  string
	reqs []pendingReq
}

func (s *shellStats) init() {
	s.latency.init(requestDurationBounds)
	s.wait.init(acquireWaitBounds)
}

// begin says that the request (op, key) of c is handed to the core now.
// op and key are as its answer will echo them.
func (s *shellStats) begin(c *conn, op proto.Op, key string) {
	if op < 'A' || op > 'Z' {
		op = '?'
	}
	if key == "" {
		key = proto.WordNone
	}
	s.cur.c, s.cur.op, s.cur.key, s.cur.answered = c, op, key, false
}

// end says the core is done with the request begun, taken up at now; it
// returns 1 if it was answered at once, else 0. A client request that was
// not is remembered on c, to be matched with its answer when it comes.
func (s *shellStats) end(c *conn, now time.Time) uint64 {
	cur := &s.cur
	cur.c = nil
	if cur.answered {
		return 1
	}
	if c.peer || opIndex[cur.op] < 0 {
		return 0
	}
	if c.pending == nil {
		c.pending = make(map[string]pendingQueue)
	}
	q := c.pending[cur.key]
	q.key, q.reqs = cur.key, append(q.reqs, newPendingReq(cur.op, now.Sub(c.n.base)))
	c.pending[cur.key] = q
	return 0
}

// countAnswer counts s, an answer about to be written to c, under the op
// and outcome of the request it answers, as the core says them; the
// limit a refused acquire hit is counted too. n.mu is held (it runs in
// Out.Send). Most answers answer the request being applied: the common
// path looks nothing up.
func (n *Node) countAnswer(c *conn, s *core.Send) {
	if c.peer || s.Outcome == core.NoOutcome {
		return
	}
	st := &n.stats
	cur := &st.cur
	outcome := outcomeOf[s.Outcome]
	op := s.Op
	if cur.c == c && !cur.answered && op == cur.op && s.Key == cur.key {
		cur.answered = true
		if outcome == outGranted {
			st.atOnce++
		}
	} else if p, ok := c.takePending(op, s.Key); ok {
		d := p.since(time.Since(n.base))
		switch {
		case outcome == outGranted:
			st.wait.add(d, 1)
		case op != proto.OpAcquire:
			st.latency.add(d, 1)
		}
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

// takePending forgets and returns the oldest request of c with key that
// answer op can answer. n.mu is held.
func (c *conn) takePending(op proto.Op, key string) (pendingReq, bool) {
	q := c.pending[key]
	for i, p := range q.reqs {
		if p.op() != op {
			continue
		}
		switch {
		case len(q.reqs) == 1:
			delete(c.pending, q.key)
			return p, true
		case i == 0:
			q.reqs = q.reqs[1:] // FIFO: the usual case, no copy
		default:
			q.reqs = append(q.reqs[:i], q.reqs[i+1:]...)
		}
		c.pending[q.key] = q
		return p, true
	}
	return 0, false
}

// countCancelled counts the requests c leaves unanswered as it closes: its
// waiters leave their queues. n.mu is held.
func (n *Node) countCancelled(c *conn) {
	for _, q := range c.pending {
		for _, p := range q.reqs {
			if i := opIndex[p.op()]; i >= 0 {
				n.stats.requests[i][outCancelled]++
			}
		}
	}
	c.pending = nil
}

// countAuth counts the answer to an I request: a refused one closes the
// connection. n.mu is held.
func (n *Node) countAuth(c *conn) {
	outcome := outOK
	if c.isClosed() {
		outcome = outError
	}
	n.countShellAnswer(proto.OpAuth, outcome)
}

// countShellAnswer counts a request the shell answers itself (I, and K on
// the active). n.mu is held.
func (n *Node) countShellAnswer(op proto.Op, outcome int) {
	if i := opIndex[op]; i >= 0 {
		n.stats.requests[i][outcome]++
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
