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
// # Semaphores
//
// A key has a limit: how many may hold it at once. Limit 1 is a lock;
// a key with limit N is a semaphore held by up to N holders at once,
// each with its own token and its own lease, renewed and released by
// that token. The first acquire of a key (or the first replicated
// holder, ApplyHeld) creates it with its limit; while the key exists,
// held or waited on, an acquire that asks for another limit is refused
// (ErrLimitMismatch), never coerced. When the last holder and waiter
// leave, the key and its limit go: the next acquire may choose another.
//
// Waiters queue FIFO, one queue per key whatever its limit. An acquire
// is granted at once while the key has fewer holders than its limit;
// otherwise it waits. Each holder that goes, released or expired, frees
// one place, and the head of the queue takes it at once with a new
// token: one place, one waiter. So a release grants one waiter, and two
// leases that end at the same instant grant two, in queue order. The
// time rules above hold for every holder and every place: a waiter whose
// wait ends at the instant a place frees has timed out.
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
//
// The holders of a semaphore each have their own token, and the tokens
// of one key increase in grant order like all others. But several hold at
// once, so a later token does not mean an earlier holder is gone: a
// resource fenced per place of a semaphore keys its fence by token (or by
// place), not by key alone.
package engine

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"time"
	"unsafe"
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
	// Granted: Waiter now holds Key with Token for Lease, as one of at
	// most Limit holders. Replicate it.
	Granted EventKind = iota + 1
	// TimedOut: Waiter's wait for Key elapsed; nothing was granted.
	TimedOut
	// Freed: the holder Token of Key is gone, released or (Expired) by
	// lease. Replicate it.
	Freed
	// Renewed: the holder Token of Key (whose limit is Limit) now has
	// Lease left. Replicate it.
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
	Expired bool
	Key     string
	Token   uint64
	Lease   time.Duration
	// Limit is the key's limit, on Granted and Renewed: a replica needs
	// it to create the key as the active has it.
	Limit  int
	Waiter Waiter
	// ID is the acquire's id, on Granted: a replica keeps it with the
	// holder, so that a re-sent acquire finds its grant after a failover;
	// and on a TimedOut of Advance, whose waiter left its queue (not on
	// the TimedOut of a request replaced by its re-send, which keeps the
	// place).
	ID string
	// Queued is when Waiter joined the queue, in unix nanoseconds, on the
	// Granted and TimedOut of a waiter; 0 on an answer given at once.
	Queued int64
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
	MaxLimit         int           // largest limit: most holders of one key at once

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
	MaxLimit:         1024,
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
	// ErrLimitRange: a limit below 0 or above Config.MaxLimit.
	ErrLimitRange = errors.New("limit out of range")
	// ErrLimitMismatch: the key exists with another limit. Every client
	// of a key must agree on how many may hold it.
	ErrLimitMismatch = errors.New("limit mismatch")
)

// keyState is one key held or waited on. Its first holder lives inside
// it, so that a lock (limit 1) costs one allocation, as it did before
// semaphores; only a second holder at once, a waiter, or a limit other
// than 1 allocates the key's extra. A held lock is the common case and
// the one a million keys are made of: 64 bytes, where the queue and the
// crowd inline, and a pointer back from the holder, took 128.
//
// first is the first field: a first holder finds its key at its own
// address (holder.keyOf), with no pointer back.
type keyState struct {
	first holder // free when first.heapIdx is -1
	key   string
	ext   *keyExtra // the crowd, the queue, a limit; nil for a lock that has none
}

// keyExtra is what a key needs beyond one holder: the holders beside
// the first, the queue, and its limit when it is not 1.
type keyExtra struct {
	more  crowd // the holders beside first
	head  *waiter
	tail  *waiter
	nwait int
	limit int
}

// holder is one holder of a key, and an entry of the lease heap.
type holder struct {
	id       string // the acquire's id, "" when it had none
	token    uint64
	deadline int64 // lease end, unix nanoseconds
	heapIdx  int32 // position in the lease heap, -1 when not held
	// idx is, for a key's first holder, the key's position in
	// Engine.all; -1 for a holder of the crowd, a crowdHolder.
	idx int32
}

// crowdHolder is a holder beside a key's first: it names its key.
type crowdHolder struct {
	holder // first: a crowd's *holder is its crowdHolder's address
	ks     *keyState
}

// keyOf returns the key h holds.
func (h *holder) keyOf() *keyState {
	if h.idx >= 0 {
		// h is the first field of its keyState.
		return (*keyState)(unsafe.Pointer(h))
	}
	return (*crowdHolder)(unsafe.Pointer(h)).ks
}

