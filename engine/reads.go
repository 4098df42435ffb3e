package engine

import (
	"math"
	"time"
)

// Holder is one holder of a key, as listed, snapshotted and replicated: a
// key with three holders gives three. LeaseLeft is relative, never an
// instant, because clocks differ between machines. Limit is the key's
// limit, the same for all its holders; 0 is taken as 1 where a Holder is
// applied (Restore). Mode is the key's, the same for all its holders
// too: a lock's readers are Shared, its writer and a semaphore's places
// Exclusive.
type Holder struct {
	Key       string
	Token     uint64
	LeaseLeft time.Duration
	Limit     int
	ID        string // the id of the acquire that got the place, "" when none
	Mode      Mode
	// Set is the id of the set the place was granted with (the token of
	// the set's first key), 0 for a key taken alone: the holders of one
	// set carry the same.
	Set uint64
	// Place is a semaphore holder's place, 1 to Limit, the lowest free
	// at its grant; 0 for a lock's holder.
	Place int
	// Value is the holder's value, "" for none.
	Value string
}

// WaiterInfo is one queued waiter, as listed for inspection.
type WaiterInfo struct {
	Waiter Waiter
	Waited time.Duration
	Lease  time.Duration
	// WaitLeft is how long it will still wait; 0 means forever.
	WaitLeft time.Duration
	ID       string // the id its acquire carried, "" when none
	Mode     Mode   // how it asks for the key listed
	// Set is, for a member of a set, every key of the set in its order,
	// with its limit and mode (a copy); nil for a waiter taken alone. A
	// set is listed once on each of its keys, with the same Set.
	Set []SetKey
}

// InspectN returns every holder of key, in grant order (which is token
// order), and its first n waiters in queue order, counting them all; a
// key neither held nor waited on has neither. n bounds the copy: a Q
// answer lists some, and a key with 100k waiters would otherwise copy
// them all at each Q.
func (e *Engine) InspectN(now time.Time, key string, n int) (hs []Holder, ws []WaiterInfo, nwait int) {
	ks := e.lookup(key)
	if ks == nil {
		return nil, nil, 0
	}
	nanos := now.UnixNano()
	for h := range ks.holders {
		hs = append(hs, e.holderInfo(ks, h, nanos))
	}
	for wt := ks.head(); wt != nil && len(ws) < n; wt = wt.next {
		ws = append(ws, e.waiterInfo(wt, nanos, false))
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
			fn(ks.key, ks.limit(), e.waiterInfo(wt, nanos, true))
		}
	}
}

// QueuedKey is the key of the waiter (or ghost) whose acquire carried
// id, a set's first key; "" when none waits.
func (e *Engine) QueuedKey(id string) string {
	if wt := e.byID[id]; wt != nil {
		return wt.ks.key
	}
	return ""
}

// WaiterKeys appends to out every key waiter w waits on: a set's, in
// its order; none when w does not wait.
func (e *Engine) WaiterKeys(w Waiter, out []string) []string {
	return e.keysOfWaiter(e.waiters.get(w), out)
}

// QueuedKeys appends to out every key the waiter (or ghost) whose
// acquire carried id waits on: a set's, in its order; none when none
// waits.
func (e *Engine) QueuedKeys(id string, out []string) []string {
	return e.keysOfWaiter(e.byID[id], out)
}

func (e *Engine) keysOfWaiter(wt *waiter, out []string) []string {
	if wt == nil {
		return out
	}
	if s := e.setOf(wt); s != nil {
		for _, m := range s.members {
			out = append(out, m.ks.key)
		}
		return out
	}
	return append(out, wt.ks.key)
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
func (e *Engine) holderInfo(ks *keyState, h *holder, nanos int64) Holder {
	hi := e.infoOf(h)
	return Holder{Key: ks.key, Token: h.token, LeaseLeft: time.Duration(max(h.deadline-nanos, 0)), Limit: ks.limit(), ID: h.id, Mode: ks.mode(), Set: e.holderSet(h), Place: int(hi.place), Value: hi.value}
}

// waiterInfo lists wt as of nanos. A set's member is listed with the
// set's id and wait, which its first member keeps; ghostWait lists a
// ghost's wait left rather than its grace, as a standby keeps it.
func (e *Engine) waiterInfo(wt *waiter, nanos int64, ghostWait bool) WaiterInfo {
	lead := wt
	s := e.setOf(wt)
	if s != nil {
		lead = s.members[0]
	}
	wi := WaiterInfo{Waiter: wt.w, Waited: time.Duration(max(nanos-wt.since, 0)), Lease: wt.lease, ID: e.waiterID(lead), Mode: wt.mode()}
	if lead.heapIdx >= 0 {
		wi.WaitLeft = time.Duration(max(e.waits[lead.heapIdx].deadline-nanos, 1))
	}
	if dl, ok := e.ghostWait[lead]; ok && ghostWait {
		wi.WaitLeft = 0
		if dl > 0 {
			wi.WaitLeft = time.Duration(max(dl-nanos, 1))
		}
	}
	if s != nil {
		wi.Set = make([]SetKey, len(s.members))
		for i, m := range s.members {
			wi.Set[i] = SetKey{Key: m.ks.key, Limit: m.ks.limit(), Mode: m.mode()}
		}
	}
	return wi
}

// Stats counts the keys held or waited on, and the waiters in their
// queues: a set waiting on three keys counts three, as it does against
// Config.MaxWaiters.
func (e *Engine) Stats() (keys, waiters int) { return e.all.len(), e.places }

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
			fn(e.holderInfo(ks, h, nanos), true)
			held = true
		}
		if !held {
			fn(Holder{Key: ks.key}, false)
		}
	}
	return i
}
