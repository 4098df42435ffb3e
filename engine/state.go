package engine

import (
	"container/heap"
	"math"
	"sort"
	"time"
)

// nextToken issues the next token: larger than every token issued or
// observed before.
func (e *Engine) nextToken(now time.Time) uint64 {
	e.counter++
	if e.counter > counterMax {
		e.epoch = max(e.epoch+1, uint64(max(now.UnixMilli(), 1)))
		e.counter = 1
	}
	tok := e.epoch<<CounterBits | e.counter<<NodeBits | uint64(e.cfg.Node)
	e.last = tok
	if tok > e.seen {
		e.seen = tok
	}
	return tok
}

// LastToken is the highest token this engine has issued, 0 if none.
func (e *Engine) LastToken() uint64 { return e.last }

// HighWater is the highest token this engine knows of, issued here or
// observed from elsewhere.
func (e *Engine) HighWater() uint64 { return e.seen }

// Observe records a token issued elsewhere (by a previous or a competing
// active). If it is above every token issued here and belongs to this
// engine's epoch or a later one, the epoch moves past it, so every later
// token here is larger than it and than every other token of its epoch,
// seen or not. Tokens at or below the last one issued here (a standby
// echoing this node's own tokens) change nothing.
//
// Observe reports false, changing nothing, when the token's epoch is more
// than Config.MaxEpochAhead ahead of now: forged, or from a clock that is
// far ahead. Taking it would push every later token here past the wall
// clock (near 2^64, past wrapping). The caller logs it, with the sender.
func (e *Engine) Observe(now time.Time, token uint64) bool {
	if token>>CounterBits > uint64(max(now.UnixMilli(), 1))+uint64(e.cfg.MaxEpochAhead/time.Millisecond) {
		return false
	}
	if token > e.seen {
		e.seen = token
	}
	if token > e.last && token>>CounterBits >= e.epoch {
		e.epoch = max(token>>CounterBits+1, uint64(max(now.UnixMilli(), 1)))
		e.counter = 0
	}
	return true
}

// Succeed starts a new epoch above every token this engine has issued or
// observed. A node calls it when it becomes active, so that its tokens
// exceed those of the node it replaces, including tokens that node issued
// in its epoch after the last change that was replicated here.
func (e *Engine) Succeed(now time.Time) {
	e.epoch = max(e.epoch+1, e.seen>>CounterBits+1, uint64(max(now.UnixMilli(), 1)))
	e.counter = 0
}

// Holder is one held key, as listed, snapshotted and replicated. LeaseLeft
// is relative, never an instant, because clocks differ between machines.
type Holder struct {
	Key       string
	Token     uint64
	LeaseLeft time.Duration
}

// WaiterInfo is one queued waiter, as listed for inspection.
type WaiterInfo struct {
	Waiter Waiter
	Waited time.Duration
	Lease  time.Duration
	// WaitLeft is how long it will still wait; 0 means forever.
	WaitLeft time.Duration
}

// Inspect returns key's holder (ok false when free) and its waiters in
// queue order.
func (e *Engine) Inspect(now time.Time, key string) (h Holder, held bool, ws []WaiterInfo) {
	ks := e.keys[key]
	if ks == nil {
		return Holder{Key: key}, false, nil
	}
	nanos := now.UnixNano()
	if ks.held {
		h = Holder{Key: key, Token: ks.token, LeaseLeft: time.Duration(max(ks.deadline-nanos, 0))}
	} else {
		h = Holder{Key: key}
	}
	for wt := ks.head; wt != nil; wt = wt.next {
		wi := WaiterInfo{Waiter: wt.w, Waited: time.Duration(max(nanos-wt.since, 0)), Lease: wt.lease}
		if wt.deadline != 0 {
			wi.WaitLeft = time.Duration(max(wt.deadline-nanos, 1))
		}
		ws = append(ws, wi)
	}
	return h, ks.held, ws
}