// crowd is the holders of a key beside its first, sorted by token so that
// a release or renewal finds its holder by binary search.
type crowd []*holder

// maxKeptCrowd is the largest crowd a freed key keeps for the next key
// that reuses it.
const maxKeptCrowd = 64

// waiter is one queued acquire: 64 bytes, one size class, where it took
// 96 with its deadline in it and a 64-bit count of arrivals, and 80 with
// its acquire's id in it (most acquires have none: the id is in
// Engine.idOf). The deadline of a finite wait is kept in the wait heap,
// beside its waiter.
type waiter struct {
	w       Waiter
	ks      *keyState
	prev    *waiter
	next    *waiter
	lease   time.Duration
	since   int64  // when it was queued, unix nanoseconds
	heapIdx int32  // position in the wait heap, -1 when waiting forever
	arrival uint32 // order of arrival, breaks ties between equal since
}

// Engine is the lock state machine. It is not safe for concurrent use.
type Engine struct {
	cfg     Config
	slots   []int32 // the keys' index by name (index.go)
	seed    maphash.Seed
	all     chunks[*keyState] // every key, in no order: the index's entries, and Scan's
	waiters waiterTable
	byID    map[string]*waiter // the waiters whose acquire has an id
	idOf    map[*waiter]string // and their ids
	// The most entries byID has had since it was last made anew
	// (shrinkMap), and idOf.
	byIDPeak int
	idOfPeak int
	leases   leaseHeap
	waits    waitHeap
	epoch    uint64
	counter  uint64
	last     uint64 // highest token issued by this engine
	seen     uint64 // highest token known from anywhere
	freeKeys []*keyState
	freeWait []*waiter
	freeHold []*crowdHolder
	arrivals uint32 // waiters queued so far, wrapping: ties of since are rare
	// ghosts numbers the ghosts queued (AddGhost), and ghostWait holds
	// each ghost's wait deadline (0: forever) while its heap entry is its
	// grace.
	ghosts    uint64
	ghostWait map[*waiter]int64
	// released: the tokens released lately (released.go).
	released releasedSet
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
		{"largest limit", c.MaxLimit < 0},
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
	if cfg.MaxLimit <= 0 {
		cfg.MaxLimit = DefaultConfig.MaxLimit
	}
	if cfg.MaxEpochAhead <= 0 {
		cfg.MaxEpochAhead = DefaultConfig.MaxEpochAhead
	}
	cfg.MaxKeys = min(cfg.MaxKeys, math.MaxInt32)
	cfg.MaxLimit = min(cfg.MaxLimit, math.MaxInt32)
	return &Engine{
		cfg:   cfg,
		seed:  maphash.MakeSeed(),
		epoch: uint64(max(now.UnixMilli(), 1)),
	}
}

// Config returns the limits in force.
func (e *Engine) Config() Config { return e.cfg }

// AcquireID asks for one of the limit places of key on behalf of w: limit
// is how many may hold key at once, 1 (or 0) for a lock. If the key has
// fewer holders than its limit, the grant is appended to out at once;
// otherwise w joins the tail of the key's queue and is answered by a
// later call (Granted or TimedOut). wait 0 waits forever.
//
// The first acquire of a key sets its limit; while the key is held or
// waited on, an acquire with another limit is refused with
// ErrLimitMismatch.
//
// id is the client's name for the acquire ("" for none), so that
// re-sending it is safe: while a holder of key got its
// place with id, the acquire answers that grant again (a Granted event
// for w with the holder's token, its lease renewed to lease from now)
// instead of queueing behind it; while a waiter of key waits with id, w
// takes its place in the queue, and the waiter it replaces is answered
// TimedOut (its request was given up on). An empty id is Acquire.
func (e *Engine) AcquireID(now time.Time, key string, limit int, lease, wait time.Duration, id string, w Waiter, out []Event) ([]Event, error) {
	return e.acquire(now, key, limit, lease, wait, false, id, w, out)
}

// TryAcquireID is AcquireID that never queues, the try-lock: w is granted
// at once if a place of key is free (or its id holds one already), and
// answered TimedOut at once otherwise, in out. A place kept for a waiter
// of the previous active (see AddGhost) counts as taken.
func (e *Engine) TryAcquireID(now time.Time, key string, limit int, lease time.Duration, id string, w Waiter, out []Event) ([]Event, error) {
	return e.acquire(now, key, limit, lease, 0, true, id, w, out)
}

