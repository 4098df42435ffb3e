package engine

import (
	"strings"
	"time"
)

// A client that releases a lock and loses the answer (its connection
// drops, the node fails over) sends the release again. By then the token
// holds nothing, and "not held" would tell the client its lock was lost
// while it worked, which is false: it was released, by this very token.
// So the engine remembers, for a while, the tokens their holders
// released, and answers a release of one of them as done. A standby
// remembers the releases it applies and is sent the recent ones with
// its snapshot, so the node that takes over answers the same.
//
// Only releases are remembered: a lease that ran out was lost, and a
// late release of its token is told so.

// ReleasedMemory is how long a released token is remembered (a client
// re-sends a release for 5 seconds), unless more than ReleasedMax
// releases come in that time: then the oldest are forgotten sooner, which
// bounds the memory whatever the rate.
const (
	ReleasedMemory = 10 * time.Second
	ReleasedMax    = 1 << 16
)

// releasedSet is a ring of the releases in the order they were made,
// oldest first, and an index from token to its place in the ring (as a
// count of releases since the start). The index is an open-addressing
// table with linear probing, twice the ring's size, whose slots hold the
// token and the release's number: adding a release and dropping the
// oldest cost a probe or two each, in a table that allocates nothing once
// the ring has grown (a map's insert and delete per release were an
// eighth of a busy node's CPU).
type releasedSet struct {
	ring  []releasedToken
	first uint64 // the number of the oldest release still in the ring
	next  uint64 // the number the next release gets
	slots []releasedSlot
}

type releasedToken struct {
	token uint64
	at    int64 // unix nanoseconds
	key   string
}

// releasedSlot is a slot of the index: n is the release's number plus
// one, 0 for an empty slot.
type releasedSlot struct {
	token, n uint64
}

func (r *releasedSet) add(now int64, token uint64, key string) {
	r.forget(now)
	if r.next-r.first == uint64(len(r.ring)) {
		if len(r.ring) < ReleasedMax {
			r.grow()
		} else {
			r.drop()
		}
	}
	if r.slots == nil {
		r.slots = make([]releasedSlot, 2*len(r.ring))
	}
	r.ring[r.next%uint64(len(r.ring))] = releasedToken{token, now, key}
	r.insert(token, r.next)
	r.next++
}

// home is token's first slot.
func (r *releasedSet) home(token uint64) int {
	return int((token * 0x9e3779b97f4a7c15 >> 32) & uint64(len(r.slots)-1))
}

// insert indexes release n of token.
func (r *releasedSet) insert(token, n uint64) {
	mask := len(r.slots) - 1
	i := r.home(token)
	for r.slots[i].n != 0 && r.slots[i].token != token {
		i = (i + 1) & mask
	}
	r.slots[i] = releasedSlot{token, n + 1}
}

// remove takes release n of token out of the index, moving back the
// slots after it that probed past it.
func (r *releasedSet) remove(token, n uint64) {
	mask := len(r.slots) - 1
	i := r.home(token)
	for r.slots[i].n != n+1 || r.slots[i].token != token {
		if r.slots[i].n == 0 {
			return // replaced by a later release of the same token
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; r.slots[j].n != 0; j = (j + 1) & mask {
		k := r.home(r.slots[j].token)
		// The entry at j may fill the hole at i when its home is not
		// in (i, j], cyclically.
		if (i <= j && (k <= i || k > j)) || (i > j && k <= i && k > j) {
			r.slots[i] = r.slots[j]
			i = j
		}
	}
	r.slots[i] = releasedSlot{}
}

// grow doubles the ring, keeping the releases' numbers, and the index.
func (r *releasedSet) grow() {
	ring := make([]releasedToken, max(2*len(r.ring), 64))
	for n := r.first; n < r.next; n++ {
		ring[n%uint64(len(ring))] = r.ring[n%uint64(len(r.ring))]
	}
	r.ring = ring
	r.slots = make([]releasedSlot, 2*len(ring))
	for n := r.first; n < r.next; n++ {
		r.insert(r.ring[n%uint64(len(ring))].token, n)
	}
}

// drop forgets the oldest release.
func (r *releasedSet) drop() {
	i := r.first % uint64(len(r.ring))
	if r.slots != nil {
		r.remove(r.ring[i].token, r.first)
	}
	r.ring[i] = releasedToken{}
	r.first++
}

// forget drops the releases older than ReleasedMemory. Once none is
// left it keeps no room until the next release, and returns how many
// releases the room it gave up held (0 if it had none).
func (r *releasedSet) forget(now int64) int {
	for r.first < r.next && now-r.ring[r.first%uint64(len(r.ring))].at >= int64(ReleasedMemory) {
		r.drop()
	}
	if r.first != r.next {
		return 0
	}
	room := len(r.ring)
	r.ring, r.slots = nil, nil
	return room
}

func (r *releasedSet) has(now int64, token uint64, key string) bool {
	if r.slots == nil {
		return false
	}
	mask := len(r.slots) - 1
	for i := r.home(token); r.slots[i].n != 0; i = (i + 1) & mask {
		if r.slots[i].token == token {
			rt := r.ring[(r.slots[i].n-1)%uint64(len(r.ring))]
			return rt.token == token && rt.key == key && now-rt.at < int64(ReleasedMemory)
		}
	}
	return false
}

// ForgetReleases forgets the releases older than ReleasedMemory, as the
// next release would. Call it now and then: after a burst of releases
// and none since, the last ReleasedMax of them (with their keys) would
// otherwise be kept for good. It returns how many releases the room
// given back held, once none is left to remember (0 else): after a
// burst, a few MB the caller may want to hand back to the OS.
func (e *Engine) ForgetReleases(now time.Time) int {
	return e.released.forget(now.UnixNano())
}

// WasReleased reports whether token released key (by Release, or by
// ApplyReleased on a standby) within the last ReleasedMemory.
func (e *Engine) WasReleased(now time.Time, key string, token uint64) bool {
	return e.released.has(now.UnixNano(), token, key)
}

// ApplyReleased records, as replicated from the active, that token's
// holder released key at now, and frees its place as ApplyFree does.
func (e *Engine) ApplyReleased(now time.Time, key string, token uint64) {
	if ks := e.lookup(key); ks != nil {
		key = ks.key // the engine's own copy: nothing else is kept alive
	} else {
		key = strings.Clone(key)
	}
	e.released.add(now.UnixNano(), token, key)
	e.ApplyFree(key, token)
}

// Released is a release the engine remembers: the key, the token, and
// how long ago it was made.
type Released struct {
	Key   string
	Token uint64
	Ago   time.Duration
}

// Releases returns the last releases made within ReleasedMemory of now,
// at most max of them, oldest first, for a standby's snapshot.
func (e *Engine) Releases(now time.Time, max int) []Released {
	r := &e.released
	nanos := now.UnixNano()
	r.forget(nanos)
	first := r.first
	if r.next-first > uint64(max) {
		first = r.next - uint64(max)
	}
	out := make([]Released, 0, r.next-first)
	for n := first; n < r.next; n++ {
		rt := r.ring[n%uint64(len(r.ring))]
		out = append(out, Released{rt.key, rt.token, time.Duration(nanos - rt.at)})
	}
	return out
}
