// Package engine owns the lock state of one lockd node: keys, their
// holders and leases, the FIFO queue of waiters per key, wait limits and
// the fencing-token counter.
//
// The engine is a deterministic state machine. Every method that changes
// state takes the current time as an argument and first fires whatever
// deadlines are due at that instant (the read-only ones, Inspect, Keys,
// Scan, Stats, Held and Snapshot, do not: call Advance first for a view
// as of now), so the same calls with the same times always produce the
// same state and the same events. It starts no goroutine, takes no
// lock, reads no clock and knows nothing of sockets or peers: the caller
// (package cluster) serialises calls, routes the returned events to
// connections and replicates the state changes to standbys.
//
// # Time rules
//
// A lease granted at t for d is held during [t, t+d): at t+d it has
// expired, even if a release with its token arrives at the same instant.
// A waiter whose wait ends at t+w has timed out at t+w, even if the key
// frees at that same instant. Both follow from one rule: deadlines due at
// now fire before the request made at now is applied.
//
// # Tokens
//
// A token is epoch<<CounterBits | counter<<NodeBits | node: the epoch in
// the high bits (token>>CounterBits), then an 18-bit counter, then the
// node's index in the cluster (Config.Node) in the low 4 bits. The node's
// bits keep the tokens of two nodes apart even when both start an epoch
// from the same high-water mark in the same millisecond, as after an
// aborted handoff: as long as each node of a cluster has its own Node, no
// two nodes ever issue the same token.
//
// The epoch starts at the wall-clock milliseconds of the time passed to
// New, and is moved forward (never back) when the counter runs out, when
// the engine observes a token of its own epoch or later from elsewhere
// (Observe), and on Succeed, which a node calls when it becomes active.
// Every token a node issues is therefore larger than every token it
// issued before, across a restart (the new epoch is the restart's
// wall-clock milliseconds, later than the previous run's), and larger
// than every token of any epoch it has seen, which is what makes
// succession after failover, handoff and split-brain heals hold even for
// tokens that were never replicated. The assumption is documented in the
// README: the wall clock must not step back across a restart by more than
// the restart takes.
package engine

import (
	"container/heap"
	"errors"
	"fmt"
	"sort"
	"time"
)

// CounterBits is the width of everything below the epoch in a token, the
// counter and the node: token>>CounterBits is the token's epoch.
const CounterBits = 22

// NodeBits is the width of the node's index, the lowest bits of a token.
const NodeBits = 4

// MaxNodes is the most nodes a cluster may have: each needs its own value
// of a token's node bits.
const MaxNodes = 1 << NodeBits

// counterMax is the last counter of an epoch; the next token starts a new
// one.
const counterMax = 1<<(CounterBits-NodeBits) - 1

// Waiter names who asked for a key, so that the answer can be routed: the
// connection and the request's number on it. The engine only compares
// Waiters; it never looks inside.
type Waiter struct {
	Conn uint64
	Seq  uint64
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// Granted: Waiter now holds Key with Token for Lease. Replicate it.
	Granted EventKind = iota + 1
	// TimedOut: Waiter's wait for Key elapsed; nothing was granted.
	TimedOut
	// Freed: the holder Token of Key is gone, released or (Expired) by
	// lease. Replicate it.
	Freed
	// Renewed: the holder Token of Key now has Lease left. Replicate it.
	Renewed
)

func (k EventKind) String() string {
	switch k {
	case Granted:
		return "granted"
	case TimedOut:
		return "timed out"
	case Freed:
		return "freed"
	case Renewed:
		return "renewed"
	}
	return "unknown"
}

// Event is one outcome of a call: something to tell a waiter, something to
// replicate, or both.
type Event struct {
	Kind    EventKind
	Key     string
	Token   uint64
	Lease   time.Duration
	Waiter  Waiter
	Expired bool
}

