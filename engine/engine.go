// Package engine owns the lock state of one lockd node: keys, their
// holders, modes and leases, the FIFO queue of waiters per key, the sets
// of keys taken all or none, wait limits and the fencing-token counter.
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
// is granted at once while the key has fewer holders than its limit and
// nobody waits; otherwise it waits. Each holder that goes, released or
// expired, frees one place, and the head of the queue takes it at once
// with a new token: one place, one waiter. So a release grants one
// waiter, and two leases that end at the same instant grant two, in
// queue order. The time rules above hold for every holder and every
// place: a waiter whose wait ends at the instant a place frees has timed
// out.
//
// # Read/write locks
//
// A lock (limit 1) is taken Exclusive, by one writer, or Shared, by any
// number of readers at once (AcquireSet with a Shared key): never a
// writer beside anyone, never a reader beside a writer. Each grant has
// its own token, readers' too. The queue stays one FIFO queue, served in
// order: a writer is granted only at its head with nothing held; readers
// are granted while no writer holds, and all the readers at the head of
// the queue are granted together, up to the first writer. So a writer
// queued behind readers is never overtaken by a reader that comes after
// it (the reader waits behind the writer, even while readers hold), and
// when the writer goes, the readers queued behind it are granted at once,
// together: neither side starves. A lock's holders are bounded by
// Config.MaxLimit as a semaphore's places are; a reader past it waits its
// turn. A semaphore's places are all alike: a Shared acquire of a key of
// limit above 1 is refused (ErrSharedLimit). A key's mode is part of its
// state, in every event, holder and waiter listed, snapshotted and
// replicated (Event.Mode, Holder.Mode, WaiterInfo.Mode); the try-lock,
// ids, ghosts, renewals, releases, expiry, the caps and the memory of
// releases treat a reader as any holder or waiter.
//
// # Sets of keys
//
// One acquire may take up to MaxSetKeys keys at once, all or none
// (AcquireSet), each in its own mode and with its own limit: the set is
// granted, in one batch of events, when every one of its keys admits it,
// and holds none of them until then. It waits in the queue of each of its
// keys, joined in one call, so two requests over the same keys stand in
// the same order in every queue they share, and a request waits only for
// holders (who wait for nothing) and for requests that came before it:
// no cycle, hence no deadlock, whatever the order of the keys. A set
// that one key admits but another does not yet keeps its place in the
// first: what it needs there (a writer's whole key, a reader's room, a
// semaphore's place) goes to nobody behind it. Fair, at the price of a
// key that may stay free while the set waits for its others. Once
// granted, each key is held on its own, by its own token and lease; the
// set's id rides on every event and listing of its holders, so that the
// caller can tell a set broken by the loss of one key. The AcquireSet doc
// argues both properties at length.
//
// # Admission
//
// One rule serves every queue (admits): a key admits the entries at the
// head of its queue in order, each while its holders and the entries
// admitted ahead of it leave room (a writer: nothing at all; a reader:
// no writer held or ahead, fewer than MaxLimit; a semaphore's place:
// fewer than its limit), and stops at the first it does not. An entry
// taken alone that its key admits is granted; a set's is granted when all
// its keys admit it. Every call that lets anyone through settles the keys
// it touched, so between calls no waiter is admitted by all its keys.
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
	// Granted: Waiter now holds Key with Token for Lease, in Mode, as
	// one of at most Limit holders (a lock's readers: Config.MaxLimit).
	// A set's keys come as one batch (SetSize). Replicate it.
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
	// Mode is how Key is held (Granted, Freed, Renewed) or was asked for
	// (TimedOut): a replica needs it to hold the key as the active does.
	Mode Mode
	// Place is, on Granted and Renewed of a semaphore's holder, its
	// place, 1 to Limit; 0 otherwise.
	Place int32
	Key   string
	Token uint64
	Lease time.Duration
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
	// Set is, on Granted, Freed and Renewed of a holder granted as one
	// key of a set (AcquireSet), the set's id: the token of its first
	// key's grant, the same on every key of the set. 0 for a key taken
	// alone.
	Set uint64
	// SetSize is, on Granted and TimedOut of a set, how many keys it
	// has: the set's answer comes as SetSize adjacent events of the same
	// Kind and Waiter, one per key in the order asked, to be told (and
	// replicated) as one. 0 for a key taken alone.
	SetSize int
	// Queued is when Waiter joined the queue, in unix nanoseconds, on the
	// Granted and TimedOut of a waiter; 0 on an answer given at once.
	Queued int64
	// Value is, on Granted and Renewed, the holder's value, "" for none.
	Value string
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
// it, so that a lock (limit 1) costs one allocation; only a second
// holder at once, a waiter, a reader, or a limit other than 1 allocates
// the key's extra. A held lock is the common case and the one a million
// keys are made of: 64 bytes, where the queue and the crowd inline, and
// a pointer back from the holder, would take 128.
//
// first is the first field: a first holder finds its key at its own
// address (holder.keyOf), with no pointer back.
type keyState struct {
	first holder // free when first.heapIdx is -1
	key   string
	ext   *keyExtra // the crowd, the queue, a limit, a mode; nil for a lock that has none
}

