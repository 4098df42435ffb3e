package engine

import "hash/maphash"

// The keys' index finds a key's state by name. It is an open-addressing
// hash table with linear probing whose slots (Engine.slots) hold a
// position in Engine.all plus one, 0 for an empty slot; the key itself is
// read from the keyState. A map[string]*keyState would cost 24 bytes a
// slot, about 40 a key, and never give back the room it grew to; this
// takes 4 a slot, 5 to 11 a key at a load of 3/8 to 3/4, and halves when the keys
// fall to an eighth of its slots.

// minSlots is the smallest index; it never shrinks below it.
const minSlots = 16

func (e *Engine) hash(key string) uint64 { return maphash.String(e.seed, key) }

// lookup returns the state of key, nil if it is neither held nor waited
// on.
func (e *Engine) lookup(key string) *keyState {
	if len(e.slots) == 0 {
		return nil
	}
	mask := uint64(len(e.slots) - 1)
	for i := e.hash(key) & mask; ; i = (i + 1) & mask {
		s := e.slots[i]
		if s == 0 {
			return nil
		}
		if ks := *e.all.at(int(s - 1)); ks.key == key {
			return ks
		}
	}
}

// index adds ks, just appended to e.all, to the index.
func (e *Engine) index(ks *keyState) {
	if 4*e.all.len() > 3*len(e.slots) {
		e.rehash(max(2*len(e.slots), minSlots))
		return
	}
	e.put(ks.key, ks.first.idx+1)
}

// put stores s in the first free slot of key's probe sequence.
func (e *Engine) put(key string, s int32) {
	mask := uint64(len(e.slots) - 1)
	i := e.hash(key) & mask
	for e.slots[i] != 0 {
		i = (i + 1) & mask
	}
	e.slots[i] = s
}

// slotOf returns the slot that holds ks.
func (e *Engine) slotOf(ks *keyState) uint64 {
	mask := uint64(len(e.slots) - 1)
	i := e.hash(ks.key) & mask
	for e.slots[i] != ks.first.idx+1 {
		i = (i + 1) & mask
	}
	return i
}

// unindex removes ks from the index, and moves last, the key of e.all
// that is to fill ks's position, there: the caller moves it in e.all,
// then calls shrinkIndex.
func (e *Engine) unindex(ks, last *keyState) {
	mask := uint64(len(e.slots) - 1)
	hole := e.slotOf(ks)
	// Backward-shift deletion: every entry after the hole, up to the
	// next empty slot, that may not be found past the hole moves into it.
	for i := (hole + 1) & mask; e.slots[i] != 0; i = (i + 1) & mask {
		home := e.hash((*e.all.at(int(e.slots[i] - 1))).key) & mask
		// The entry at i stays if its home is cyclically in (hole, i].
		if (i-home)&mask < (i-hole)&mask {
			continue
		}
		e.slots[hole] = e.slots[i]
		hole = i
	}
	e.slots[hole] = 0
	if last != ks {
		e.slots[e.slotOf(last)] = ks.first.idx + 1
	}
}

// shrinkIndex halves the index once the keys fall to an eighth of its
// slots, and e.all is up to date.
func (e *Engine) shrinkIndex() {
	if len(e.slots) > minSlots && 8*e.all.len() < len(e.slots) {
		e.rehash(len(e.slots) / 2)
	}
}

// rehash makes an index of n slots, a power of two, over e.all.
func (e *Engine) rehash(n int) {
	e.slots = make([]int32, n)
	for _, ks := range e.all.all {
		e.put(ks.key, ks.first.idx+1)
	}
}
