package engine

import (
	"container/heap"
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// MaxSetKeys is the most keys one acquire may take at once.
const MaxSetKeys = 16

// SetKey is one key of an acquire: its name, its limit (0 is 1, a lock)
// and the mode it is asked in. Shared asks a lock (limit 1) as a reader;
// a semaphore's places are all alike, and are asked Exclusive.
type SetKey struct {
	Key   string
	Limit int
	Mode  Mode
}

// Refusals of AcquireSet.
var (
	// ErrSetKeys: no key, more than MaxSetKeys, or a key named twice.
	ErrSetKeys = errors.New("bad set of keys")
	// ErrSharedLimit: a shared acquire of a semaphore, or a mode that is
	// none of Exclusive and Shared.
	ErrSharedLimit = errors.New("shared semaphore")
)

// lockSet is an acquire of several keys that waits: one member, a
// waiter, in the queue of each of its keys, in the order asked. The
// first member leads: it alone is in the table of waiters, carries the
// id and the wait deadline, and stands for the set wherever a waiter
// taken alone would.
type lockSet struct {
	members []*waiter // in room
	room    [MaxSetKeys]*waiter
	// admitted has bit i set while members[i] is admitted by its key
	// (settle): it keeps its place at the head there, waiting for the
	// set's other keys.
	admitted uint16
}

// setOf returns the set whose member wt is, nil for a waiter taken
// alone; a length check while no set waits.
func (e *Engine) setOf(wt *waiter) *lockSet {
	if e.nwaitSet == 0 {
		return nil
	}
	return e.waitSet[wt]
}

// holderSet returns the id of the set h was granted with, 0 for a key
// taken alone.
func (e *Engine) holderSet(h *holder) uint64 {
	if e.nheldSet == 0 {
		return 0
	}
	return e.heldSet[h]
}

// markHeldSet records that h holds its key as one of set.
func (e *Engine) markHeldSet(h *holder, set uint64) {
	if e.heldSet == nil {
		e.heldSet = make(map[*holder]uint64)
	}
	e.heldSet[h] = set
	e.nheldSet = len(e.heldSet)
	e.heldSetPeak = max(e.heldSetPeak, e.nheldSet)
}

// forgetHeldSet forgets the set of h, a holder that goes.
func (e *Engine) forgetHeldSet(h *holder) {
	delete(e.heldSet, h)
	e.heldSet = shrinkMap(e.heldSet, &e.heldSetPeak)
	e.nheldSet = len(e.heldSet)
}

func (s *lockSet) bit(wt *waiter) uint16 {
	for i, m := range s.members {
		if m == wt {
			return 1 << i
		}
	}
	return 0
}

func (s *lockSet) isAdmitted(wt *waiter) bool { return s.admitted&s.bit(wt) != 0 }
func (s *lockSet) admit(wt *waiter)           { s.admitted |= s.bit(wt) }
func (s *lockSet) unadmit(wt *waiter)         { s.admitted &^= s.bit(wt) }
func (s *lockSet) complete() bool             { return s.admitted == uint16(1<<len(s.members)-1) }
func (s *lockSet) missing() int               { return len(s.members) - bits.OnesCount16(s.admitted) }

// keysOf copies the keys of s, in its order, into buf.
func (s *lockSet) keysOf(buf *[MaxSetKeys]*keyState) []*keyState {
	for i, m := range s.members {
		buf[i] = m.ks
	}
	return buf[:len(s.members)]
}

// waitsOn reports whether wt, a waiter taken alone or a set's first
// member, waits on key.
func (e *Engine) waitsOn(wt *waiter, key string) bool {
	s := e.setOf(wt)
	if s == nil {
		return wt.ks.key == key
	}
	for _, m := range s.members {
		if m.ks.key == key {
			return true
		}
	}
	return false
}

// AcquireSet asks for every key of keys at once on behalf of w, all or
// none: each in its own mode and limit, each granted with its own token,
// for the same lease. One key is AcquireID in that key's mode (a reader,
// when Shared). For more, the set is granted as soon as every one of its
// keys admits it, in one batch of Granted events (Event.SetSize), and
// until then it holds none of them: it waits in the queue of each, for
// at most wait (0: forever), and is answered TimedOut on every key when
// the wait runs out.
//
// Why no deadlock, whatever the order of the keys in two sets: a set
// joins the queues of all its keys in the same call, so two requests
// that share keys stand in the same order in every queue they share,
// the order of their arrival. A request waits only for the holders of
// its keys, who wait for nothing (a set holds either all of its keys or
// none), and for the requests ahead of it, who arrived before it. The
// oldest request waiting is behind nobody: it waits for holders only,
// whose leases end. Nobody granted meanwhile stands in its way: the
// queues are served in order, and a set admitted by a key but not yet
// by its others keeps its place there, as the head of the queue, or one
// of the readers or the places of a semaphore at its head. So the
// oldest is granted, or gives up, and so is the next: "waits for" only
// ever points back in time, and has no cycle.
//
// Why fair: a set is one more waiter in each of its queues, served in
// its turn like any other; it does not overtake, and it is not
// overtaken, by a request that came after it, except by readers and
// semaphore holders that a place it keeps does not exclude. The price
// is that a key a set keeps its place on may stay free while the set
// waits for its other keys, as a lock stays free for a ghost.
//
// After the grant, each key is held on its own: released and renewed
// by its token, and freed by its lease, alone. The other keys stay
// held; every Freed and Renewed of one carries the set's id (Event.Set),
// as every listing does (Holder.Set), so that a caller can tell the
// set is broken.
//
// Refusals are AcquireID's, and: ErrSetKeys for no key, more than
// MaxSetKeys or a key named twice; ErrSharedLimit for a shared key
// whose limit is not 1. The key, queue and waiter limits count a set
// as one place in each of its keys: it needs room in every one.
//
// id makes the set safe to re-send, as for AcquireID: a set whose id
// holds every one of its keys answers that grant again (its leases
// renewed); one that waits takes w in its place, the former w answered
// TimedOut. A set whose id holds only some of its keys lost the others
// before its answer came through: those it holds are freed, and the
// set is asked anew.
func (e *Engine) AcquireSet(now time.Time, keys []SetKey, lease, wait time.Duration, id string, w Waiter, out []Event) ([]Event, error) {
	if len(keys) == 1 {
		k := keys[0]
		return e.acquire(now, k.Key, k.Limit, k.Mode, lease, wait, false, id, "", w, out)
	}
	return e.acquireSet(now, keys, lease, wait, false, id, "", w, out)
}

// TryAcquireSet is AcquireSet that never queues: the set is granted at
// once if every key admits it (or its id holds them all already), and
// answered TimedOut at once otherwise, on every key.
func (e *Engine) TryAcquireSet(now time.Time, keys []SetKey, lease time.Duration, id string, w Waiter, out []Event) ([]Event, error) {
	if len(keys) == 1 {
		k := keys[0]
		return e.acquire(now, k.Key, k.Limit, k.Mode, lease, 0, true, id, "", w, out)
	}
	return e.acquireSet(now, keys, lease, 0, true, id, "", w, out)
}

func (e *Engine) acquireSet(now time.Time, keys []SetKey, lease, wait time.Duration, try bool, id, value string, w Waiter, out []Event) ([]Event, error) {
	out = e.Advance(now, out)
	if err := e.checkTimes(lease, wait); err != nil {
		return out, err
	}
	limits, err := e.checkSet(keys)
	if err != nil {
		return out, err
	}
	if e.waiters.get(w) != nil {
		return out, fmt.Errorf("%w: request %d of connection %d is already waiting", ErrDuplicateWaitr, w.Seq, w.Conn)
	}
	if id != "" {
		var done bool
		if out, done = e.againSet(now, keys, lease, id, value, try, w, out); done {
			return out, nil
		}
	}
	n := len(keys)
	var kss [MaxSetKeys]*keyState
	fresh := 0
	for i, k := range keys {
		if kss[i] = e.lookup(k.Key); kss[i] == nil {
			fresh++
		}
	}
	if fresh > 0 && e.all.len()+fresh > e.cfg.MaxKeys {
		return out, fmt.Errorf("%w: the node's limit of %s held or waited on at once would be passed; release some first", ErrTooManyKeys, plural(e.cfg.MaxKeys, "key"))
	}
	for i, ks := range kss[:n] {
		if ks != nil && ks.limit() != limits[i] {
			return out, errLimitMismatch(keys[i].Key, ks.limit(), limits[i])
		}
	}
	// admitted[i]: the key admits the set now, at the tail of its queue.
	var admitted [MaxSetKeys]bool
	all := true
	for i, ks := range kss[:n] {
		admitted[i] = ks == nil || e.admitsNew(ks, keys[i].Mode)
		all = all && admitted[i]
	}
	if e.planted&bugSetGrantedEarly != 0 && !all {
		missing := 0
		for _, a := range admitted[:n] {
			if !a {
				missing++
			}
		}
		all = missing == 1
	}
	var modes [MaxSetKeys]Mode
	for i, k := range keys {
		modes[i] = k.Mode
	}
	if all {
		for i, k := range keys {
			if kss[i] == nil {
				kss[i] = e.newKey(k.Key, limits[i])
			}
		}
		return e.holdSet(now, kss[:n], modes[:n], lease, w, id, value, out), nil
	}
	if try {
		for _, k := range keys {
			out = append(out, Event{Kind: TimedOut, Key: k.Key, Waiter: w, Mode: k.Mode, SetSize: n})
		}
		return out, nil
	}
	for _, ks := range kss[:n] {
		if ks != nil && ks.nwait() >= e.cfg.MaxWaitersPerKey {
			return out, fmt.Errorf("%w (key %q)", errQueueFull(e.cfg.MaxWaitersPerKey), ks.key)
		}
	}
	if e.places+n > e.cfg.MaxWaiters {
		return out, errTooManyWaiters(e.cfg.MaxWaiters)
	}
	for i, k := range keys {
		if kss[i] == nil {
			kss[i] = e.newKey(k.Key, limits[i])
		}
	}
	nanos := now.UnixNano()
	s := e.queueSet(kss[:n], modes[:n], w, lease, nanos, e.nextArrival(Exclusive))
	for i, m := range s.members {
		if admitted[i] {
			s.admit(m)
			m.ks.ext.nready++
		}
	}
	lead := s.members[0]
	if id != "" {
		e.nameWaiter(lead, id)
	}
	e.setWaiterValue(lead, value)
	if wait > 0 {
		e.waits.push(waitEntry{deadline: nanos + int64(wait), wt: lead})
	}
	e.waiters.add(lead)
	return out, nil
}

// checkSet returns the limits the keys ask for, 0 taken as 1, or why the
// set is refused.
func (e *Engine) checkSet(keys []SetKey) ([MaxSetKeys]int, error) {
	var limits [MaxSetKeys]int
	if len(keys) == 0 || len(keys) > MaxSetKeys {
		return limits, fmt.Errorf("%w: %s; an acquire takes 1 to %d keys at once", ErrSetKeys, plural(len(keys), "key"), MaxSetKeys)
	}
	for i, k := range keys {
		l, err := e.checkLimit(k.Key, k.Limit, k.Mode)
		if err != nil {
			return limits, err
		}
		limits[i] = l
		for _, prev := range keys[:i] {
			if prev.Key == k.Key {
				return limits, fmt.Errorf("%w: key %q named twice; name each key of a set once", ErrSetKeys, k.Key)
			}
		}
	}
	return limits, nil
}

// queueSet puts a set's member at the tail of the queue of each of kss,
// with its mode, and returns the set; its first member is not yet in
// the table of waiters, nor named, nor in the wait heap.
func (e *Engine) queueSet(kss []*keyState, modes []Mode, w Waiter, lease time.Duration, since int64, arrival uint32) *lockSet {
	var s *lockSet
	if n := len(e.freeSets); n > 0 {
		s = e.freeSets[n-1]
		e.freeSets = e.freeSets[:n-1]
	} else {
		s = new(lockSet)
	}
	s.members = s.room[:len(kss)]
	if e.waitSet == nil {
		e.waitSet = make(map[*waiter]*lockSet)
	}
	for i, ks := range kss {
		wt := e.newWaiter()
		a := arrival &^ waiterShared
		if modes[i] == Shared {
			a |= waiterShared
		}
		*wt = waiter{w: w, ks: ks, lease: lease, since: since, heapIdx: -1, arrival: a}
		s.members[i] = wt
		e.waitSet[wt] = s
		e.link(ks, wt)
	}
	e.nwaitSet = len(e.waitSet)
	e.waitSetPeak = max(e.waitSetPeak, e.nwaitSet)
	return s
}

// holdSet grants each of kss in its mode, as one set whose id is the
// first key's token: one Granted event each, in order.
func (e *Engine) holdSet(now time.Time, kss []*keyState, modes []Mode, lease time.Duration, w Waiter, id, value string, out []Event) []Event {
	deadline := now.UnixNano() + int64(lease)
	var set uint64
	for i, ks := range kss {
		tok := e.nextToken(now)
		if i == 0 {
			set = tok
		}
		h := e.hold(ks, tok, deadline)
		h.id = id
		e.setMode(ks, modes[i])
		e.markHeldSet(h, set)
		hi := e.granted(ks, h, value)
		out = append(out, Event{Kind: Granted, Key: ks.key, Token: tok, Lease: lease, Waiter: w, Limit: ks.limit(), ID: id, Mode: modes[i], Set: set, SetSize: len(kss), Place: hi.place, Value: hi.value})
	}
	return out
}

// grantSet grants s, which every one of its keys admits, and takes it
// out of its queues.
func (e *Engine) grantSet(now time.Time, s *lockSet, out []Event) []Event {
	lead := s.members[0]
	w, lease, id, value, since := lead.w, lead.lease, e.waiterID(lead), e.waiterValue(lead), lead.since
	var kss [MaxSetKeys]*keyState
	var modes [MaxSetKeys]Mode
	n := len(s.members)
	for i, m := range s.members {
		kss[i], modes[i] = m.ks, m.mode()
	}
	e.unlinkSet(s)
	from := len(out)
	out = e.holdSet(now, kss[:n], modes[:n], lease, w, id, value, out)
	for i := from; i < len(out); i++ {
		out[i].Queued = since
	}
	return out
}

// unlinkSet takes s out of all its queues and forgets it, leaving its
// keys in place even when nothing holds or waits on them any more.
func (e *Engine) unlinkSet(s *lockSet) {
	for _, m := range s.members {
		e.dequeue(m)
	}
	for _, m := range s.members {
		delete(e.waitSet, m)
	}
	e.forget(s.members[0])
	for _, m := range s.members[1:] {
		*m = waiter{}
		if len(e.freeWait) < 4096 {
			e.freeWait = append(e.freeWait, m)
		}
	}
	e.waitSet = shrinkMap(e.waitSet, &e.waitSetPeak)
	e.nwaitSet = len(e.waitSet)
	*s = lockSet{}
	if len(e.freeSets) < 1024 {
		e.freeSets = append(e.freeSets, s)
	}
}

// againSet serves a set acquire whose id holds or waits already: a
// re-send of the same acquire. It reports whether it answered; a set
// whose id held only some of its keys has them freed, and is to be
// served anew.
func (e *Engine) againSet(now time.Time, keys []SetKey, lease time.Duration, id, value string, try bool, w Waiter, out []Event) ([]Event, bool) {
	var hs [MaxSetKeys]*holder
	held := 0
	for i, k := range keys {
		ks := e.lookup(k.Key)
		if ks == nil {
			continue
		}
		for h := range ks.holders {
			if h.id == id && e.holderSet(h) != 0 {
				hs[i] = h
				held++
				break
			}
		}
	}
	switch {
	case held == len(keys):
		deadline := now.UnixNano() + int64(lease)
		for _, h := range hs[:held] {
			ks := h.keyOf()
			h.deadline = deadline
			heap.Fix(&e.leases, int(h.heapIdx))
			hi := e.infoOf(h)
			if value != "" && hi.value != value {
				hi.value = value
				e.setInfo(h, hi)
			}
			out = append(out, Event{Kind: Granted, Key: ks.key, Token: h.token, Lease: lease, Waiter: w, Limit: ks.limit(), Mode: ks.mode(), Set: e.holderSet(h), SetSize: held, Place: hi.place, Value: hi.value})
		}
		return out, true
	case held > 0:
		for _, h := range hs[:len(keys)] {
			if h != nil {
				ks := h.keyOf()
				out = append(out, Event{Kind: Freed, Key: ks.key, Token: h.token, Mode: ks.mode(), Set: e.holderSet(h)})
				out = e.handOn(now, h, out)
			}
		}
		return out, false
	}
	lead := e.byID[id]
	if lead == nil || try {
		return out, false
	}
	s := e.setOf(lead)
	if s == nil || len(s.members) != len(keys) {
		return out, false
	}
	for _, k := range keys {
		if !e.waitsOn(lead, k.Key) {
			return out, false
		}
	}
	if lead.w.Conn != GhostConn {
		out = e.timedOut(lead, "", out)
	}
	e.waiters.remove(lead)
	for _, m := range s.members {
		m.w, m.lease = w, lease
	}
	e.waiters.add(lead)
	e.setWaiterValue(lead, value)
	if dl, ok := e.ghostWait[lead]; ok {
		// A ghost's place claimed back: its wait is what it had left,
		// no longer its grace; its members hold nobody back any more
		// than a waiter does.
		delete(e.ghostWait, lead)
		if lead.heapIdx >= 0 {
			heap.Remove(&e.waits, int(lead.heapIdx))
		}
		if dl > 0 {
			e.waits.push(waitEntry{deadline: dl, wt: lead})
		}
		var buf [MaxSetKeys]*keyState
		for _, ks := range s.keysOf(&buf) {
			out = e.settle(now, ks, out)
		}
	}
	return out, true
}

// AddGhostSet is AddGhost for a reader, or for a set: it keeps the place
// of the previous active's waiter for keys, with id, in each of their
// queues, until an AcquireSet of the same keys with id claims it, or
// grace ends. It reports false, adding nothing, for no key or too many,
// a key named twice or with a limit of its own, a shared key of a
// semaphore, or an id already queued or holding one of keys.
func (e *Engine) AddGhostSet(now time.Time, keys []SetKey, id string, lease, waitLeft, grace time.Duration) bool {
	if id == "" || lease <= 0 || e.byID[id] != nil || len(keys) == 0 || len(keys) > MaxSetKeys {
		return false
	}
	grace = min(max(grace, time.Millisecond), MaxGhostGrace)
	var kss [MaxSetKeys]*keyState
	var limits [MaxSetKeys]int
	var modes [MaxSetKeys]Mode
	n := len(keys)
	fresh := 0
	for i, k := range keys {
		limits[i], modes[i] = max(k.Limit, 1), k.Mode
		if modes[i] > Shared || modes[i] == Shared && limits[i] != 1 {
			return false
		}
		for _, prev := range keys[:i] {
			if prev.Key == k.Key {
				return false
			}
		}
		ks := e.lookup(k.Key)
		if ks == nil {
			fresh++
			continue
		}
		if ks.limit() != limits[i] {
			return false
		}
		for h := range ks.holders {
			if h.id == id {
				return false
			}
		}
		kss[i] = ks
	}
	if fresh > 0 && e.all.len()+fresh > e.cfg.MaxKeys {
		return false
	}
	for i, k := range keys {
		if kss[i] == nil {
			kss[i] = e.newKey(k.Key, limits[i])
		}
	}
	nanos := now.UnixNano()
	e.ghosts++
	w := Waiter{Conn: GhostConn, Seq: e.ghosts}
	var lead *waiter
	if n == 1 {
		lead = e.newWaiter()
		*lead = waiter{w: w, ks: kss[0], lease: lease, since: nanos, heapIdx: -1, arrival: e.nextArrival(modes[0])}
		e.link(kss[0], lead)
	} else {
		lead = e.queueSet(kss[:n], modes[:n], w, lease, nanos, e.nextArrival(Exclusive)).members[0]
	}
	e.nameWaiter(lead, id)
	if e.ghostWait == nil {
		e.ghostWait = make(map[*waiter]int64)
	}
	var dl int64
	if waitLeft > 0 {
		dl = nanos + int64(waitLeft)
	}
	e.ghostWait[lead] = dl
	end := nanos + int64(grace)
	if dl > 0 {
		end = min(end, dl)
	}
	e.waits.push(waitEntry{deadline: end, wt: lead})
	e.waiters.add(lead)
	return true
}