// keyExtra is what a key needs beyond one holder: the holders beside
// the first, the queue, its limit when it is not 1, and its mode when
// readers hold it.
type keyExtra struct {
	more  crowd // the holders beside first
	head  *waiter
	tail  *waiter
	nwait int32
	// nready counts the waiters at the head of the queue that are
	// admitted here (see admits) but not granted: members of sets that
	// wait for another of their keys. They are always the first nready.
	nready int32
	limit  int32
	mode   Mode // how the holders hold the key, when it has any
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

// waiter is one queued acquire, or one key's place of a set's: 64 bytes,
// one size class, where it would take 96 with its deadline in it and a
// 64-bit count of arrivals, and 80 with its acquire's id in it (most
// acquires have none: the id is in Engine.idOf). The deadline of a finite wait is
// kept in the wait heap, beside its waiter; a set's, beside its first
// member.
type waiter struct {
	w       Waiter
	ks      *keyState
	prev    *waiter
	next    *waiter
	lease   time.Duration
	since   int64 // when it was queued, unix nanoseconds
	heapIdx int32 // position in the wait heap, -1 when waiting forever
	// arrival is the order of arrival in the low 31 bits, wrapping,
	// which breaks ties between equal since; the top bit is
	// waiterShared. A mode of its own would take the waiter to 80 bytes.
	arrival uint32
}

// waiterShared marks a waiter that asks for its key Shared.
const waiterShared = 1 << 31

// mode is how wt asks for its key.
func (wt *waiter) mode() Mode {
	if wt.arrival&waiterShared != 0 {
		return Shared
	}
	return Exclusive
}

// order is wt's order of arrival, without its mode.
func (wt *waiter) order() uint32 { return wt.arrival &^ waiterShared }

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
	// firing is the deadline Advance is firing, unix nanoseconds; 0
	// outside it (waitEnds).
	firing int64
	// places counts the places taken in queues over all keys: a set
	// waiting on three keys takes three.
	places int
	// waitSet maps each member of a set that waits to its set, and
	// heldSet each holder granted as one key of a set to the set's id
	// (sets.go). Both are empty, and cost a length check, while no set
	// is asked for.
	waitSet map[*waiter]*lockSet
	heldSet map[*holder]uint64
	// nwaitSet and nheldSet are their lengths, which the hot path reads
	// for a field's load rather than a map header's; and the most
	// entries each has had since it was last made anew (shrinkMap).
	nwaitSet    int
	nheldSet    int
	waitSetPeak int
	heldSetPeak int
	freeSets    []*lockSet
	// holdInfo holds the holders' places and values (values.go), and
	// waitValue the values of the waiters' acquires; both are empty
	// while no semaphore is held and no acquire carried a value.
	holdInfo     map[*holder]holdInfo
	nholdInfo    int
	holdInfoPeak int
	waitValue    map[*waiter]string
	// planted is a bug the model tests plant to show that they catch it
	// (bugs_test.go); always 0 outside them.
	planted bug
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
// is how many may hold key at once, 1 (or 0) for a lock, which it takes
// as its writer (Exclusive). If the key admits it (see admits: a free
// place, nobody waiting ahead), the grant is appended to out at once;
// otherwise w joins the tail of the key's queue and is answered by a
// later call (Granted or TimedOut). wait 0 waits forever. AcquireSet
// takes a lock as a reader, or several keys at once.
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
	return e.acquire(now, key, limit, Exclusive, lease, wait, false, id, "", w, out)
}