func (e *Engine) acquire(now time.Time, key string, limit int, lease, wait time.Duration, try bool, id string, w Waiter, out []Event) ([]Event, error) {
	out = e.Advance(now, out)
	if lease <= 0 || lease > e.cfg.MaxLease {
		return out, fmt.Errorf("%w: lease must be more than 0 and at most %g seconds (the node's longest lease)", ErrLeaseRange, e.cfg.MaxLease.Seconds())
	}
	if wait < 0 || wait > e.cfg.MaxWait {
		return out, fmt.Errorf("%w: wait must be 0 (forever) or at most %g seconds (the node's longest wait)", ErrWaitRange, e.cfg.MaxWait.Seconds())
	}
	// One comparison passes every limit in 1..MaxLimit; 0 is 1.
	if uint(limit-1) >= uint(e.cfg.MaxLimit) {
		if limit != 0 {
			return out, fmt.Errorf("%w: limit %d; a key allows 1 (a lock, the default) to %d holders at once (the node's largest limit)", ErrLimitRange, limit, e.cfg.MaxLimit)
		}
		limit = 1
	}
	if e.waiters.get(w) != nil {
		return out, fmt.Errorf("%w: request %d of connection %d is already waiting", ErrDuplicateWaitr, w.Seq, w.Conn)
	}
	ks := e.lookup(key)
	if ks == nil {
		if e.all.len() >= e.cfg.MaxKeys {
			return out, fmt.Errorf("%w: the node's limit of %s held or waited on at once is reached; release some first", ErrTooManyKeys, plural(e.cfg.MaxKeys, "key"))
		}
		return e.grant(now, e.newKey(key, limit), lease, w, id, out), nil
	}
	if ks.limit() != limit {
		return out, fmt.Errorf("%w: key %q allows %s; this acquire asked for %d: every acquire of it must ask for that limit", ErrLimitMismatch, key, pluralHolders(ks.limit()), limit)
	}
	nanos := now.UnixNano()
	if id != "" {
		if out, ok := e.again(now, ks, lease, id, try, w, out); ok {
			return out, nil
		}
	}
	// A free place under a queue is one kept for a ghost at its head.
	if ks.nheld() < ks.limit() && ks.head() == nil {
		return e.grant(now, ks, lease, w, id, out), nil
	}
	if try {
		return append(out, Event{Kind: TimedOut, Key: key, Waiter: w}), nil
	}
	if ks.nwait() >= e.cfg.MaxWaitersPerKey {
		return out, fmt.Errorf("%w: the node's limit of %s per key is reached; retry later", ErrQueueFull, plural(e.cfg.MaxWaitersPerKey, "waiter"))
	}
	if e.waiters.len() >= e.cfg.MaxWaiters {
		return out, fmt.Errorf("%w: the node's limit of %s over all keys is reached; retry later", ErrTooManyWaiters, plural(e.cfg.MaxWaiters, "waiter"))
	}
	wt := e.newWaiter()
	e.arrivals++
	*wt = waiter{w: w, ks: ks, lease: lease, since: nanos, heapIdx: -1, arrival: e.arrivals}
	if id != "" {
		if e.byID == nil {
			e.byID = make(map[string]*waiter)
			e.idOf = make(map[*waiter]string)
		}
		e.byID[id] = wt
		e.idOf[wt] = id
		e.byIDPeak = max(e.byIDPeak, len(e.byID))
		e.idOfPeak = max(e.idOfPeak, len(e.idOf))
	}
	if wait > 0 {
		e.waits.push(waitEntry{deadline: nanos + int64(wait), wt: wt})
	}
	e.enqueue(ks, wt)
	return out, nil
}

// again serves an acquire whose id a holder or a waiter of ks already
// carries: it is a re-send of the same acquire. It reports false when
// neither does.
func (e *Engine) again(now time.Time, ks *keyState, lease time.Duration, id string, try bool, w Waiter, out []Event) ([]Event, bool) {
	for h := range ks.holders {
		if h.id == id {
			h.deadline = now.UnixNano() + int64(lease)
			heap.Fix(&e.leases, int(h.heapIdx))
			return append(out, Event{Kind: Granted, Key: ks.key, Token: h.token, Lease: lease, Waiter: w, Limit: ks.limit()}), true
		}
	}
	wt := e.byID[id]
	if wt == nil || wt.ks != ks || try {
		return out, false
	}
	if wt.w.Conn != GhostConn {
		out = append(out, Event{Kind: TimedOut, Key: ks.key, Waiter: wt.w, Queued: wt.since})
	}
	e.waiters.remove(wt)
	wt.w, wt.lease = w, lease
	e.waiters.add(wt)
	if dl, ok := e.ghostWait[wt]; ok {
		// A ghost's place claimed back: its wait is what it had left,
		// no longer its grace.
		delete(e.ghostWait, wt)
		if wt.heapIdx >= 0 {
			heap.Remove(&e.waits, int(wt.heapIdx))
		}
		if dl > 0 {
			e.waits.push(waitEntry{deadline: dl, wt: wt})
		}
		if ks.nheld() < ks.limit() {
			out = e.fill(now, ks, out)
		}
	}
	return out, true
}