// Config holds the node's place in the cluster and the limits the engine
// enforces. A zero field takes the default of DefaultConfig.
type Config struct {
	// Node is this node's index in the cluster, 0 to MaxNodes-1: its
	// position in the list of peers, the same on every node. It fills
	// the low bits of every token this engine issues.
	Node int

	MaxKeys          int           // keys held or waited on at once
	MaxWaitersPerKey int           // queue length of one key
	MaxWaiters       int           // waiters queued over all keys
	MaxLease         time.Duration // longest lease a grant or renewal may ask for
	MaxWait          time.Duration // longest finite wait; 0 (forever) is always allowed

	// MaxEpochAhead is the largest clock difference between the
	// cluster's machines that lockd tolerates. Observe ignores a token
	// whose epoch is further ahead of this node's clock, forged or from
	// a clock that is wrong, rather than move every later token here as
	// far ahead; the price is that this node's later tokens need not
	// exceed the ignored one.
	MaxEpochAhead time.Duration
}

// DefaultConfig are the limits lockd uses unless told otherwise.
var DefaultConfig = Config{
	MaxKeys:          1_000_000,
	MaxWaitersPerKey: 10_000,
	MaxWaiters:       1_000_000,
	MaxLease:         24 * time.Hour,
	MaxWait:          24 * time.Hour,
	MaxEpochAhead:    time.Minute,
}

// Refusals. Each wraps a sentence a client can act on.
var (
	ErrTooManyKeys    = errors.New("too many keys")
	ErrQueueFull      = errors.New("queue full")
	ErrTooManyWaiters = errors.New("too many waiters")
	ErrLeaseRange     = errors.New("lease out of range")
	ErrWaitRange      = errors.New("wait out of range")
	ErrDuplicateWaitr = errors.New("duplicate waiter")
)

type keyState struct {
	key      string
	held     bool
	token    uint64
	lease    time.Duration
	deadline int64 // lease end, unix nanoseconds
	heapIdx  int   // position in the lease heap, -1 when not held
	idx      int   // position in Engine.all
	head     *waiter
	tail     *waiter
	nwait    int
}

type waiter struct {
	w        Waiter
	ks       *keyState
	prev     *waiter
	next     *waiter
	lease    time.Duration
	since    int64
	deadline int64  // wait end, 0 when waiting forever
	heapIdx  int    // position in the wait heap, -1 when waiting forever
	arrival  uint64 // order of arrival, breaks ties between equal since
}

// Engine is the lock state machine. It is not safe for concurrent use.
type Engine struct {
	cfg      Config
	keys     map[string]*keyState
	all      []*keyState // the values of keys, in no order, for Scan
	waiters  map[Waiter]*waiter
	leases   leaseHeap
	waits    waitHeap
	epoch    uint64
	counter  uint64
	last     uint64 // highest token issued by this engine
	seen     uint64 // highest token known from anywhere
	freeKeys []*keyState
	freeWait []*waiter
	arrivals uint64 // waiters queued so far
}

// Check reports a configuration that New would refuse (a Node out of
// range) or silently replace by a default (a negative limit). A caller
// that takes the configuration from its user calls it before New.
func (c Config) Check() error {
	if c.Node < 0 || c.Node >= MaxNodes {
		return fmt.Errorf("node index %d out of range: a cluster has at most %d nodes, numbered 0 to %d by their position in --peers", c.Node, MaxNodes, MaxNodes-1)
	}
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"most keys", c.MaxKeys < 0},
		{"most waiters per key", c.MaxWaitersPerKey < 0},
		{"most waiters", c.MaxWaiters < 0},
		{"longest lease", c.MaxLease < 0},
		{"longest wait", c.MaxWait < 0},
		{"largest clock difference", c.MaxEpochAhead < 0},
	} {
		if f.neg {
			return fmt.Errorf("%s is negative: it must be 0 (the default) or more", f.name)
		}
	}
	return nil
}