// TryAcquireID is AcquireID that never queues, the try-lock: w is granted
// at once if the key admits it (or its id holds a place already), and
// answered TimedOut at once otherwise, in out. A place kept for a waiter
// of the previous active (see AddGhost) counts as taken.
func (e *Engine) TryAcquireID(now time.Time, key string, limit int, lease time.Duration, id string, w Waiter, out []Event) ([]Event, error) {
	return e.acquire(now, key, limit, Exclusive, lease, 0, true, id, "", w, out)
}

func (e *Engine) acquire(now time.Time, key string, limit int, mode Mode, lease, wait time.Duration, try bool, id, value string, w Waiter, out []Event) ([]Event, error) {
	out = e.Advance(now, out)
	// Compared here, worded in a call only when out of range: the hot
	// path of a grant makes no call for them.
	if lease <= 0 || lease > e.cfg.MaxLease || wait < 0 || wait > e.cfg.MaxWait {
		return out, e.checkTimes(lease, wait)
	}
	// One comparison passes every limit in 1..MaxLimit; 0 is 1.
	if uint(limit-1) >= uint(e.cfg.MaxLimit) || mode != Exclusive {
		var err error
		if limit, err = e.checkLimit(key, limit, mode); err != nil {
			return out, err
		}
	}
	if e.waiters.get(w) != nil {
		return out, fmt.Errorf("%w: request %d of connection %d is already waiting", ErrDuplicateWaitr, w.Seq, w.Conn)
	}
	ks := e.lookup(key)
	if ks == nil {
		if e.all.len() >= e.cfg.MaxKeys {
			return out, fmt.Errorf("%w: the node's limit of %s held or waited on at once is reached; release some first", ErrTooManyKeys, plural(e.cfg.MaxKeys, "key"))
		}
		return e.grant(now, e.newKey(key, limit), mode, lease, w, id, value, out), nil
	}
	if ks.limit() != limit {
		return out, errLimitMismatch(key, ks.limit(), limit)
	}
	nanos := now.UnixNano()
	if id != "" {
		if out, ok := e.again(now, ks, lease, id, value, try, w, out); ok {
			return out, nil
		}
	}
	if e.admitsNew(ks, mode) {
		return e.grant(now, ks, mode, lease, w, id, value, out), nil
	}
	if try {
		return append(out, Event{Kind: TimedOut, Key: key, Waiter: w, Mode: mode}), nil
	}
	if ks.nwait() >= e.cfg.MaxWaitersPerKey {
		return out, errQueueFull(e.cfg.MaxWaitersPerKey)
	}
	if e.places >= e.cfg.MaxWaiters {
		return out, errTooManyWaiters(e.cfg.MaxWaiters)
	}
	wt := e.newWaiter()
	*wt = waiter{w: w, ks: ks, lease: lease, since: nanos, heapIdx: -1, arrival: e.nextArrival(mode)}
	if id != "" {
		e.nameWaiter(wt, id)
	}
	if value != "" {
		e.setWaiterValue(wt, value)
	}
	if wait > 0 {
		e.waits.push(waitEntry{deadline: nanos + int64(wait), wt: wt})
	}
	e.link(ks, wt)
	e.waiters.add(wt)
	return out, nil
}

// checkTimes refuses a lease or a wait out of range.
func (e *Engine) checkTimes(lease, wait time.Duration) error {
	if lease <= 0 || lease > e.cfg.MaxLease {
		return fmt.Errorf("%w: lease must be more than 0 and at most %g seconds (the node's longest lease)", ErrLeaseRange, e.cfg.MaxLease.Seconds())
	}
	if wait < 0 || wait > e.cfg.MaxWait {
		return fmt.Errorf("%w: wait must be 0 (forever) or at most %g seconds (the node's longest wait)", ErrWaitRange, e.cfg.MaxWait.Seconds())
	}
	return nil
}

