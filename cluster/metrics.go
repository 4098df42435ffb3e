package cluster

import (
	"bytes"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/engine"
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
// An answer is matched to its request the way a client matches it, by
// (op, key): an answer the core gives while the shell applies a request
// is that request's; any other answer on the connection (a waiter
// granted, timed out or redirected later, a request held back during a
// handoff) is matched to the oldest unanswered request of the connection
// with that key. Only requests that are not answered at once are
// remembered, so the common path costs a few comparisons and increments.

// Labels of the requests by op and outcome.
var (
	opNames      = [...]string{"acquire", "release", "renew", "queue", "keys", "status", "handoff", "auth", "withdraw", "watch", "unwatch", "invalid"}
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
	for i, op := range []proto.Op{proto.OpAcquire, proto.OpRelease, proto.OpRenew, proto.OpQueue, proto.OpKeys, proto.OpStatus, proto.OpHandoff, proto.OpAuth, proto.OpWithdraw, proto.OpWatch, proto.OpUnwatch} {
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

// ReadyMaxLag is how many replication records a standby may be behind
// the active, as of the active's last heartbeat answer, and still be
// ready: records in flight on the stream while the heartbeat overtakes
// them.
const ReadyMaxLag = 1000

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
// and since is computed modulo the same). 8 bytes a waiter, where its
// key and a time.Time beside its op took 48. The key is its queue's.
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

// countAnswer counts answer b, about to be written to c, under the op
// and outcome of the request it answers; the limits named by acquires'
// E answers are counted too. n.mu is held (it runs in Out.Send). Most
// answers answer the request being applied, whose key is checked in
// place: the common path scans nothing.
func (n *Node) countAnswer(c *conn, b []byte) {
	if c.peer || len(b) < 3 || b[1] != ' ' {
		return
	}
	s := &n.stats
	cur := &s.cur
	var key []byte
	inCur := cur.c == c && !cur.answered && hasKey(b, cur.key)
	if inCur {
		key = b[2 : 2+len(cur.key)]
	} else {
		key = answerKey(b)
	}
	rest := b[min(len(b), 3+len(key)):] // the words after the key
	var op proto.Op                     // 0: M, which does not say which request it answers
	outcome := outOK
	switch kind := proto.Op(b[0]); kind {
	case proto.OpAcquire:
		op, outcome = proto.OpAcquire, outGranted
	case proto.KindTimeout:
		op, outcome = proto.OpAcquire, outTimeout
	case proto.KindMoved:
		outcome = outMoved
	case proto.KindError:
		op, outcome = proto.Op('?'), outError
		if len(rest) >= 2 && rest[1] == ':' {
			op = proto.Op(rest[0])
		}
	case proto.OpRelease, proto.OpRenew:
		op = kind
		if bytes.HasPrefix(rest, []byte(proto.WordNotHeld)) {
			outcome = outNotHeld
		}
	case proto.OpQueue, proto.OpKeys, proto.OpStatus, proto.OpHandoff, proto.OpAuth, proto.OpWithdraw, proto.OpWatch, proto.OpUnwatch:
		// An L line that answers no request is a watch's news: it
		// finds no pending request below, and counts nothing.
		op = kind
	default:
		return
	}
	if inCur && (op == 0 || op == cur.op) {
		cur.answered = true
		op = cur.op
		if outcome == outGranted {
			s.atOnce++
		}
	} else {
		p, ok := c.takePending(op, key)
		if op == 0 {
			op = proto.OpAcquire // a waiter redirected when the role moved
			if ok {
				op = p.op()
			}
		}
		if ok {
			d := p.since(time.Since(n.base))
			switch {
			case outcome == outGranted:
				s.wait.add(d, 1)
			case op != proto.OpAcquire:
				s.latency.add(d, 1)
			}
		}
	}
	i := opIndex[op]
	if i < 0 {
		return
	}
	s.requests[i][outcome]++
	if outcome == outError && op == proto.OpAcquire {
		n.noteRefusal(rest)
	}
}

// hasKey reports whether answer b echoes key.
func hasKey(b []byte, key string) bool {
	end := 2 + len(key)
	return len(b) > end && (b[end] == ' ' || b[end] == '\n') && string(b[2:end]) == key
}

// answerKey is the key answer b echoes.
func answerKey(b []byte) []byte {
	b = b[2:]
	for i, ch := range b {
		if ch == ' ' || ch == '\n' {
			return b[:i]
		}
	}
	return b
}

// noteRefusal counts the limit an acquire's E answer names, if any.
func (n *Node) noteRefusal(rest []byte) {
	msg := rest[min(len(rest), 3):] // after "A: "
	for _, l := range []struct {
		err error
		lim int
	}{
		{engine.ErrTooManyKeys, limMaxKeys},
		{engine.ErrQueueFull, limMaxWaiters},
		{engine.ErrTooManyWaiters, limMaxTotalWaiters},
	} {
		if bytes.HasPrefix(msg, []byte(l.err.Error()+":")) {
			n.limitHit(l.lim)
			return
		}
	}
	if bytes.HasPrefix(msg, []byte("this connection already has ")) {
		n.limitHit(limMaxConnWaiters)
	}
}

// takePending forgets and returns the oldest request of c with key that
// answer op (0: any) can answer. n.mu is held.
func (c *conn) takePending(op proto.Op, key []byte) (pendingReq, bool) {
	q := c.pending[string(key)]
	for i, p := range q.reqs {
		if op != 0 && p.op() != op {
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

// connLimit is the limit a refused connection hit.
func connLimit(why string) int {
	if strings.Contains(why, "--max-conns-per-ip") {
		return limMaxConnsPerIP
	}
	return limMaxConns
}

// outputLimit is the limit a connection closed by overLimit hit.
func outputLimit(why string) int {
	switch {
	case strings.Contains(why, "--max-conn-output"):
		return limMaxConnOutput
	case strings.Contains(why, "--max-output"):
		return limMaxOutput
	}
	return limStreamBuffer
}

// readBoundLimit is the limit a connection closed by its deadlineReader
// hit.
func readBoundLimit(b errReadBound) int {
	if strings.HasPrefix(b.msg, "not authenticated") {
		return limAuthTimeout
	}
	return limLineTimeout
}

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
	role Role
	at   [seqSamples]time.Time
	seq  [seqSamples]uint64
	n    int // samples held
	next int // where the next goes
}

const seqSamples = 4096

// seqEvery is the least time between two samples: 4096 of them cover at
// least 40 seconds.
const seqEvery = 10 * time.Millisecond

func (r *seqRing) sample(now time.Time, seq uint64, role Role) {
	if role != r.role {
		// A standby's position follows the active's: what it was then
		// says nothing of when this node produced its records.
		r.role, r.n, r.next = role, 0, 0
	}
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

// Histogram is a histogram as Prometheus exposes it.
type Histogram struct {
	Bounds []float64 // upper bounds, seconds
	Counts []uint64  // observations at or below each bound (cumulative)
	Count  uint64    // every observation
	Sum    float64   // their sum, seconds
}

// RequestCount is how many client requests of one op had one outcome.
type RequestCount struct {
	Op, Outcome string
	N           uint64
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

// Health is what the probes decide on.
type Health struct {
	Running    bool // serving: started and not shutting down
	Role       Role
	Active     string // the active this node knows of
	Paused     bool   // did not run for a failure timeout; waits to hear its peers
	Following  string // the active whose stream it follows
	StreamLive bool   // that stream is synced and running
	Lag        uint64 // records behind the active, as of its last heartbeat
}

// Live reports whether the node serves its role (the /healthz probe),
// and why not.
func (h Health) Live() (bool, string) {
	if !h.Running {
		return false, "not serving: starting or shutting down"
	}
	return true, "serving as " + string(h.Role)
}

// Ready reports whether the node is the active or a standby caught up
// with it (the /readyz probe), and in a few words why.
func (h Health) Ready() (bool, string) {
	switch {
	case !h.Running:
		return false, "not serving: starting or shutting down"
	case h.Paused:
		return false, "paused: this node did not run for a failure timeout and waits to hear its peers"
	case h.Role == Active:
		return true, "active"
	case h.Role == HandingOff:
		return false, "handing its role off"
	case h.Role == Joining:
		return false, "joining: still learning who is active"
	case h.Active == "":
		return false, "standby, and no active is known"
	case h.Following != h.Active || !h.StreamLive:
		return false, "standby, not synced with the active " + h.Active + " yet"
	case h.Lag > ReadyMaxLag:
		return false, "standby, " + itoa(h.Lag) + " records behind the active " + h.Active
	}
	return true, "standby, caught up with the active " + h.Active + " (" + itoa(h.Lag) + " records behind)"
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

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

// Health reads what the probes decide on.
func (n *Node) Health() Health {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	return n.healthLocked(n.core.Status(now))
}

func (n *Node) healthLocked(st proto.Status) Health {
	h := Health{
		Running: n.running.Load() && !n.core.Leaving(),
		Role:    n.core.Role(),
		Active:  n.core.Active(),
		Paused:  n.core.Paused(),
	}
	h.Following, h.StreamLive = n.core.Following()
	for _, p := range st.Peers {
		if p.Addr == n.self {
			h.Lag = p.Lag
		}
	}
	return h
}

// Metrics reads everything this node counts, under one hold of its
// mutex: a scrape costs the clients one short wait, whatever it reads.
func (n *Node) Metrics() Metrics {
	m := Metrics{Self: n.self, Limits: make(map[string]uint64, numLimits)}
	for i, name := range LimitNames {
		m.Limits[name] = n.limits[i].Load()
	}
	m.OutputBytes = n.outBytes.Load()
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	m.Counters = n.core.Counters()
	st := n.core.Status(now)
	m.Health = n.healthLocked(st)
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
	for _, p := range st.Peers {
		if p.Addr == n.self {
			continue
		}
		pm := PeerMetrics{Addr: p.Addr, Role: p.Role, Reachable: p.Reachable}
		if active && p.Reachable && p.Role != string(Active) {
			pm.HasLag, pm.LagRecords = true, p.Lag
			if age, ok := n.stats.seqs.age(now, p.Seq, st.Seq); ok {
				pm.LagSeconds = age.Seconds()
			}
		}
		m.Peers = append(m.Peers, pm)
	}
	for i := range n.stats.requests {
		for j, v := range n.stats.requests[i] {
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

// limitCounters are the limits hit, counted where the node mutex may not
// be held.
type limitCounters [numLimits]atomic.Uint64