// New returns an empty engine whose first token's epoch is now's
// wall-clock milliseconds. A Node out of range is a programming error
// (Config.Check reports it): New panics, rather than issue tokens that
// another node may issue too.
func New(cfg Config, now time.Time) *Engine {
	if cfg.Node < 0 || cfg.Node >= MaxNodes {
		panic(fmt.Sprintf("engine: node index %d not in 0..%d", cfg.Node, MaxNodes-1))
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultConfig.MaxKeys
	}
	if cfg.MaxWaitersPerKey <= 0 {
		cfg.MaxWaitersPerKey = DefaultConfig.MaxWaitersPerKey
	}
	if cfg.MaxWaiters <= 0 {
		cfg.MaxWaiters = DefaultConfig.MaxWaiters
	}
	if cfg.MaxLease <= 0 {
		cfg.MaxLease = DefaultConfig.MaxLease
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultConfig.MaxWait
	}
	if cfg.MaxEpochAhead <= 0 {
		cfg.MaxEpochAhead = DefaultConfig.MaxEpochAhead
	}
	return &Engine{
		cfg:     cfg,
		keys:    make(map[string]*keyState),
		waiters: make(map[Waiter]*waiter),
		epoch:   uint64(max(now.UnixMilli(), 1)),
	}
}

// Config returns the limits in force.
func (e *Engine) Config() Config { return e.cfg }

// Acquire asks for key on behalf of w. If the key is free and nobody
// waits, the grant is appended to out at once; otherwise w joins the tail
// of the key's queue and is answered by a later call (Granted or
// TimedOut). wait 0 waits forever.
func (e *Engine) Acquire(now time.Time, key string, lease, wait time.Duration, w Waiter, out []Event) ([]Event, error) {
	out = e.Advance(now, out)
	if lease <= 0 || lease > e.cfg.MaxLease {
		return out, fmt.Errorf("%w: lease must be more than 0 and at most %g seconds (the server's --max-lease)", ErrLeaseRange, e.cfg.MaxLease.Seconds())
	}
	if wait < 0 || wait > e.cfg.MaxWait {
		return out, fmt.Errorf("%w: wait must be 0 (forever) or at most %g seconds (the server's --max-wait)", ErrWaitRange, e.cfg.MaxWait.Seconds())
	}
	if _, dup := e.waiters[w]; dup {
		return out, fmt.Errorf("%w: request %d of connection %d is already waiting", ErrDuplicateWaitr, w.Seq, w.Conn)
	}
	ks := e.keys[key]
	if ks == nil {
		if len(e.keys) >= e.cfg.MaxKeys {
			return out, fmt.Errorf("%w: %d keys are held or waited on; release some or raise --max-keys", ErrTooManyKeys, e.cfg.MaxKeys)
		}
		ks = e.newKey(key)
	}
	nanos := now.UnixNano()
	if !ks.held {
		return e.grant(now, ks, lease, w, out), nil
	}
	if ks.nwait >= e.cfg.MaxWaitersPerKey {
		return out, fmt.Errorf("%w: %d clients already wait for this key; retry later or raise --max-waiters", ErrQueueFull, e.cfg.MaxWaitersPerKey)
	}
	if len(e.waiters) >= e.cfg.MaxWaiters {
		return out, fmt.Errorf("%w: %d clients already wait on this server; retry later or raise --max-total-waiters", ErrTooManyWaiters, e.cfg.MaxWaiters)
	}
	wt := e.newWaiter()
	e.arrivals++
	*wt = waiter{w: w, ks: ks, lease: lease, since: nanos, heapIdx: -1, arrival: e.arrivals}
	if wait > 0 {
		wt.deadline = nanos + int64(wait)
		heap.Push(&e.waits, wt)
	}
	if ks.tail == nil {
		ks.head = wt
	} else {
		ks.tail.next = wt
		wt.prev = ks.tail
	}
	ks.tail = wt
	ks.nwait++
	e.waiters[w] = wt
	return out, nil
}

