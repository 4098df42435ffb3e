package engine

import "time"

// Mode is how a key is asked for and held.
type Mode uint8

const (
	// Exclusive is a writer of a lock, its one holder; on a semaphore,
	// one of its places. The zero Mode: an acquire that names none.
	Exclusive Mode = iota
	// Shared is a reader of a lock (limit 1): held beside other readers,
	// never beside a writer.
	Shared
)

func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return "unknown"
}

// mode is how the holders of ks hold it; Exclusive when it has none.
func (ks *keyState) mode() Mode {
	if ks.ext == nil {
		return Exclusive
	}
	return ks.ext.mode
}

// setMode records that ks is held in mode. A key without an extra is
// held exclusively, so only a reader needs one: a writer's grant costs
// what it did before keys had modes.
func (e *Engine) setMode(ks *keyState, mode Mode) {
	if mode == Shared {
		e.extra(ks).mode = Shared
	} else if ks.ext != nil {
		ks.ext.mode = Exclusive
	}
}

// admits reports whether ks admits an entry of its queue that asks for
// mode, with ahead entries before it in the queue, all of them admitted
// but not granted (members of sets waiting for another of their keys,
// each keeping its place), exclAhead when one of them asks for
// Exclusive. This is the one rule of admission, the same for a new
// acquire (placed, as it were, at the tail) and for a waiter:
//
//   - a semaphore (limit N) admits while its holders and the entries
//     ahead number fewer than N: one place each, whatever comes after;
//   - a lock admits a writer only at the head of its queue (nothing
//     ahead) and with no holder;
//   - a lock admits a reader when it is not held by a writer, no writer
//     is ahead, and its holders and the entries ahead number fewer than
//     Config.MaxLimit, which bounds a key's holders whatever its mode.
//
// An entry behind one that is not admitted is not admitted either: the
// queue is served in order, and its admitted entries are always a
// prefix of it.
func (e *Engine) admits(ks *keyState, mode Mode, ahead int, exclAhead bool) bool {
	// A lock's writer, the hot path, in a call small enough to inline.
	if x := ks.ext; mode == Exclusive && (x == nil || x.limit == 1) {
		return ahead == 0 && ks.first.heapIdx < 0 && (x == nil || len(x.more) == 0)
	}
	return e.admitsMore(ks, mode, ahead, exclAhead)
}

// admitsMore is admits for a semaphore's place, or a reader.
func (e *Engine) admitsMore(ks *keyState, mode Mode, ahead int, exclAhead bool) bool {
	n := ks.nheld()
	if limit := ks.limit(); limit > 1 {
		return n+ahead < limit
	}
	if e.planted&bugReadersOvertake != 0 {
		exclAhead = false
	}
	if e.planted&bugReaderBesideWriter != 0 {
		return n+ahead < e.cfg.MaxLimit
	}
	return (n == 0 || ks.mode() == Shared) && !exclAhead && n+ahead < e.cfg.MaxLimit
}

// admitsNew reports whether ks admits a new acquire of mode: whether it
// would be admitted if it joined the tail of the queue. Behind a waiter
// not admitted (or a ghost), it is not.
func (e *Engine) admitsNew(ks *keyState, mode Mode) bool {
	x := ks.ext
	if x == nil {
		// A lock held by a writer, or by nobody, with nobody waiting.
		return ks.first.heapIdx < 0
	}
	if x.nready != x.nwait && e.planted == 0 {
		return false // behind a waiter not admitted, nothing is
	}
	if mode == Exclusive && x.limit == 1 {
		// A lock's writer, the hot path: only with nothing held and
		// nothing ahead.
		return x.nwait == 0 && ks.first.heapIdx < 0 && len(x.more) == 0
	}
	return e.admitsNewMore(ks, mode)
}

// admitsNewMore is admitsNew for a reader or a semaphore's place, at the
// tail of a queue whose waiters are all admitted.
func (e *Engine) admitsNewMore(ks *keyState, mode Mode) bool {
	x := ks.ext
	if mode == Shared && e.planted&bugReadersOvertake != 0 {
		return e.admits(ks, mode, 0, false)
	}
	if x.nready != x.nwait {
		return false
	}
	// An admitted writer can only be the head: nothing is admitted
	// behind it.
	exclAhead := x.nwait > 0 && x.head.mode() == Exclusive
	return e.admits(ks, mode, int(x.nwait), exclAhead)
}

// settle grants, at now, every waiter of ks that ks admits, in queue
// order, and stops at the first it does not: a waiter taken alone is
// granted; a set's member is marked admitted, and its set granted once
// every one of its keys admits it. Every call that lets a waiter through
// (a holder gone, a waiter gone, a ghost claimed) settles the keys it
// touched, so that between calls no waiter is admitted by all its keys:
// none is left waiting for what it could have.
//
// A grant never makes another waiter of the keys it is on admitted or
// not: a set's member was counted among the entries ahead, and becomes a
// holder instead (the sum is the same); a waiter alone was the last
// admitted, so no entry behind it was. So a grant needs no settle of its
// own, and settle does not recurse.
func (e *Engine) settle(now time.Time, ks *keyState, out []Event) []Event {
	x := ks.ext
	if x == nil {
		return out
	}
	ahead, exclAhead := 0, false
	for wt := x.head; wt != nil; {
		next := wt.next
		s := e.setOf(wt)
		if s != nil && s.isAdmitted(wt) {
			ahead++
			exclAhead = exclAhead || wt.mode() == Exclusive
			wt = next
			continue
		}
		// A ghost keeps its place and every place behind it.
		if wt.w.Conn == GhostConn || !e.admits(ks, wt.mode(), ahead, exclAhead) {
			return out
		}
		// A waiter whose wait ends at this very instant has timed out
		// (the time rules): Advance answers it next, and its leaving
		// lets through, at the same instant, whom it holds back.
		if e.waitEnds(wt, s) {
			return out
		}
		if s == nil {
			w, lease, id, value, mode, since := wt.w, wt.lease, e.waiterID(wt), e.waiterValue(wt), wt.mode(), wt.since
			e.unlink(wt)
			out = e.grant(now, ks, mode, lease, w, id, value, out)
			out[len(out)-1].Queued = since
		} else {
			s.admit(wt)
			x.nready++
			if s.complete() || e.planted&bugSetGrantedEarly != 0 && s.missing() == 1 {
				out = e.grantSet(now, s, out)
			} else {
				ahead++
				exclAhead = exclAhead || wt.mode() == Exclusive
			}
		}
		wt = next
	}
	return out
}

// waitEnds reports whether the wait of wt, a member of s if s is not
// nil, ends at the instant Advance is firing. Only there can a wait be
// due and not fired yet: every other call fires the deadlines due at its
// time first.
func (e *Engine) waitEnds(wt *waiter, s *lockSet) bool {
	if e.firing == 0 {
		return false
	}
	if s != nil {
		wt = s.members[0]
	}
	return wt.heapIdx >= 0 && e.waits[wt.heapIdx].deadline <= e.firing
}

// unsettle forgets which waiters of ks were admitted, for a change of
// its holders that is no grant and no departure (replication): admission
// is counted again from the head at the next settle, which may admit
// less than before but never more than it should.
func (e *Engine) unsettle(ks *keyState) {
	x := ks.ext
	if x == nil || x.nready == 0 {
		return
	}
	for wt := x.head; wt != nil; wt = wt.next {
		if s := e.setOf(wt); s != nil {
			s.unadmit(wt)
		}
	}
	x.nready = 0
}
