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