// GhostConn is the Waiter.Conn of a ghost: a place in a queue kept, after
// a failover or a handoff, for a waiter of the node this one took over
// from, until its client re-sends the acquire (same id) and claims it.
// No connection has this number.
const GhostConn = ^uint64(0)

// MaxGhostGrace bounds how long a ghost keeps its place: a ghost at the
// head of a free key keeps the key free meanwhile (the place is its
// waiter's, who is re-sending), so the grace must stay short.
const MaxGhostGrace = 5 * time.Second

// AddGhost queues a ghost of key at the tail of its queue: the place of
// a waiter with id that the previous active had queued, whose wait had
// waitLeft to go (0: forever), for lease. The ghost keeps the place for
// grace (at most MaxGhostGrace): an AcquireID with its id takes it back
// with the wait it had left; one that does not come in time is dropped.
// While a ghost is at the head of a key with a free place, the place
// stays free for it, for at most the grace; after the grace the next
// waiter is granted. A ghost is never granted and never answered.
//
// A key that does not exist is created with limit; an id already queued
// or holding, or a key with another limit, adds nothing.
func (e *Engine) AddGhost(now time.Time, key string, limit int, id string, lease, waitLeft, grace time.Duration) bool {
	if id == "" || lease <= 0 || e.byID[id] != nil {
		return false
	}
	grace = min(max(grace, time.Millisecond), MaxGhostGrace)
	limit = max(limit, 1)
	ks := e.lookup(key)
	if ks == nil {
		if e.all.len() >= e.cfg.MaxKeys {
			return false
		}
		ks = e.newKey(key, limit)
	} else if ks.limit() != limit {
		return false
	}
	for h := range ks.holders {
		if h.id == id {
			return false
		}
	}
	nanos := now.UnixNano()
	e.ghosts++
	wt := e.newWaiter()
	e.arrivals++
	*wt = waiter{w: Waiter{Conn: GhostConn, Seq: e.ghosts}, ks: ks, lease: lease, since: nanos, heapIdx: -1, arrival: e.arrivals}
	if e.byID == nil {
		e.byID = make(map[string]*waiter)
		e.idOf = make(map[*waiter]string)
	}
	e.byID[id] = wt
	e.idOf[wt] = id
	e.byIDPeak = max(e.byIDPeak, len(e.byID))
	e.idOfPeak = max(e.idOfPeak, len(e.idOf))
	if e.ghostWait == nil {
		e.ghostWait = make(map[*waiter]int64)
	}
	var dl int64
	if waitLeft > 0 {
		dl = nanos + int64(waitLeft)
	}
	e.ghostWait[wt] = dl
	end := nanos + int64(grace)
	if dl > 0 {
		end = min(end, dl)
	}
	e.waits.push(waitEntry{deadline: end, wt: wt})
	e.enqueue(ks, wt)
	return true
}

// enqueue puts wt at the tail of ks's queue: a waiter or a ghost.
func (e *Engine) enqueue(ks *keyState, wt *waiter) {
	x := e.extra(ks)
	if x.tail == nil {
		x.head = wt
	} else {
		x.tail.next = wt
		wt.prev = x.tail
	}
	x.tail = wt
	x.nwait++
	e.waiters.add(wt)
}

// QueuedID reports whether a waiter (or ghost) with id is queued.
func (e *Engine) QueuedID(id string) bool { return e.byID[id] != nil }

// Withdraw takes the waiter of key whose acquire carried id, and came on
// connection conn, out of the queue (X), and returns it; false when no
// such waiter waits (granted already, timed out, never queued, or
// another connection's).
func (e *Engine) Withdraw(key, id string, conn uint64) (Waiter, bool) {
	wt := e.byID[id]
	if wt == nil || wt.w.Conn != conn || wt.ks.key != key {
		return Waiter{}, false
	}
	w := wt.w
	e.leave(wt)
	return w, true
}

// pluralHolders says "1 holder" or "n holders".
func pluralHolders(n int) string { return plural(n, "holder") }

