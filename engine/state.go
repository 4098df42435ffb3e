package engine

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
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

// Holder is one holder of a key, as listed, snapshotted and replicated: a
// key with three holders gives three. LeaseLeft is relative, never an
// instant, because clocks differ between machines. Limit is the key's
// limit, the same for all its holders; 0 is taken as 1 where a Holder is
// applied (Restore).
type Holder struct {
	Key       string
	Token     uint64
	LeaseLeft time.Duration
	Limit     int
	ID        string // the id of the acquire that got the place, "" when none
}

// WaiterInfo is one queued waiter, as listed for inspection.
type WaiterInfo struct {
	Waiter Waiter
	Waited time.Duration
	Lease  time.Duration
	// WaitLeft is how long it will still wait; 0 means forever.
	WaitLeft time.Duration
	ID       string // the id its acquire carried, "" when none
}

// InspectN returns every holder of key, in grant order (which is token
// order), and its first n waiters in queue order, counting them all; a
// key neither held nor waited on has neither. n bounds the copy: a Q answer lists some, and a key with 100k waiters would
// otherwise copy them all at each Q.
func (e *Engine) InspectN(now time.Time, key string, n int) (hs []Holder, ws []WaiterInfo, nwait int) {
	ks := e.lookup(key)
	if ks == nil {
		return nil, nil, 0
	}
	nanos := now.UnixNano()
	for h := range ks.holders {
		hs = append(hs, ks.holderInfo(h, nanos))
	}
	for wt := ks.head(); wt != nil && len(ws) < n; wt = wt.next {
		wi := WaiterInfo{Waiter: wt.w, Waited: time.Duration(max(nanos-wt.since, 0)), Lease: wt.lease, ID: e.waiterID(wt)}
		if wt.heapIdx >= 0 {
			wi.WaitLeft = time.Duration(max(e.waits[wt.heapIdx].deadline-nanos, 1))
		}
		ws = append(ws, wi)
	}
	return hs, ws, ks.nwait()
}

// Waiters calls fn for every waiter, key by key (in no particular but a
// deterministic order), each key's in queue order, with the key's limit.
// Ghosts (AddGhost) are listed too, with Waiter.Conn GhostConn. fn must
// not call the engine.
func (e *Engine) Waiters(now time.Time, fn func(key string, limit int, w WaiterInfo)) {
	nanos := now.UnixNano()
	for i := range e.all.len() {
		ks := *e.all.at(i)
		for wt := ks.head(); wt != nil; wt = wt.next {
			wi := WaiterInfo{Waiter: wt.w, Waited: time.Duration(max(nanos-wt.since, 0)), Lease: wt.lease, ID: e.waiterID(wt)}
			if wt.heapIdx >= 0 {
				wi.WaitLeft = time.Duration(max(e.waits[wt.heapIdx].deadline-nanos, 1))
			}
			if dl, ok := e.ghostWait[wt]; ok {
				wi.WaitLeft = 0
				if dl > 0 {
					wi.WaitLeft = time.Duration(max(dl-nanos, 1))
				}
			}
			fn(ks.key, ks.limit(), wi)
		}
	}
}

// WaiterID is the id of waiter w's acquire, "" when it had none or w
// does not wait.
func (e *Engine) WaiterID(w Waiter) string {
	if len(e.idOf) == 0 {
		return ""
	}
	if wt := e.waiters.get(w); wt != nil {
		return e.idOf[wt]
	}
	return ""
}

// holderInfo lists h, a holder of ks, as of nanos.
func (ks *keyState) holderInfo(h *holder, nanos int64) Holder {
	return Holder{Key: ks.key, Token: h.token, LeaseLeft: time.Duration(max(h.deadline-nanos, 0)), Limit: ks.limit(), ID: h.id}
}

// Stats counts the keys held or waited on, and the waiters.
func (e *Engine) Stats() (keys, waiters int) { return e.all.len(), e.waiters.len() }

// Held counts the holders over all keys: a key with three holders counts
// three.
func (e *Engine) Held() int { return e.leases.n }

// ScanStart is the cursor that begins a Scan.
const ScanStart = math.MaxInt