// Release frees key if token holds it, and hands it at once to the head
// of its queue. It reports false, changing nothing, when token does not
// hold key (never did, already released, or the lease expired).
func (e *Engine) Release(now time.Time, key string, token uint64, out []Event) ([]Event, bool) {
	out = e.Advance(now, out)
	ks := e.keys[key]
	if ks == nil || !ks.held || ks.token != token {
		return out, false
	}
	out = append(out, Event{Kind: Freed, Key: key, Token: token})
	return e.handOn(now, ks, out), true
}

// Renew gives the holder token of key a fresh lease counted from now. It
// returns ErrNotHeld when token does not hold key, and a range error when
// the lease is out of range.
func (e *Engine) Renew(now time.Time, key string, token uint64, lease time.Duration, out []Event) ([]Event, error) {
	out = e.Advance(now, out)
	if lease <= 0 || lease > e.cfg.MaxLease {
		return out, fmt.Errorf("%w: lease must be more than 0 and at most %g seconds (the server's --max-lease)", ErrLeaseRange, e.cfg.MaxLease.Seconds())
	}
	ks := e.keys[key]
	if ks == nil || !ks.held || ks.token != token {
		return out, ErrNotHeld
	}
	ks.lease = lease
	ks.deadline = now.UnixNano() + int64(lease)
	heap.Fix(&e.leases, ks.heapIdx)
	return append(out, Event{Kind: Renewed, Key: key, Token: token, Lease: lease}), nil
}

// ErrNotHeld is returned by Renew when the token does not hold the key.
var ErrNotHeld = errors.New("token does not hold the key")

// Cancel removes w from its queue, as when its connection closes. It
// reports whether w was waiting.
func (e *Engine) Cancel(w Waiter) bool {
	wt := e.waiters[w]
	if wt == nil {
		return false
	}
	e.leave(wt)
	return true
}

// Advance fires every lease and wait deadline due at now: expired leases
// free their key and hand it on; elapsed waits answer TimedOut.
func (e *Engine) Advance(now time.Time, out []Event) []Event {
	nanos := now.UnixNano()
	for {
		lt, wt := int64(-1), int64(-1)
		if len(e.leases) > 0 && e.leases[0].deadline <= nanos {
			lt = e.leases[0].deadline
		}
		if len(e.waits) > 0 && e.waits[0].deadline <= nanos {
			wt = e.waits[0].deadline
		}
		switch {
		case lt < 0 && wt < 0:
			return out
		case wt >= 0 && (lt < 0 || wt <= lt):
			// A wait ending at the same instant as a lease times out
			// first: the waiter's wait was [since, deadline).
			w := e.waits[0]
			out = append(out, Event{Kind: TimedOut, Key: w.ks.key, Waiter: w.w})
			e.leave(w)
		default:
			ks := e.leases[0]
			out = append(out, Event{Kind: Freed, Key: ks.key, Token: ks.token, Expired: true})
			// The key is handed on as of its deadline, not as of now,
			// so a late Advance does not shorten the next lease.
			out = e.handOn(time.Unix(0, ks.deadline), ks, out)
		}
	}
}

// NextDeadline is the earliest instant at which Advance has work, if any.
func (e *Engine) NextDeadline() (time.Time, bool) {
	var d int64
	ok := false
	if len(e.leases) > 0 {
		d, ok = e.leases[0].deadline, true
	}
	if len(e.waits) > 0 && (!ok || e.waits[0].deadline < d) {
		d, ok = e.waits[0].deadline, true
	}
	return time.Unix(0, d), ok
}

// DropWaiters removes every waiter and returns them with their keys, as
// when the node stops being active and its waiters must go elsewhere.
func (e *Engine) DropWaiters(out []Event) []Event {
	ws := make([]*waiter, 0, len(e.waiters))
	for _, wt := range e.waiters {
		ws = append(ws, wt)
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].since != ws[j].since {
			return ws[i].since < ws[j].since
		}
		return ws[i].arrival < ws[j].arrival
	})
	for _, wt := range ws {
		out = append(out, Event{Kind: TimedOut, Key: wt.ks.key, Waiter: wt.w})
		e.leave(wt)
	}
	return out
}