// plural is n of thing, in words: "1 waiter", "50 waiters".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// Release frees the place of key that token holds, and hands it at once
// to the head of the key's queue. It reports false, changing nothing,
// when token does not hold key (never did, or the lease expired). A
// release of a token that released key within ReleasedMemory (the same
// release sent again, its answer lost) reports true and changes nothing.
func (e *Engine) Release(now time.Time, key string, token uint64, out []Event) ([]Event, bool) {
	out = e.Advance(now, out)
	ks := e.lookup(key)
	var h *holder
	if ks != nil {
		h = ks.find(token)
	}
	if h == nil {
		return out, e.WasReleased(now, key, token)
	}
	e.released.add(now.UnixNano(), token, ks.key)
	out = append(out, Event{Kind: Freed, Key: key, Token: token})
	return e.handOn(now, h, out), true
}

// Renew gives the holder token of key a fresh lease counted from now. It
// returns ErrNotHeld when token does not hold key, and a range error when
// the lease is out of range.
func (e *Engine) Renew(now time.Time, key string, token uint64, lease time.Duration, out []Event) ([]Event, error) {
	out = e.Advance(now, out)
	if lease <= 0 || lease > e.cfg.MaxLease {
		return out, fmt.Errorf("%w: lease must be more than 0 and at most %g seconds (the node's longest lease)", ErrLeaseRange, e.cfg.MaxLease.Seconds())
	}
	ks := e.lookup(key)
	if ks == nil {
		return out, ErrNotHeld
	}
	h := ks.find(token)
	if h == nil {
		return out, ErrNotHeld
	}
	h.deadline = now.UnixNano() + int64(lease)
	heap.Fix(&e.leases, int(h.heapIdx))
	return append(out, Event{Kind: Renewed, Key: key, Token: token, Lease: lease, Limit: ks.limit()}), nil
}

// ErrNotHeld is returned by Renew when the token does not hold the key.
var ErrNotHeld = errors.New("token does not hold the key")

// Cancel removes w from its queue, as when its connection closes. It
// reports whether w was waiting.
func (e *Engine) Cancel(w Waiter) bool {
	wt := e.waiters.get(w)
	if wt == nil {
		return false
	}
	e.leave(wt)
	return true
}

// Advance fires every lease and wait deadline due at now, in the order of
// their deadlines: an expired lease frees its holder's place and hands it
// on; an elapsed wait answers TimedOut.
func (e *Engine) Advance(now time.Time, out []Event) []Event {
	nanos := now.UnixNano()
	for {
		lt, wt := int64(-1), int64(-1)
		if e.leases.n > 0 && e.leases.top().deadline <= nanos {
			lt = e.leases.top().deadline
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
			w := e.waits[0].wt
			ks := w.ks
			// A ghost's too, Waiter.Conn GhostConn: nobody to answer,
			// but its place is gone, for the standbys as well.
			out = append(out, Event{Kind: TimedOut, Key: ks.key, Waiter: w.w, ID: e.waiterID(w), Queued: w.since})
			e.leave(w)
			// A ghost whose grace ended may have kept a place free:
			// the waiters behind it get it now.
			if ks.head() != nil && ks.nheld() < ks.limit() {
				out = e.fill(time.Unix(0, wt), ks, out)
			}
		default:
			h := e.leases.top()
			out = append(out, Event{Kind: Freed, Key: h.keyOf().key, Token: h.token, Expired: true})
			// The place is handed on as of its deadline, not as of
			// now, so a late Advance does not shorten the next lease.
			out = e.handOn(time.Unix(0, h.deadline), h, out)
		}
	}
}

// NextDeadline is the earliest instant at which Advance has work, if any.
func (e *Engine) NextDeadline() (time.Time, bool) {
	var d int64
	ok := false
	if e.leases.n > 0 {
		d, ok = e.leases.top().deadline, true
	}
	if len(e.waits) > 0 && (!ok || e.waits[0].deadline < d) {
		d, ok = e.waits[0].deadline, true
	}
	return time.Unix(0, d), ok
}

// DropWaiters removes every waiter and returns them with their keys, as
// when the node stops being active and its waiters must go elsewhere.
func (e *Engine) DropWaiters(out []Event) []Event {
	ws := make([]*waiter, 0, e.waiters.len())
	for wt := range e.waiters.all {
		ws = append(ws, wt)
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].since != ws[j].since {
			return ws[i].since < ws[j].since
		}
		return ws[i].arrival < ws[j].arrival
	})
	for _, wt := range ws {
		out = append(out, Event{Kind: TimedOut, Key: wt.ks.key, Waiter: wt.w, Queued: wt.since})
		e.leave(wt)
	}
	return out
}