// Keys returns the keys held or waited on that match, sorted, at most
// limit of them, with the total number that matched. It visits and sorts
// every key in one call, which takes tens of milliseconds with a million
// keys; Scan visits them a slice at a time.
func (e *Engine) Keys(match func(string) bool, limit int) ([]string, int) {
	var out []string
	total := 0
	for k := range e.keys {
		if match(k) {
			total++
			out = append(out, k)
		}
	}
	sort.Strings(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, total
}

// Stats counts the keys held or waited on, and the waiters.
func (e *Engine) Stats() (keys, waiters int) { return len(e.keys), len(e.waiters) }

// Held counts the keys held.
func (e *Engine) Held() int { return len(e.leases) }

// ScanStart is the cursor that begins a Scan.
const ScanStart = math.MaxInt

// Scan visits at most n keys held or waited on (at least one, if any are
// left), from cursor down, calling fn with the key's holder: h.Key is the
// key; held reports whether it is held, and then h.Token and h.LeaseLeft
// are as of now. Keys waited on but not held are visited with held false.
// Like Inspect and Snapshot, Scan fires no deadline (call Advance first);
// fn must not call the engine.
//
// Scan returns the cursor for the next call, 0 when the scan is done. The
// caller may change the engine between calls: a key held or waited on
// during the whole scan is visited at least once; a key may be visited
// more than once; a key added during the scan may or may not be visited.
func (e *Engine) Scan(now time.Time, cursor, n int, fn func(h Holder, held bool)) int {
	// Why a key present during the whole scan is never skipped. The
	// cursor splits e.all into [0, cursor), not visited yet, and the
	// rest, visited or added since the scan began. e.all changes in two
	// ways only (newKey, dropKey): a new key is appended at the end, and
	// a removed key's hole is filled by the last key. So while a key
	// stays its index never increases, and a key below the cursor stays
	// below it, whatever the caller does between calls. The one key that
	// moves, the last, moves down: from the visited part into a hole
	// below the cursor (and is visited again), or, when removals have
	// shrunk e.all below the cursor, from below it to further below.
	// Clamping the cursor to the length skips nothing, as every key is
	// below the length. Each call visits the keys just below the cursor
	// and moves the cursor down past them, so when it reaches 0, every
	// key that was below it all along has been visited.
	i := max(min(cursor, len(e.all)), 0)
	nanos := now.UnixNano()
	for stop := max(i-max(n, 1), 0); i > stop; {
		i--
		ks := e.all[i]
		if ks.held {
			fn(Holder{Key: ks.key, Token: ks.token, LeaseLeft: time.Duration(max(ks.deadline-nanos, 0))}, true)
		} else {
			fn(Holder{Key: ks.key}, false)
		}
	}
	return i
}

// Snapshot is the whole replicable state of an engine: its holders and
// the token high-water mark. Waiters are not in it: a waiter belongs to a
// connection of the node it asked, and re-sends when that node goes.
type Snapshot struct {
	Token   uint64
	Holders []Holder
}

// Snapshot returns the state at now, holders sorted by key. It copies and
// sorts every holder in one call, which takes tens of milliseconds with a
// million keys; Scan visits them a slice at a time.
func (e *Engine) Snapshot(now time.Time) Snapshot {
	nanos := now.UnixNano()
	s := Snapshot{Token: e.seen, Holders: make([]Holder, 0, len(e.leases))}
	for _, ks := range e.leases {
		s.Holders = append(s.Holders, Holder{Key: ks.key, Token: ks.token, LeaseLeft: time.Duration(max(ks.deadline-nanos, 0))})
	}
	sort.Slice(s.Holders, func(i, j int) bool { return s.Holders[i].Key < s.Holders[j].Key })
	return s
}

// Restore replaces every holder with those of s, as a standby does when it
// (re)joins the stream, and observes s.Token (ignored, as by Observe, when
// more than Config.MaxEpochAhead ahead). Waiters are dropped and
// returned as TimedOut events appended to out; a standby has none.
func (e *Engine) Restore(now time.Time, s Snapshot, out []Event) []Event {
	out = e.DropWaiters(out)
	for len(e.leases) > 0 {
		ks := heap.Pop(&e.leases).(*keyState)
		ks.held = false
		e.dropKey(ks)
	}
	for _, h := range s.Holders {
		e.ApplyHeld(now, h.Key, h.Token, h.LeaseLeft)
	}
	e.Observe(now, s.Token)
	return out
}

// ApplyHeld records that key is held by token with leaseLeft to run, as
// replicated from the active. It replaces any earlier holder of key.
func (e *Engine) ApplyHeld(now time.Time, key string, token uint64, leaseLeft time.Duration) {
	if token > e.seen {
		e.seen = token
	}
	ks := e.keys[key]
	if ks == nil {
		ks = e.newKey(key)
	}
	ks.token = token
	ks.lease = leaseLeft
	ks.deadline = now.UnixNano() + int64(leaseLeft)
	if ks.held {
		heap.Fix(&e.leases, ks.heapIdx)
		return
	}
	ks.held = true
	heap.Push(&e.leases, ks)
}

// ApplyFree records that token no longer holds key, as replicated from the
// active. A stale record (another token holds key now) changes nothing.
func (e *Engine) ApplyFree(key string, token uint64) {
	ks := e.keys[key]
	if ks == nil || !ks.held || ks.token != token {
		return
	}
	ks.held = false
	heap.Remove(&e.leases, ks.heapIdx)
	e.dropKey(ks)
}