// checkLimit returns the limit an acquire of key in mode asks for, 0
// taken as 1, or why it is refused: a limit out of range, or a reader
// of a semaphore.
func (e *Engine) checkLimit(key string, limit int, mode Mode) (int, error) {
	if limit == 0 {
		limit = 1
	}
	if limit < 1 || limit > e.cfg.MaxLimit {
		return 0, fmt.Errorf("%w: limit %d; a key allows 1 (a lock, the default) to %d holders at once (the node's largest limit)", ErrLimitRange, limit, e.cfg.MaxLimit)
	}
	if mode > Shared {
		return 0, fmt.Errorf("%w: key %q asked in mode %d, neither exclusive nor shared", ErrSharedLimit, key, mode)
	}
	if mode == Shared && limit != 1 {
		return 0, fmt.Errorf("%w: key %q asked shared with limit %d; readers share a lock (limit 1), while a semaphore's places are all alike", ErrSharedLimit, key, limit)
	}
	return limit, nil
}

func errLimitMismatch(key string, has, asked int) error {
	return fmt.Errorf("%w: key %q allows %s; this acquire asked for %d: every acquire of it must ask for that limit", ErrLimitMismatch, key, pluralHolders(has), asked)
}

func errQueueFull(n int) error {
	return fmt.Errorf("%w: the node's limit of %s per key is reached; retry later", ErrQueueFull, plural(n, "waiter"))
}

func errTooManyWaiters(n int) error {
	return fmt.Errorf("%w: the node's limit of %s over all keys is reached; retry later", ErrTooManyWaiters, plural(n, "waiter"))
}

// nextArrival numbers a waiter that arrives now and asks for mode.
func (e *Engine) nextArrival(mode Mode) uint32 {
	e.arrivals++
	a := e.arrivals &^ waiterShared
	if mode == Shared {
		a |= waiterShared
	}
	return a
}

// nameWaiter records that wt's acquire carried id.
func (e *Engine) nameWaiter(wt *waiter, id string) {
	if e.byID == nil {
		e.byID = make(map[string]*waiter)
		e.idOf = make(map[*waiter]string)
	}
	e.byID[id] = wt
	e.idOf[wt] = id
	e.byIDPeak = max(e.byIDPeak, len(e.byID))
	e.idOfPeak = max(e.idOfPeak, len(e.idOf))
}