// grant gives w a place of ks, which must have one free.
func (e *Engine) grant(now time.Time, ks *keyState, lease time.Duration, w Waiter, id string, out []Event) []Event {
	tok := e.nextToken(now)
	// hold, written out: the hot path of a lock makes no call for it.
	h := &ks.first
	if h.heapIdx >= 0 {
		h = e.joinCrowd(ks, tok)
	}
	h.token = tok
	h.id = id
	h.deadline = now.UnixNano() + int64(lease)
	heap.Push(&e.leases, h)
	return append(out, Event{Kind: Granted, Key: ks.key, Token: tok, Lease: lease, Waiter: w, Limit: ks.limit(), ID: id})
}

// handOn frees the place of h and grants it to the head of its key's
// queue, if any: one place, one waiter. A key never has more holders than
// its limit, so the place is there to give.
func (e *Engine) handOn(now time.Time, h *holder, out []Event) []Event {
	ks := h.keyOf()
	// unhold, written out, as hold is in grant.
	if h.heapIdx >= 0 {
		heap.Remove(&e.leases, int(h.heapIdx))
	}
	if h != &ks.first {
		e.leaveCrowd(h)
	}
	if wt := ks.head(); wt != nil {
		if wt.w.Conn == GhostConn {
			return out // the place is kept for the ghost (AddGhost)
		}
		w, lease, id, since := wt.w, wt.lease, e.waiterID(wt), wt.since
		e.unlink(wt)
		out = e.grant(now, ks, lease, w, id, out)
		out[len(out)-1].Queued = since
		if ks.head() != nil && ks.nheld() < ks.limit() {
			out = e.fill(now, ks, out)
		}
		return out
	}
	if ks.first.heapIdx < 0 {
		e.dropKey(ks)
	}
	return out
}

// fill grants the free places of ks to its queue, in order. Only
// replication frees places under a queue without handing them on
// (ApplyFree, ApplyHeld raising the limit), and a standby has no queue:
// fill is there so that the engine stays right if one ever has.
func (e *Engine) fill(now time.Time, ks *keyState, out []Event) []Event {
	for ks.head() != nil && ks.nheld() < ks.limit() {
		wt := ks.head()
		if wt.w.Conn == GhostConn {
			return out // kept for the ghost
		}
		w, lease, id, since := wt.w, wt.lease, e.waiterID(wt), wt.since
		e.unlink(wt)
		out = e.grant(now, ks, lease, w, id, out)
		out[len(out)-1].Queued = since
	}
	return out
}

// nheld counts the holders of ks.
func (ks *keyState) nheld() int {
	n := 0
	if ks.first.heapIdx >= 0 {
		n = 1
	}
	if ks.ext != nil {
		n += len(ks.ext.more)
	}
	return n
}

// head is the first waiter of ks, nil if none.
func (ks *keyState) head() *waiter {
	if ks.ext == nil {
		return nil
	}
	return ks.ext.head
}

// nwait counts the waiters of ks.
func (ks *keyState) nwait() int {
	if ks.ext == nil {
		return 0
	}
	return ks.ext.nwait
}

// crowd is the crowd of ks, nil if it has none.
func (ks *keyState) crowd() *crowd {
	if ks.ext == nil {
		return nil
	}
	return &ks.ext.more
}

// extra returns the extra of ks, adding one if it has none.
func (e *Engine) extra(ks *keyState) *keyExtra {
	if ks.ext == nil {
		ks.ext = &keyExtra{limit: 1}
	}
	return ks.ext
}

// limit is how many may hold ks at once.
func (ks *keyState) limit() int {
	if ks.ext == nil {
		return 1
	}
	return ks.ext.limit
}

// setLimit makes limit the limit of ks: a key without an extra is a
// lock, so a key of another limit needs one.
func (ks *keyState) setLimit(limit int) {
	if ks.ext == nil {
		if limit == 1 {
			return
		}
		ks.ext = &keyExtra{}
	}
	ks.ext.limit = limit
}

// find returns the holder of ks with token, nil if none. It is small
// enough to inline, so that a lock pays no call to find its holder.
func (ks *keyState) find(token uint64) *holder {
	if ks.first.token == token && ks.first.heapIdx >= 0 {
		return &ks.first
	}
	return ks.crowd().find(token)
}