// Scan visits at most n keys held or waited on (at least one, if any are
// left), from cursor down. It calls fn once for each holder of a held key,
// in token order, with held true and h.LeaseLeft as of now; and once for
// a key waited on but not held, with held false and only h.Key set. n
// counts keys, not holders: all the holders of a key are visited in the
// same call. Like Inspect and Snapshot, Scan fires no deadline (call
// Advance first); fn must not call the engine.
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
	i := max(min(cursor, e.all.len()), 0)
	nanos := now.UnixNano()
	for stop := max(i-max(n, 1), 0); i > stop; {
		i--
		ks := *e.all.at(i)
		held := false
		for h := range ks.holders {
			fn(ks.holderInfo(h, nanos), true)
			held = true
		}
		if !held {
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

// Snapshot returns the state at now, holders sorted by key and the
// holders of a key by token. It copies and sorts every holder in one
// call, which takes tens of milliseconds with a million keys; Scan visits
// them a slice at a time.
func (e *Engine) Snapshot(now time.Time) Snapshot {
	nanos := now.UnixNano()
	s := Snapshot{Token: e.seen, Holders: make([]Holder, 0, e.leases.n)}
	for _, h := range e.leases.all {
		s.Holders = append(s.Holders, h.keyOf().holderInfo(h, nanos))
	}
	slices.SortFunc(s.Holders, func(a, b Holder) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Token, b.Token))
	})
	return s
}

// Restore replaces every holder with those of s, as a standby does when it
// (re)joins the stream, and observes s.Token (ignored, as by Observe, when
// more than Config.MaxEpochAhead ahead). Waiters are dropped and
// returned as TimedOut events appended to out; a standby has none.
func (e *Engine) Restore(now time.Time, s Snapshot, out []Event) []Event {
	out = e.DropWaiters(out)
	for e.leases.n > 0 {
		h := *e.leases.at(e.leases.n - 1)
		ks := h.keyOf()
		e.unhold(h)
		e.dropKey(ks)
	}
	for _, h := range s.Holders {
		e.ApplyHeldID(now, h.Key, h.Limit, h.Token, h.LeaseLeft, h.ID)
	}
	e.Observe(now, s.Token)
	return out
}

// ApplyHeldID records that token holds key, whose limit is limit (0 is
// taken as 1), with leaseLeft to run, as replicated from the active. It
// updates the lease of the holder with token if key has one (tokens are
// unique), else adds it. The active's word is the last: key takes limit,
// and if key has no room for token, the holders with the lowest tokens
// (the one holder of a lock) give way, as they must have gone on the
// active.
//
// id is the holder's acquire id ("" for none).
func (e *Engine) ApplyHeldID(now time.Time, key string, limit int, token uint64, leaseLeft time.Duration, id string) {
	if token > e.seen {
		e.seen = token
	}
	limit = min(max(limit, 1), math.MaxInt32)
	ks := e.lookup(key)
	if ks == nil {
		ks = e.newKey(key, limit)
	}
	ks.setLimit(limit)
	deadline := now.UnixNano() + int64(leaseLeft)
	h := ks.find(token)
	if h == nil && ks.nheld() >= limit {
		// The oldest holder's place is taken over, in the heap too, as
		// a lock's holder always was.
		h = ks.oldest(token)
		ks.retoken(h, token)
	}
	if h == nil {
		h = e.hold(ks, token, deadline)
	} else {
		h.deadline = deadline
		heap.Fix(&e.leases, int(h.heapIdx))
	}
	if id != "" {
		// A renewal travels without the id: the holder keeps its own.
		h.id = id
	}
	// A lowered limit: more holders than it allows.
	for ks.nheld() > limit {
		e.unhold(ks.oldest(token))
	}
}

// oldest returns the holder of ks with the lowest token other than
// token; ks must have one.
func (ks *keyState) oldest(token uint64) *holder {
	for h := range ks.holders {
		if h.token != token {
			return h
		}
	}
	return nil
}

// ApplyFree records that token no longer holds key, as replicated from the
// active. A stale record (token does not hold key) changes nothing. The
// place that frees is not handed on: a standby has no waiters.
func (e *Engine) ApplyFree(key string, token uint64) {
	ks := e.lookup(key)
	if ks == nil {
		return
	}
	h := ks.find(token)
	if h == nil {
		return
	}
	e.unhold(h)
	e.dropKey(ks)
}