// again serves an acquire whose id a holder or a waiter of ks already
// carries: it is a re-send of the same acquire. It reports false when
// neither does.
func (e *Engine) again(now time.Time, ks *keyState, lease time.Duration, id, value string, try bool, w Waiter, out []Event) ([]Event, bool) {
	for h := range ks.holders {
		// A key of a set is the set's: a re-send of the set finds it
		// (againSet), one of its keys alone does not.
		if h.id == id && e.holderSet(h) == 0 {
			h.deadline = now.UnixNano() + int64(lease)
			heap.Fix(&e.leases, int(h.heapIdx))
			hi := e.infoOf(h)
			if value != "" && hi.value != value {
				hi.value = value
				e.setInfo(h, hi)
			}
			return append(out, Event{Kind: Granted, Key: ks.key, Token: h.token, Lease: lease, Waiter: w, Limit: ks.limit(), Mode: ks.mode(), Place: hi.place, Value: hi.value}), true
		}
	}
	wt := e.byID[id]
	if wt == nil || wt.ks != ks || try || e.setOf(wt) != nil {
		return out, false
	}
	if wt.w.Conn != GhostConn {
		out = append(out, Event{Kind: TimedOut, Key: ks.key, Waiter: wt.w, Mode: wt.mode(), Queued: wt.since})
	}
	e.waiters.remove(wt)
	wt.w, wt.lease = w, lease
	e.waiters.add(wt)
	e.setWaiterValue(wt, value)
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
		// The ghost held back the waiters behind it; its waiter may
		// pass, and they with it.
		out = e.settle(now, ks, out)
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
// waiter is granted. A ghost is never granted and never answered; it
// keeps every place behind it too (a reader behind a reader's ghost
// waits), for as short as the grace.
//
// A key that does not exist is created with limit; an id already queued
// or holding, or a key with another limit, adds nothing. AddGhostSet
// keeps the place of a reader, or of a set.
func (e *Engine) AddGhost(now time.Time, key string, limit int, id string, lease, waitLeft, grace time.Duration) bool {
	return e.AddGhostSet(now, []SetKey{{Key: key, Limit: limit}}, id, lease, waitLeft, grace)
}

// link puts wt at the tail of ks's queue: a waiter, a ghost, or a set's
// member. A waiter taken alone, and a set's first member, go in the
// table of waiters too (e.waiters.add).
func (e *Engine) link(ks *keyState, wt *waiter) {
	x := e.extra(ks)
	if x.tail == nil {
		x.head = wt
	} else {
		x.tail.next = wt
		wt.prev = x.tail
	}
	x.tail = wt
	x.nwait++
	e.places++
}

// QueuedID reports whether a waiter (or ghost) with id is queued.
func (e *Engine) QueuedID(id string) bool { return e.byID[id] != nil }

// Withdraw takes the waiter of key whose acquire carried id, and came on
// connection conn, out of the queue (X), and returns it; false when no
// such waiter waits (granted already, timed out, never queued, or
// another connection's). A set is withdrawn by any one of its keys, and
// leaves them all. The waiters its leaving lets through (readers behind
// a writer that leaves, a key a set kept for itself) are granted, in out.
//
// Like Cancel, it fires no deadline unless such a waiter waits.
func (e *Engine) Withdraw(now time.Time, key, id string, conn uint64, out []Event) ([]Event, Waiter, bool) {
	ok := func() bool {
		wt := e.byID[id]
		return wt != nil && wt.w.Conn == conn && e.waitsOn(wt, key)
	}
	if !ok() {
		return out, Waiter{}, false
	}
	out = e.Advance(now, out)
	if !ok() {
		return out, Waiter{}, false // its wait ran out first
	}
	wt := e.byID[id]
	w := wt.w
	return e.depart(now, wt, out), w, true
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
// to the waiters the key then admits: the head of its queue, or the
// readers at its head. It reports false, changing nothing,
// when token does not hold key (never did, or the lease expired). A
// release of a token that released key within ReleasedMemory (the same
// release sent again, its answer lost) reports true and changes nothing.
// A key of a set is released alone: the set's other keys stay held.
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
	out = append(out, Event{Kind: Freed, Key: key, Token: token, Mode: ks.mode(), Set: e.holderSet(h)})
	return e.handOn(now, h, out), true
}

// Renew gives the holder token of key a fresh lease counted from now. It
// returns ErrNotHeld when token does not hold key, and a range error when
// the lease is out of range. A key of a set is renewed alone.
func (e *Engine) Renew(now time.Time, key string, token uint64, lease time.Duration, out []Event) ([]Event, error) {
	return e.RenewValue(now, key, token, lease, "", false, out)
}

// ErrNotHeld is returned by Renew when the token does not hold the key.
var ErrNotHeld = errors.New("token does not hold the key")

// Cancel removes w from its queue, or a set w asked for from all of its
// queues, as when its connection closes. It reports whether w was
// waiting. The waiters its leaving lets through (readers behind a writer
// that leaves, a key a set kept for itself) are granted, in out.
//
// A Waiter that does not wait changes nothing, and fires no deadline: a
// node that is not active, whose engine must not expire what it
// replicates, may cancel the waiters of any connection that closes.
func (e *Engine) Cancel(now time.Time, w Waiter, out []Event) ([]Event, bool) {
	if e.waiters.get(w) == nil {
		return out, false
	}
	out = e.Advance(now, out)
	wt := e.waiters.get(w)
	if wt == nil {
		return out, false // its wait ran out first
	}
	return e.depart(now, wt, out), true
}

// Advance fires every lease and wait deadline due at now, in the order of
// their deadlines: an expired lease frees its holder's place and hands it
// on; an elapsed wait answers TimedOut (a set's, once for each of its
// keys), and lets through whom the waiter held back.
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
			e.firing = 0
			return out
		case wt >= 0 && (lt < 0 || wt <= lt):
			// A wait ending at the same instant as a lease times out
			// first: the waiter's wait was [since, deadline).
			w := e.waits[0].wt
			// A ghost's too, Waiter.Conn GhostConn: nobody to answer,
			// but its place is gone, for the standbys as well.
			out = e.timedOut(w, e.waiterID(w), out)
			// A ghost whose grace ended may have kept a place free, a
			// writer or a set the places behind them: the waiters
			// behind get them now.
			e.firing = wt
			out = e.depart(time.Unix(0, wt), w, out)
		default:
			h := e.leases.top()
			ks := h.keyOf()
			out = append(out, Event{Kind: Freed, Key: ks.key, Token: h.token, Expired: true, Mode: ks.mode(), Set: e.holderSet(h)})
			// The place is handed on as of its deadline, not as of
			// now, so a late Advance does not shorten the next lease.
			e.firing = h.deadline
			out = e.handOn(time.Unix(0, h.deadline), h, out)
		}
	}
}