// holders yields the holders of ks in token order, which is grant order.
func (ks *keyState) holders(yield func(*holder) bool) {
	first := ks.first.heapIdx >= 0
	if ks.ext != nil {
		for _, h := range ks.ext.more {
			if first && ks.first.token < h.token {
				if !yield(&ks.first) {
					return
				}
				first = false
			}
			if !yield(h) {
				return
			}
		}
	}
	if first {
		yield(&ks.first)
	}
}

func byToken(h *holder, token uint64) int { return cmp.Compare(h.token, token) }

// hold adds a holder of ks with token until deadline: in the first place
// if it is free, else in the crowd.
func (e *Engine) hold(ks *keyState, token uint64, deadline int64) *holder {
	h := &ks.first
	if h.heapIdx >= 0 {
		h = e.joinCrowd(ks, token)
	}
	h.token = token
	h.deadline = deadline
	heap.Push(&e.leases, h)
	return h
}

// joinCrowd adds a holder with token to the crowd of ks.
func (e *Engine) joinCrowd(ks *keyState, token uint64) *holder {
	var ch *crowdHolder
	if n := len(e.freeHold); n > 0 {
		ch = e.freeHold[n-1]
		e.freeHold = e.freeHold[:n-1]
	} else {
		ch = new(crowdHolder)
	}
	*ch = crowdHolder{holder: holder{token: token, heapIdx: -1, idx: -1}, ks: ks}
	e.extra(ks).more.add(&ch.holder)
	return &ch.holder
}

// unhold removes h from the lease heap and from its key, which it leaves
// in place even when nothing holds or waits on it any more.
func (e *Engine) unhold(h *holder) {
	if h.heapIdx >= 0 {
		heap.Remove(&e.leases, int(h.heapIdx))
	}
	if h.idx < 0 {
		e.leaveCrowd(h)
	}
}

// leaveCrowd removes h, out of the lease heap, from the crowd of its key.
func (e *Engine) leaveCrowd(h *holder) {
	ch := (*crowdHolder)(unsafe.Pointer(h))
	ch.ks.ext.more.remove(h)
	*ch = crowdHolder{holder: holder{heapIdx: -1, idx: -1}}
	if len(e.freeHold) < 4096 {
		e.freeHold = append(e.freeHold, ch)
	}
}

// retoken gives h another token, keeping the crowd in token order.
func (ks *keyState) retoken(h *holder, token uint64) {
	if h == &ks.first {
		h.token = token
		return
	}
	ks.ext.more.remove(h)
	h.token = token
	ks.ext.more.add(h)
}

// find returns the holder with token, nil if none; c may be nil.
func (c *crowd) find(token uint64) *holder {
	if c == nil {
		return nil
	}
	if i, ok := slices.BinarySearchFunc(*c, token, byToken); ok {
		return (*c)[i]
	}
	return nil
}

func (c *crowd) add(h *holder) {
	i, _ := slices.BinarySearchFunc(*c, h.token, byToken)
	*c = slices.Insert(*c, i, h)
}

func (c *crowd) remove(h *holder) {
	i, _ := slices.BinarySearchFunc(*c, h.token, byToken)
	*c = slices.Delete(*c, i, i+1)
}

