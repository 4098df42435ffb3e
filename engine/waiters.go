package engine

// waiterTable is the engine's waiters by Waiter: an open-addressing hash
// table with linear probing of the waiters themselves, whose Waiter is
// their key. A map[Waiter]*waiter would cost 24 bytes a slot, about 38 a
// waiter, and keep the room it grew to; this takes 8 a slot, 11 to 21 a
// waiter at a load of 3/8 to 3/4, and halves when the waiters fall to an
// eighth of its slots. Waiters are named by the node (a connection's id
// and a request's number on it), never by a client, so a fixed hash does.
type waiterTable struct {
	slots []*waiter
	n     int
}

func hashWaiter(w Waiter) uint64 {
	h := w.Conn*0x9e3779b97f4a7c15 ^ w.Seq
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	return h
}

// len counts the waiters.
func (t *waiterTable) len() int { return t.n }

// get returns the waiter w, nil if none.
func (t *waiterTable) get(w Waiter) *waiter {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := hashWaiter(w) & mask; ; i = (i + 1) & mask {
		wt := t.slots[i]
		if wt == nil || wt.w == w {
			return wt
		}
	}
}

// add adds wt, whose Waiter the table does not have.
func (t *waiterTable) add(wt *waiter) {
	t.n++
	if 4*t.n > 3*len(t.slots) {
		t.rehash(max(2*len(t.slots), minSlots))
	}
	t.put(wt)
}

func (t *waiterTable) put(wt *waiter) {
	mask := uint64(len(t.slots) - 1)
	i := hashWaiter(wt.w) & mask
	for t.slots[i] != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = wt
}

// remove removes wt, which the table has, under wt.w.
func (t *waiterTable) remove(wt *waiter) {
	mask := uint64(len(t.slots) - 1)
	hole := hashWaiter(wt.w) & mask
	for t.slots[hole] != wt {
		hole = (hole + 1) & mask
	}
	// Backward-shift deletion, as in the keys' index (index.go).
	for i := (hole + 1) & mask; t.slots[i] != nil; i = (i + 1) & mask {
		home := hashWaiter(t.slots[i].w) & mask
		if (i-home)&mask < (i-hole)&mask {
			continue
		}
		t.slots[hole] = t.slots[i]
		hole = i
	}
	t.slots[hole] = nil
	t.n--
	if len(t.slots) > minSlots && 8*t.n < len(t.slots) {
		t.rehash(len(t.slots) / 2)
	}
}

// rehash makes a table of n slots, a power of two, of the same waiters.
func (t *waiterTable) rehash(n int) {
	old := t.slots
	t.slots = make([]*waiter, n)
	for _, wt := range old {
		if wt != nil {
			t.put(wt)
		}
	}
}

// all yields every waiter, in no order; the table must not change
// meanwhile.
func (t *waiterTable) all(yield func(*waiter) bool) {
	for _, wt := range t.slots {
		if wt != nil && !yield(wt) {
			return
		}
	}
}