// timedOut appends the TimedOut answer of wt, a waiter taken alone or a
// set's first member: one event for each key it waits on, with id.
func (e *Engine) timedOut(wt *waiter, id string, out []Event) []Event {
	s := e.setOf(wt)
	if s == nil {
		return append(out, Event{Kind: TimedOut, Key: wt.ks.key, Waiter: wt.w, Mode: wt.mode(), ID: id, Queued: wt.since})
	}
	for _, m := range s.members {
		out = append(out, Event{Kind: TimedOut, Key: m.ks.key, Waiter: wt.w, Mode: m.mode(), ID: id, SetSize: len(s.members), Queued: wt.since})
	}
	return out
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
// when the node stops being active and its waiters must go elsewhere:
// in order of arrival, a set as one TimedOut for each of its keys.
func (e *Engine) DropWaiters(out []Event) []Event {
	ws := make([]*waiter, 0, e.waiters.len())
	for wt := range e.waiters.all {
		ws = append(ws, wt)
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].since != ws[j].since {
			return ws[i].since < ws[j].since
		}
		return ws[i].order() < ws[j].order()
	})
	for _, wt := range ws {
		out = e.timedOut(wt, "", out)
		e.drop(wt)
	}
	return out
}

// grant gives w a place of ks in mode, which ks must admit.
func (e *Engine) grant(now time.Time, ks *keyState, mode Mode, lease time.Duration, w Waiter, id, value string, out []Event) []Event {
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
	e.setMode(ks, mode)
	var hi holdInfo
	if x := ks.ext; x != nil && x.limit > 1 || value != "" {
		hi = e.granted(ks, h, value)
	}
	return append(out, Event{Kind: Granted, Key: ks.key, Token: tok, Lease: lease, Waiter: w, Limit: ks.limit(), ID: id, Mode: mode, Place: hi.place, Value: hi.value})
}

// handOn frees the place of h and grants it on to the waiters its key
// then admits (settle).
func (e *Engine) handOn(now time.Time, h *holder, out []Event) []Event {
	ks := h.keyOf()
	// unhold, written out, as hold is in grant.
	if h.heapIdx >= 0 {
		heap.Remove(&e.leases, int(h.heapIdx))
	}
	if e.nheldSet > 0 {
		e.forgetHeldSet(h)
	}
	if e.nholdInfo > 0 {
		e.forgetInfo(h)
	}
	if h != &ks.first {
		e.leaveCrowd(h)
	}
	if wt := ks.head(); wt != nil {
		if e.nwaitSet > 0 || wt.mode() != Exclusive {
			return e.settle(now, ks, out)
		}
		// settle, written out for the hot path of a handoff: a queue
		// with no set in it, whose head is a lock's writer or a
		// semaphore's waiter. Nothing ahead of the head is admitted, so
		// it is while a place is free, and the next after it; a
		// lock's reader behind a writer never is.
		limit := int(ks.ext.limit)
		for wt != nil && wt.w.Conn != GhostConn && wt.mode() == Exclusive && ks.nheld() < limit && !e.waitEnds(wt, nil) {
			w, lease, id, value, since := wt.w, wt.lease, e.waiterID(wt), e.waiterValue(wt), wt.since
			e.unlink(wt)
			out = e.grant(now, ks, Exclusive, lease, w, id, value, out)
			out[len(out)-1].Queued = since
			if limit == 1 {
				break
			}
			wt = ks.head()
		}
		return out
	}
	if ks.first.heapIdx < 0 {
		e.dropKey(ks)
	}
	return out
}