func (e *Engine) unlink(wt *waiter) {
	x := wt.ks.ext
	if wt.prev == nil {
		x.head = wt.next
	} else {
		wt.prev.next = wt.next
	}
	if wt.next == nil {
		x.tail = wt.prev
	} else {
		wt.next.prev = wt.prev
	}
	x.nwait--
	if wt.heapIdx >= 0 {
		heap.Remove(&e.waits, int(wt.heapIdx))
	}
	e.waiters.remove(wt)
	if len(e.ghostWait) > 0 {
		delete(e.ghostWait, wt)
	}
	if id := e.waiterID(wt); id != "" {
		if e.byID[id] == wt {
			delete(e.byID, id)
		}
		delete(e.idOf, wt)
		e.byID = shrinkMap(e.byID, &e.byIDPeak)
		e.idOf = shrinkMap(e.idOf, &e.idOfPeak)
	}
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

func (e *Engine) newKey(key string, limit int) *keyState {
	var ks *keyState
	if n := len(e.freeKeys); n > 0 {
		ks = e.freeKeys[n-1]
		e.freeKeys = e.freeKeys[:n-1]
	} else {
		ks = new(keyState)
	}
	// Field by field, on a keyState as new or as dropKey left it: a
	// literal would be built in a temporary and copied.
	ks.key = key
	ks.first.heapIdx = -1
	ks.first.idx = int32(e.all.len())
	ks.setLimit(limit)
	e.all.push(ks)
	e.index(ks)
	return ks
}

func (e *Engine) dropKey(ks *keyState) {
	// Only a key still in e.all (not dropped already) is dropped; the
	// slice answers that without hashing the key.
	if ks.first.heapIdx >= 0 || ks.ext != nil && (len(ks.ext.more) > 0 || ks.ext.nwait > 0) || int(ks.first.idx) >= e.all.len() || *e.all.at(int(ks.first.idx)) != ks {
		return
	}
	// The last key fills the hole, so that a key's index only ever
	// decreases while it stays: Scan depends on it.
	last := *e.all.at(e.all.len() - 1)
	e.unindex(ks, last)
	e.all.pop()
	if last != ks {
		*e.all.at(int(ks.first.idx)) = last
		last.first.idx = ks.first.idx
	}
	e.shrinkIndex()
	// An empty crowd stays for the next key to use this keyState, so a
	// semaphore that comes and goes does not allocate one each time.
	ext := ks.ext
	if ext != nil {
		if cap(ext.more) > maxKeptCrowd {
			ext = nil
		} else {
			*ext = keyExtra{more: ext.more[:0]}
		}
	}
	*ks = keyState{}
	ks.first.heapIdx = -1
	ks.ext = ext
	if len(e.freeKeys) < 4096 {
		e.freeKeys = append(e.freeKeys, ks)
	}
}

// waiterID is the id of wt's acquire, "" when it had none.
func (e *Engine) waiterID(wt *waiter) string {
	if len(e.idOf) == 0 {
		return ""
	}
	return e.idOf[wt]
}

func (e *Engine) newWaiter() *waiter {
	if n := len(e.freeWait); n > 0 {
		wt := e.freeWait[n-1]
		e.freeWait = e.freeWait[:n-1]
		return wt
	}
	return new(waiter)
}

// shrink gives s a smaller array once it uses less than a quarter of a
// large one: after a million keys come and go, the slices that listed
// them do not keep their peak for the life of the process.
func shrink[T any](s []T) []T {
	if cap(s) <= 1024 || len(s) >= cap(s)/4 {
		return s
	}
	return append(make([]T, 0, 2*len(s)), s...)
}

// shrinkMap gives m a smaller table once it holds less than an eighth
// of the peak it grew to, which it then becomes; a Go map never gives
// back the room it grew. It returns m, or its copy.
func shrinkMap[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if *peak <= 1024 || len(m) >= *peak/8 {
		return m
	}
	small := make(map[K]V, len(m))
	for k, v := range m {
		small[k] = v
	}
	*peak = len(m)
	return small
}

// leaseHeap is the holders by lease end, a binary heap in chunks.
type leaseHeap struct{ chunks[*holder] }

func (h *leaseHeap) top() *holder       { return h.c[0][0] }
func (h *leaseHeap) Len() int           { return h.n }
func (h *leaseHeap) Less(i, j int) bool { return (*h.at(i)).deadline < (*h.at(j)).deadline }
func (h *leaseHeap) Swap(i, j int) {
	a, b := h.at(i), h.at(j)
	*a, *b = *b, *a
	(*a).heapIdx = int32(i)
	(*b).heapIdx = int32(j)
}
func (h *leaseHeap) Push(x any) {
	hd := x.(*holder)
	hd.heapIdx = int32(h.n)
	h.push(hd)
}
func (h *leaseHeap) Pop() any {
	hd := h.pop()
	hd.heapIdx = -1
	return hd
}

// waitEntry is a finite wait in the wait heap: its deadline beside its
// waiter, so that the waiters that wait forever, the most, do not carry
// one.
type waitEntry struct {
	deadline int64 // wait end, unix nanoseconds
	wt       *waiter
}

type waitHeap []waitEntry

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].wt.heapIdx = int32(i)
	h[j].wt.heapIdx = int32(j)
}

// Push is heap.Interface's; the engine pushes with push, which does not
// box the entry.
func (h *waitHeap) Push(x any) { h.push(x.(waitEntry)) }

func (h *waitHeap) push(we waitEntry) {
	we.wt.heapIdx = int32(len(*h))
	*h = append(*h, we)
	heap.Fix(h, len(*h)-1)
}

// Pop returns nil: heap.Remove's callers here do not use it, and a
// waitEntry returned as an any would be allocated.
func (h *waitHeap) Pop() any {
	old := *h
	old[len(old)-1].wt.heapIdx = -1
	old[len(old)-1] = waitEntry{}
	*h = shrink(old[:len(old)-1])
	return nil
}