func (e *Engine) grant(now time.Time, ks *keyState, lease time.Duration, w Waiter, out []Event) []Event {
	tok := e.nextToken(now)
	ks.held = true
	ks.token = tok
	ks.lease = lease
	ks.deadline = now.UnixNano() + int64(lease)
	heap.Push(&e.leases, ks)
	return append(out, Event{Kind: Granted, Key: ks.key, Token: tok, Lease: lease, Waiter: w})
}

// handOn frees ks and grants it to the head of its queue, if any.
func (e *Engine) handOn(now time.Time, ks *keyState, out []Event) []Event {
	ks.held = false
	if ks.heapIdx >= 0 {
		heap.Remove(&e.leases, ks.heapIdx)
	}
	if wt := ks.head; wt != nil {
		w, lease := wt.w, wt.lease
		e.unlink(wt)
		return e.grant(now, ks, lease, w, out)
	}
	e.dropKey(ks)
	return out
}

func (e *Engine) unlink(wt *waiter) {
	ks := wt.ks
	if wt.prev == nil {
		ks.head = wt.next
	} else {
		wt.prev.next = wt.next
	}
	if wt.next == nil {
		ks.tail = wt.prev
	} else {
		wt.next.prev = wt.prev
	}
	ks.nwait--
	if wt.heapIdx >= 0 {
		heap.Remove(&e.waits, wt.heapIdx)
	}
	delete(e.waiters, wt.w)
	*wt = waiter{}
	if len(e.freeWait) < 4096 {
		e.freeWait = append(e.freeWait, wt)
	}
}

// leave removes a waiter that is not being granted, and forgets its key
// if nothing else holds or waits on it.
func (e *Engine) leave(wt *waiter) {
	ks := wt.ks
	e.unlink(wt)
	e.dropKey(ks)
}

func (e *Engine) newKey(key string) *keyState {
	var ks *keyState
	if n := len(e.freeKeys); n > 0 {
		ks = e.freeKeys[n-1]
		e.freeKeys = e.freeKeys[:n-1]
	} else {
		ks = new(keyState)
	}
	*ks = keyState{key: key, heapIdx: -1, idx: len(e.all)}
	e.keys[key] = ks
	e.all = append(e.all, ks)
	return ks
}

func (e *Engine) dropKey(ks *keyState) {
	// Only a key still in e.all (not dropped already) is dropped; the
	// slice answers that without hashing the key.
	if ks.held || ks.nwait > 0 || ks.idx >= len(e.all) || e.all[ks.idx] != ks {
		return
	}
	delete(e.keys, ks.key)
	// The last key fills the hole, so that a key's index only ever
	// decreases while it stays: Scan depends on it.
	last := len(e.all) - 1
	e.all[ks.idx] = e.all[last]
	e.all[ks.idx].idx = ks.idx
	e.all[last] = nil
	e.all = e.all[:last]
	*ks = keyState{heapIdx: -1}
	if len(e.freeKeys) < 4096 {
		e.freeKeys = append(e.freeKeys, ks)
	}
}

func (e *Engine) newWaiter() *waiter {
	if n := len(e.freeWait); n > 0 {
		wt := e.freeWait[n-1]
		e.freeWait = e.freeWait[:n-1]
		return wt
	}
	return new(waiter)
}

type leaseHeap []*keyState

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *leaseHeap) Push(x any) {
	ks := x.(*keyState)
	ks.heapIdx = len(*h)
	*h = append(*h, ks)
}
func (h *leaseHeap) Pop() any {
	old := *h
	ks := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	ks.heapIdx = -1
	return ks
}

type waitHeap []*waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *waitHeap) Push(x any) {
	wt := x.(*waiter)
	wt.heapIdx = len(*h)
	*h = append(*h, wt)
}
func (h *waitHeap) Pop() any {
	old := *h
	wt := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	wt.heapIdx = -1
	return wt
}