// depart takes wt, a waiter taken alone or a set's first member, out of
// its queues, lets through, at now, the waiters it held back, and
// forgets the keys left neither held nor waited on.
func (e *Engine) depart(now time.Time, wt *waiter, out []Event) []Event {
	s := e.setOf(wt)
	if s == nil {
		ks := wt.ks
		e.unlink(wt)
		if e.planted&bugNoSettleOnLeave == 0 {
			out = e.settle(now, ks, out)
		}
		e.dropKey(ks)
		return out
	}
	var buf [MaxSetKeys]*keyState
	keys := s.keysOf(&buf)
	e.unlinkSet(s)
	for _, ks := range keys {
		if e.planted&bugNoSettleOnLeave == 0 {
			out = e.settle(now, ks, out)
		}
	}
	for _, ks := range keys {
		e.dropKey(ks)
	}
	return out
}

// drop takes wt, a waiter taken alone or a set's first member, out of
// its queues, letting nobody through: every waiter goes (DropWaiters).
func (e *Engine) drop(wt *waiter) {
	s := e.setOf(wt)
	if s == nil {
		e.leave(wt)
		return
	}
	var buf [MaxSetKeys]*keyState
	keys := s.keysOf(&buf)
	e.unlinkSet(s)
	for _, ks := range keys {
		e.dropKey(ks)
	}
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
	return int(ks.ext.nwait)
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
	return int(ks.ext.limit)
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
	ks.ext.limit = int32(limit)
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
	if e.nheldSet > 0 {
		e.forgetHeldSet(h)
	}
	if e.nholdInfo > 0 {
		e.forgetInfo(h)
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

// unlink takes wt, a waiter taken alone or a ghost, out of its queue and
// forgets it. Unlike dequeue it leaves the count of admitted set members
// alone, which wt, not a set's, is never in: a handoff's hot path.
func (e *Engine) unlink(wt *waiter) {
	wt.ks.ext.detach(wt)
	e.places--
	e.forget(wt)
}

// dequeue takes wt out of its key's queue.
func (e *Engine) dequeue(wt *waiter) {
	x := wt.ks.ext
	x.detach(wt)
	e.places--
	if e.nwaitSet > 0 && x.nready > 0 {
		e.unready(wt)
	}
}

// detach takes wt out of the queue's list; small enough to be inlined
// into both callers.
func (x *keyExtra) detach(wt *waiter) {
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
}

// unready counts wt, a set's member that leaves its queue, out of the
// admitted at its key's head, if it was.
func (e *Engine) unready(wt *waiter) {
	if s := e.setOf(wt); s != nil && s.isAdmitted(wt) {
		wt.ks.ext.nready--
	}
}

// forget drops what the engine keeps of wt beside its queue (its wait,
// its entry in the table of waiters, its id) and frees it for reuse: a
// waiter taken alone, a ghost, or a set's first member, out of its
// queue.
func (e *Engine) forget(wt *waiter) {
	if wt.heapIdx >= 0 {
		heap.Remove(&e.waits, int(wt.heapIdx))
	}
	e.waiters.remove(wt)
	if len(e.ghostWait) > 0 {
		delete(e.ghostWait, wt)
	}
	if len(e.waitValue) > 0 {
		delete(e.waitValue, wt)
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
