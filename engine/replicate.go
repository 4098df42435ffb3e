package engine

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"time"
)

// Snapshot is the whole replicable state of an engine: its holders and
// the token high-water mark. Waiters are not in it: a waiter belongs to a
// connection of the node it asked, and re-sends when that node goes.
type Snapshot struct {
	Token   uint64
	Holders []Holder
}

// Snapshot returns the state at now, holders sorted by key and the
// holders of a key by token. It copies and sorts every holder in one
// call, holding up its caller for as long as that takes with many keys;
// Scan visits them a slice at a time.
func (e *Engine) Snapshot(now time.Time) Snapshot {
	nanos := now.UnixNano()
	s := Snapshot{Token: e.seen, Holders: make([]Holder, 0, e.leases.n)}
	for _, h := range e.leases.all {
		s.Holders = append(s.Holders, e.holderInfo(h.keyOf(), h, nanos))
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
		e.ApplyHolder(now, h)
	}
	e.Observe(now, s.Token)
	return out
}

// ApplyHeldID is ApplyHolder for a holder that holds key Exclusive
// (a lock's writer, a semaphore's place), taken alone.
func (e *Engine) ApplyHeldID(now time.Time, key string, limit int, token uint64, leaseLeft time.Duration, id string) {
	e.ApplyHolder(now, Holder{Key: key, Token: token, LeaseLeft: leaseLeft, Limit: limit, ID: id})
}

// ApplyHolder records that h.Token holds h.Key, whose limit is h.Limit
// (0 is taken as 1), in h.Mode, with h.LeaseLeft to run, as replicated
// from the active. It updates the lease of the holder with the token if
// the key has one (tokens are unique), else adds it. The active's word
// is the last: the key takes the limit, and the holders it has no room
// for give way, as they must have gone on the active: the holders with
// the lowest tokens of a semaphore that is full (the one holder of a
// lock), every other holder of a lock for its writer, and the writer of
// a lock for a reader. Readers give way to no reader: a lock holds any
// number of them.
//
// h.ID is the holder's acquire id ("" for none), h.Set the id of the
// set it was granted with (0 for none); a renewal that carries neither
// leaves the holder's own. h.Place and h.Value replace the holder's:
// every record of a holder carries them.
func (e *Engine) ApplyHolder(now time.Time, hd Holder) {
	token := hd.Token
	if token > e.seen {
		e.seen = token
	}
	limit := min(max(hd.Limit, 1), math.MaxInt32)
	mode := hd.Mode
	if limit > 1 || mode > Shared {
		mode = Exclusive
	}
	ks := e.lookup(hd.Key)
	if ks == nil {
		ks = e.newKey(hd.Key, limit)
	}
	ks.setLimit(limit)
	if limit == 1 && (mode == Exclusive || ks.mode() == Exclusive) {
		for o := ks.oldest(token); o != nil; o = ks.oldest(token) {
			e.unhold(o)
		}
	}
	deadline := now.UnixNano() + int64(hd.LeaseLeft)
	h := ks.find(token)
	if h == nil && ks.nheld() >= limit && limit > 1 {
		// The oldest holder's place is taken over, in the heap too.
		h = ks.oldest(token)
		ks.retoken(h, token)
		if e.nheldSet > 0 {
			e.forgetHeldSet(h)
		}
		if e.nholdInfo > 0 {
			e.forgetInfo(h)
		}
	}
	if h == nil {
		h = e.hold(ks, token, deadline)
	} else {
		h.deadline = deadline
		heap.Fix(&e.leases, int(h.heapIdx))
	}
	e.setMode(ks, mode)
	if hd.ID != "" {
		// A renewal travels without the id: the holder keeps its own.
		h.id = hd.ID
	}
	if hd.Set != 0 {
		e.markHeldSet(h, hd.Set)
	}
	// Every record of a holder carries its place and value: the
	// active's word replaces them.
	e.setInfo(h, holdInfo{place: int32(min(max(hd.Place, 0), limit)), value: hd.Value})
	// A lowered limit: more holders than it allows.
	for limit > 1 && ks.nheld() > limit {
		e.unhold(ks.oldest(token))
	}
	// A standby has no queue; should a node with one apply, what its
	// waiters were admitted to is counted anew.
	e.unsettle(ks)
}

// oldest returns the holder of ks with the lowest token other than
// token, nil if none.
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
