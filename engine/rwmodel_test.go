package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The walk of readers, writers, semaphores and sets: runRandomRW drives
// an engine with seeded random calls and holds every event it returns to
// a model that knows the rules, written apart from the engine's code:
//
//   - exclusion: a lock is held by one writer alone or by readers alone,
//     at most Config.MaxLimit of them; a semaphore by at most its limit;
//   - writer fairness and FIFO: a grant on a key passes no request that
//     came before it and waits on that key, except one the key admits
//     (a set waiting for another of its keys, keeping its place), and
//     never a writer;
//   - all or none: a set is granted every key at once, in one batch, or
//     none; nothing of a set that waits is held;
//   - no grant lost, no deadlock: between calls, no request waits that
//     every one of its keys admits, and when the walk ends and every
//     holder releases, every request is granted.
//
// The model also predicts every refusal, every grant at once, every
// timeout, every lease and wait left, and the events' modes, sets, ids
// and limits; and the same seed gives the same events twice.

// fataler is what the walk reports to: a test, or the recorder of the
// planted bugs' test.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

type rwReq struct {
	w        Waiter
	keys     []SetKey // limits as the key has them (0 taken as 1)
	id       string
	lease    time.Duration
	since    time.Time
	deadline time.Time // zero: forever
	arrival  int
}

func (r *rwReq) modeAt(key string) Mode {
	for _, k := range r.keys {
		if k.Key == key {
			return k.Mode
		}
	}
	panic("no key " + key)
}

func (r *rwReq) keyNames() []string {
	var s []string
	for _, k := range r.keys {
		s = append(s, k.Key)
	}
	return s
}

type rwHolder struct {
	token    uint64
	mode     Mode
	deadline time.Time
	set      uint64
	id       string
	arrival  int // of the request that got it
}

type rwModel struct {
	t        fataler
	cfg      Config
	now      time.Time
	step     int
	holders  map[string][]*rwHolder // in token order
	limits   map[string]int
	queues   map[string][]*rwReq
	waiting  map[Waiter]*rwReq
	lastTok  uint64
	tokens   []uint64
	released map[uint64]mReleased
	arrivals int
	log      []string
	// instant is when the last departure of the call being applied
	// happened: the grants after it count their leases from it.
	instant time.Time
	// lastDeadline: deadlines fire in order within a call.
	lastDeadline time.Time
	counts       map[string]int
}

func newRWModel(t fataler, cfg Config) *rwModel {
	return &rwModel{
		t: t, cfg: cfg, now: t0,
		holders: map[string][]*rwHolder{}, limits: map[string]int{}, queues: map[string][]*rwReq{},
		waiting: map[Waiter]*rwReq{}, released: map[uint64]mReleased{}, counts: map[string]int{},
	}
}

func (m *rwModel) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("step %d (%v): %s", m.step, m.now.Sub(t0), fmt.Sprintf(format, args...))
}

func (m *rwModel) limitOf(key string) int { return m.limits[key] }

// heldMode is how key's holders hold it.
func (m *rwModel) heldMode(key string) Mode {
	if hs := m.holders[key]; len(hs) > 0 {
		return hs[0].mode
	}
	return Exclusive
}

// admits is the rule of admission, as the package comment states it.
func (m *rwModel) admits(key string, mode Mode, ahead int, exclAhead bool) bool {
	n := len(m.holders[key])
	if limit := m.limitOf(key); limit > 1 {
		return n+ahead < limit
	}
	if mode == Exclusive {
		return n == 0 && ahead == 0
	}
	return (n == 0 || m.heldMode(key) == Shared) && !exclAhead && n+ahead < m.cfg.MaxLimit
}

// admitted returns the requests waiting on key that it admits: a prefix
// of its queue.
func (m *rwModel) admitted(key string) map[*rwReq]bool {
	adm := map[*rwReq]bool{}
	ahead, exclAhead := 0, false
	for _, r := range m.queues[key] {
		mode := r.modeAt(key)
		// A request whose wait ends at the instant has timed out: it
		// is answered so, and holds back whom it stands before until
		// then.
		if !m.admits(key, mode, ahead, exclAhead) || !r.deadline.IsZero() && !r.deadline.After(m.instant) {
			break
		}
		adm[r] = true
		ahead++
		exclAhead = exclAhead || mode == Exclusive
	}
	return adm
}

// admittedAtTail reports whether key would admit a new request in mode.
func (m *rwModel) admittedAtTail(key string, mode Mode) bool {
	if _, ok := m.limits[key]; !ok {
		return true
	}
	ahead, exclAhead := 0, false
	for _, r := range m.queues[key] {
		rm := r.modeAt(key)
		if !m.admits(key, rm, ahead, exclAhead) {
			return false
		}
		ahead++
		exclAhead = exclAhead || rm == Exclusive
	}
	return m.admits(key, mode, ahead, exclAhead)
}

// grantable reports whether every key of r admits it.
func (m *rwModel) grantable(r *rwReq) bool {
	for _, k := range r.keys {
		if !m.admitted(k.Key)[r] {
			return false
		}
	}
	return true
}

// stable fails if a request waits that every one of its keys admits:
// a grant lost, and a deadlock for its waiter if nothing else happens.
func (m *rwModel) stable(when string) {
	m.t.Helper()
	for _, r := range m.sortedWaiting() {
		if m.grantable(r) {
			m.fail("%s: %+v waits on %q though every key admits it: a grant lost (holders %v, queues %v)", when, r.w, r.keyNames(), m.dumpHolders(), m.dumpQueues())
		}
	}
}

func (m *rwModel) dumpHolders() string {
	var b strings.Builder
	for _, k := range slices.Sorted(mapKeys(m.holders)) {
		fmt.Fprintf(&b, "%s:", k)
		for _, h := range m.holders[k] {
			fmt.Fprintf(&b, " %d/%s", h.arrival, h.mode)
		}
		b.WriteString("; ")
	}
	return b.String()
}

func (m *rwModel) dumpQueues() string {
	var b strings.Builder
	for _, k := range slices.Sorted(mapKeys(m.queues)) {
		fmt.Fprintf(&b, "%s:", k)
		for _, r := range m.queues[k] {
			fmt.Fprintf(&b, " %d/%s", r.arrival, r.modeAt(k))
		}
		b.WriteString("; ")
	}
	return b.String()
}

func mapKeys[V any](mp map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range mp {
			if !yield(k) {
				return
			}
		}
	}
}

func (m *rwModel) sortedWaiting() []*rwReq {
	var rs []*rwReq
	for _, r := range m.waiting {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *rwReq) int { return cmp.Compare(a.arrival, b.arrival) })
	return rs
}

func (m *rwModel) keySet() map[string]bool {
	s := map[string]bool{}
	for k, hs := range m.holders {
		if len(hs) > 0 {
			s[k] = true
		}
	}
	for k, q := range m.queues {
		if len(q) > 0 {
			s[k] = true
		}
	}
	return s
}

func (m *rwModel) places() int {
	n := 0
	for _, q := range m.queues {
		n += len(q)
	}
	return n
}

func (m *rwModel) forget(key string) {
	if len(m.holders[key]) == 0 && len(m.queues[key]) == 0 {
		delete(m.holders, key)
		delete(m.queues, key)
		delete(m.limits, key)
	}
}

func (m *rwModel) unqueue(r *rwReq) {
	delete(m.waiting, r.w)
	for _, k := range r.keys {
		m.queues[k.Key] = slices.DeleteFunc(m.queues[k.Key], func(x *rwReq) bool { return x == r })
		m.forget(k.Key)
	}
}

func (m *rwModel) holder(key string, token uint64) *rwHolder {
	for _, h := range m.holders[key] {
		if h.token == token {
			return h
		}
	}
	return nil
}

// checkExclusion fails on a lock with a writer beside anyone, or with
// more readers than MaxLimit, or a semaphore past its limit.
func (m *rwModel) checkExclusion(key string) {
	m.t.Helper()
	hs := m.holders[key]
	limit := m.limitOf(key)
	if limit > 1 {
		if len(hs) > limit {
			m.fail("%s held by %d, past its limit %d", key, len(hs), limit)
		}
		return
	}
	writers, readers := 0, 0
	for _, h := range hs {
		if h.mode == Exclusive {
			writers++
		} else {
			readers++
		}
	}
	switch {
	case writers > 1:
		m.fail("%s held by %d writers at once: a writer beside a writer", key, writers)
	case writers == 1 && readers > 0:
		m.fail("%s held by a writer and %d readers: a reader beside a writer", key, readers)
	case readers > m.cfg.MaxLimit:
		m.fail("%s held by %d readers, past MaxLimit %d", key, readers, m.cfg.MaxLimit)
	}
}

// batchOf returns the events of the batch that starts at evs[i]: a set's
// SetSize events, else one.
func (m *rwModel) batchOf(evs []Event, i int) []Event {
	m.t.Helper()
	ev := evs[i]
	n := 1
	if ev.SetSize > 0 {
		n = ev.SetSize
	}
	if i+n > len(evs) {
		m.fail("a batch of %d from event %d, but %d events: %q", n, i, len(evs), brief(evs))
	}
	b := evs[i : i+n]
	for _, x := range b {
		if x.Kind != ev.Kind || x.Waiter != ev.Waiter || x.SetSize != ev.SetSize {
			m.fail("batch %q not of one kind, waiter and size", brief(b))
		}
	}
	return b
}

// grant checks and applies the grant of r in batch, at m.instant.
func (m *rwModel) grant(r *rwReq, batch []Event, queued bool) {
	m.t.Helper()
	if len(batch) != len(r.keys) {
		m.fail("%+v granted %d keys of %d: a set is all or none (%q)", r.w, len(batch), len(r.keys), brief(batch))
	}
	set := len(r.keys) > 1
	for i, ev := range batch {
		k := r.keys[i]
		if ev.Key != k.Key || ev.Mode != k.Mode || ev.Lease != r.lease || ev.ID != r.id || ev.Limit != max(k.Limit, 1) {
			m.fail("grant %d of %+v: %+v; want key %s mode %s lease %s id %q limit %d", i, r.w, ev, k.Key, k.Mode, r.lease, r.id, k.Limit)
		}
		if set != (ev.SetSize > 0) || set && (ev.Set != batch[0].Token || ev.SetSize != len(r.keys)) || !set && ev.Set != 0 {
			m.fail("grant %+v: set %d size %d; want the first token %d as set id of %d keys", ev, ev.Set, ev.SetSize, batch[0].Token, len(r.keys))
		}
		if ev.Token <= m.lastTok || nodeOf(ev.Token) != m.cfg.Node {
			m.fail("granted token %#x not above %#x, or not this node's", ev.Token, m.lastTok)
		}
		m.lastTok = ev.Token
	}
	if queued && !r.deadline.IsZero() && !r.deadline.After(m.instant) {
		m.fail("%+v granted at %v; its wait ended at %v", r.w, m.instant.Sub(t0), r.deadline.Sub(t0))
	}
	// Writer fairness, stated on its own: no writer that came before r
	// and waits on one of its keys is passed (a request granted at once
	// came after every request that waits).
	for _, k := range r.keys {
		if m.limitOf(k.Key) > 1 {
			continue
		}
		for _, x := range m.queues[k.Key] {
			if x != r && (!queued || x.arrival < r.arrival) && x.modeAt(k.Key) == Exclusive {
				m.fail("writer fairness: %+v (%s) granted %s past writer %+v that came before it", r.w, k.Mode, k.Key, x.w)
			}
		}
	}
	// FIFO and the rest of the rule: every key admits r. Judged before
	// the grant, failed on after the exclusion check, which names the
	// worse fault.
	var refusing []string
	for _, k := range r.keys {
		if queued && !m.admitted(k.Key)[r] || !queued && !m.admittedAtTail(k.Key, k.Mode) {
			refusing = append(refusing, k.Key)
		}
	}
	where := fmt.Sprintf("holders %v, queues %v", m.dumpHolders(), m.dumpQueues())
	if queued {
		m.unqueue(r)
	}
	for i, ev := range batch {
		k := r.keys[i]
		m.limits[k.Key] = max(k.Limit, 1)
		m.holders[k.Key] = append(m.holders[k.Key], &rwHolder{token: ev.Token, mode: k.Mode, deadline: m.instant.Add(r.lease), set: ev.Set, id: r.id, arrival: r.arrival})
		m.tokens = append(m.tokens, ev.Token)
		m.checkExclusion(k.Key)
	}
	if len(refusing) > 0 {
		m.fail("%+v granted %q (queued %v), which do not admit it (%s)", r.w, refusing, queued, where)
	}
	// All or none: nothing of a request still waiting is held.
	for _, x := range m.waiting {
		for _, k := range x.keys {
			for _, h := range m.holders[k.Key] {
				if h.arrival == x.arrival {
					m.fail("%+v holds %s while it waits for its other keys: a partial set", x.w, k.Key)
				}
			}
		}
	}
	m.counts["granted"]++
	if set {
		m.counts["set granted"]++
		if queued {
			m.counts["set granted after waiting"]++
		}
	}
	for _, k := range r.keys {
		if k.Mode == Shared && len(m.holders[k.Key]) > 1 {
			m.counts["readers together"]++
		}
		if k.Mode == Shared && queued {
			m.counts["reader granted after waiting"]++
		}
	}
}

// timeOut checks and applies a timeout of r in batch.
func (m *rwModel) timeOut(r *rwReq, batch []Event, wantID string) {
	m.t.Helper()
	if len(batch) != len(r.keys) {
		m.fail("%+v timed out on %d keys of %d", r.w, len(batch), len(r.keys))
	}
	for i, ev := range batch {
		k := r.keys[i]
		if ev.Key != k.Key || ev.Mode != k.Mode || ev.ID != wantID || (len(r.keys) > 1) != (ev.SetSize > 0) {
			m.fail("timeout %d of %+v: %+v; want key %s mode %s id %q", i, r.w, ev, k.Key, k.Mode, wantID)
		}
	}
	m.counts["timed out"]++
	if len(r.keys) > 1 {
		m.counts["set timed out"]++
	}
}

type callKind int

const (
	callOther callKind = iota
	callAcquire
	callRelease
	callDrop
)

// apply checks the events of one call and applies them; asker is the
// request of an Acquire, whose own outcome (a grant at once, or the T of
// a try) is the last batch and is returned rather than applied.
func (m *rwModel) apply(evs []Event, kind callKind, asker *rwReq) []Event {
	m.t.Helper()
	m.instant = m.now
	m.lastDeadline = time.Time{}
	for i := 0; i < len(evs); {
		batch := m.batchOf(evs, i)
		ev := batch[0]
		m.log = append(m.log, brief(batch)...)
		for _, x := range batch {
			m.log = append(m.log, fmt.Sprint(x.Token, x.Set, x.ID, x.Limit, x.Lease))
		}
		last := i+len(batch) == len(evs)
		i += len(batch)
		switch ev.Kind {
		case Freed:
			m.stable("before a holder goes")
			h := m.holder(ev.Key, ev.Token)
			if h == nil {
				m.fail("freed %s %d, which the model has no holder of", ev.Key, ev.Token)
			}
			if ev.Mode != h.mode || ev.Set != h.set {
				m.fail("freed %+v; holder %+v", ev, h)
			}
			if ev.Expired {
				if h.deadline.After(m.now) || h.deadline.Before(m.lastDeadline) {
					m.fail("%s expired at %v; deadline %v, after %v", ev.Key, m.now.Sub(t0), h.deadline.Sub(t0), m.lastDeadline.Sub(t0))
				}
				m.lastDeadline, m.instant = h.deadline, h.deadline
				m.counts["expired"]++
			} else {
				if kind != callRelease || !h.deadline.After(m.now) {
					m.fail("%s freed by a call that is no release, or past its lease", ev.Key)
				}
				m.instant = m.now
				m.released[ev.Token] = mReleased{ev.Key, m.now}
			}
			m.holders[ev.Key] = slices.DeleteFunc(m.holders[ev.Key], func(x *rwHolder) bool { return x == h })
			m.forget(ev.Key)
		case Granted:
			if r := m.waiting[ev.Waiter]; r != nil {
				m.grant(r, batch, true)
				continue
			}
			if asker != nil && asker.w == ev.Waiter && last && kind == callAcquire {
				return batch
			}
			m.fail("granted %q to %+v, who neither waits nor asks", brief(batch), ev.Waiter)
		case TimedOut:
			if r := m.waiting[ev.Waiter]; r != nil {
				if kind == callDrop {
					m.timeOut(r, batch, "")
				} else {
					m.stable("before a wait runs out")
					if r.deadline.IsZero() || r.deadline.After(m.now) || r.deadline.Before(m.lastDeadline) {
						m.fail("%+v timed out at %v; its wait ends at %v", r.w, m.now.Sub(t0), r.deadline.Sub(t0))
					}
					m.lastDeadline, m.instant = r.deadline, r.deadline
					m.timeOut(r, batch, r.id)
				}
				m.unqueue(r)
				continue
			}
			if asker != nil && asker.w == ev.Waiter && last && kind == callAcquire {
				return batch
			}
			m.fail("timed out %q of %+v, who neither waits nor asks", brief(batch), ev.Waiter)
		case Renewed:
			h := m.holder(ev.Key, ev.Token)
			if h == nil || ev.Mode != h.mode || ev.Set != h.set || ev.Limit != m.limitOf(ev.Key) {
				m.fail("renewed %+v; holder %+v", ev, h)
			}
			h.deadline = m.now.Add(ev.Lease)
		default:
			m.fail("unknown event %+v", ev)
		}
	}
	return nil
}

// wantRefusal is the refusal the engine owes the acquire r (keys as
// asked, before normalising), or nil.
func (m *rwModel) wantRefusal(r *rwReq, asked []SetKey, lease, wait time.Duration) error {
	cfg := m.cfg
	switch {
	case lease <= 0 || lease > cfg.MaxLease:
		return ErrLeaseRange
	case wait < 0 || wait > cfg.MaxWait:
		return ErrWaitRange
	case len(asked) == 0 || len(asked) > MaxSetKeys:
		return ErrSetKeys
	}
	for i, k := range asked {
		l := max(k.Limit, 1)
		switch {
		case k.Limit < 0 || l > cfg.MaxLimit:
			return ErrLimitRange
		case k.Mode > Shared || k.Mode == Shared && l != 1:
			return ErrSharedLimit
		}
		for _, p := range asked[:i] {
			if p.Key == k.Key {
				return ErrSetKeys
			}
		}
	}
	if m.waiting[r.w] != nil {
		return ErrDuplicateWaitr
	}
	keys := m.keySet()
	fresh := 0
	for _, k := range asked {
		if !keys[k.Key] {
			fresh++
		}
	}
	if fresh > 0 && len(keys)+fresh > cfg.MaxKeys {
		return ErrTooManyKeys
	}
	for _, k := range asked {
		if l, ok := m.limits[k.Key]; ok && l != max(k.Limit, 1) {
			return ErrLimitMismatch
		}
	}
	return nil
}

// wantQueueRefusal is the refusal of a request that waits, or nil.
func (m *rwModel) wantQueueRefusal(r *rwReq) error {
	for _, k := range r.keys {
		if len(m.queues[k.Key]) >= m.cfg.MaxWaitersPerKey {
			return ErrQueueFull
		}
	}
	if m.places()+len(r.keys) > m.cfg.MaxWaiters {
		return ErrTooManyWaiters
	}
	return nil
}

// check compares the engine's whole visible state with the model.
func (m *rwModel) check(e *Engine) {
	m.t.Helper()
	m.stable("between calls")
	keys := m.keySet()
	got, total := e.Keys(func(string) bool { return true }, 1000)
	want := slices.Sorted(mapKeys(keys))
	if total != len(want) || !slices.Equal(got, want) {
		m.fail("Keys = %q; model %q", got, want)
	}
	var next time.Time
	earliest := func(d time.Time) {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	nheld := 0
	for _, k := range want {
		hs, ws := e.Inspect(m.now, k)
		hs, msg := placesOf(hs)
		if msg != "" {
			m.fail("%s", msg)
		}
		mhs := m.holders[k]
		nheld += len(hs)
		if len(hs) != len(mhs) {
			m.fail("%s holders %+v; model %d", k, hs, len(mhs))
		}
		for i, h := range hs {
			mh := mhs[i]
			wantH := Holder{Key: k, Token: mh.token, LeaseLeft: mh.deadline.Sub(m.now), Limit: m.limitOf(k), ID: mh.id, Mode: mh.mode, Set: mh.set}
			if h != wantH || h.LeaseLeft <= 0 {
				m.fail("%s holder %d %+v; model %+v", k, i, h, wantH)
			}
			earliest(mh.deadline)
		}
		q := m.queues[k]
		if len(ws) != len(q) {
			m.fail("%s waiters %+v; model %d", k, ws, len(q))
		}
		for i, wi := range ws {
			r := q[i]
			wantW := WaiterInfo{Waiter: r.w, Waited: m.now.Sub(r.since), Lease: r.lease, ID: r.id, Mode: r.modeAt(k)}
			if len(r.keys) > 1 {
				wantW.Set = r.keys
			}
			if !r.deadline.IsZero() {
				wantW.WaitLeft = r.deadline.Sub(m.now)
				if i == 0 || q[i-1] != r {
					earliest(r.deadline)
				}
			}
			if !reflect.DeepEqual(wi, wantW) {
				m.fail("%s waiter %d %+v; model %+v", k, i, wi, wantW)
			}
		}
	}
	if nk, nw := e.Stats(); nk != len(want) || nw != m.places() {
		m.fail("Stats %d keys %d waiters; model %d, %d", nk, nw, len(want), m.places())
	}
	if e.Held() != nheld {
		m.fail("Held %d; holders %d", e.Held(), nheld)
	}
	if d, ok := e.NextDeadline(); ok != !next.IsZero() || ok && !d.Equal(next) {
		m.fail("NextDeadline %v %v; model %v", d.Sub(t0), ok, next.Sub(t0))
	}
	if e.LastToken() != m.lastTok {
		m.fail("LastToken %d; model %d", e.LastToken(), m.lastTok)
	}
}

// checkSnapshot restores a snapshot into a fresh engine: the same
// holders, modes and sets, and nothing else.
func (m *rwModel) checkSnapshot(e *Engine) {
	m.t.Helper()
	s := e.Snapshot(m.now)
	r := New(Config{Node: (m.cfg.Node + 1) % MaxNodes, MaxLease: m.cfg.MaxLease}, m.now)
	r.Restore(m.now, s, nil)
	if rs := r.Snapshot(m.now); !reflect.DeepEqual(rs, s) {
		m.fail("restored snapshot %+v; want %+v", rs, s)
	}
}

type rwWalk struct {
	sets   bool // acquires of several keys, and semaphores
	bug    bug  // planted
	steps  int
	drains bool
}

// runRandomRW walks an engine for w.steps calls from seed and returns
// the events, rendered.
func runRandomRW(t fataler, seed uint64, w rwWalk) *rwModel {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x7a7a))
	// The caps are low, so that the walk reaches each of them.
	cfg := Config{Node: int(seed % MaxNodes), MaxKeys: 4, MaxWaitersPerKey: 2, MaxWaiters: 3, MaxLease: 3 * time.Second, MaxWait: 4 * time.Second, MaxLimit: 3}
	limits := map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1}
	if w.sets {
		limits["e"], limits["f"] = 2, 3
		cfg.MaxKeys, cfg.MaxWaitersPerKey, cfg.MaxWaiters = 5, 3, 7
	}
	names := []string{"a", "b", "c", "d", "e", "f"}
	e := New(cfg, t0)
	e.planted = w.bug
	m := newRWModel(t, cfg)
	seqs := map[uint64]uint64{}
	ids := 0
	tick := func(n int) time.Duration { return time.Duration(n) * 100 * time.Millisecond }
	refused := map[error]int{}
	for m.step = 0; m.step < w.steps; m.step++ {
		op := rng.IntN(100)
		if op < 75 && rng.IntN(2) == 0 {
			m.now = m.now.Add(tick(rng.IntN(6)))
		}
		switch {
		case op < 45: // Acquire, of one key or several
			n := 1
			if w.sets && rng.IntN(2) == 0 {
				n = 2 + rng.IntN(2)
			}
			var asked []SetKey
			for _, i := range rng.Perm(len(names))[:n] {
				key := names[i]
				if rng.IntN(3) > 0 {
					key = names[rng.IntN(3)] // crowd a, b and c
				}
				k := SetKey{Key: key, Limit: limits[key]}
				if k.Limit == 1 && rng.IntN(5) > 0 {
					k.Limit = 0 // 0 is 1
				}
				if limits[key] == 1 && rng.IntN(2) == 0 {
					k.Mode = Shared
				}
				switch rng.IntN(60) {
				case 0:
					k.Limit = 2 // a mismatch, or a new key's limit
				case 1:
					k.Mode = Shared // a reader of a semaphore, when it is one
				case 2:
					k.Limit = cfg.MaxLimit + 1
				}
				asked = append(asked, k)
			}
			if rng.IntN(80) == 0 {
				asked = append(asked, asked[0]) // a key twice
			}
			lease := tick(1 + rng.IntN(30))
			wait := time.Duration(0)
			if rng.IntN(4) > 0 {
				wait = tick(1 + rng.IntN(40))
			}
			switch rng.IntN(50) {
			case 0:
				lease = cfg.MaxLease + 1
			case 1:
				wait = cfg.MaxWait + 1
			}
			try := rng.IntN(8) == 0
			conn := uint64(1 + rng.IntN(4))
			wtr := Waiter{Conn: conn, Seq: seqs[conn]}
			if len(m.waiting) > 0 && rng.IntN(25) == 0 {
				ws := m.sortedWaiting()
				wtr = ws[rng.IntN(len(ws))].w
			} else {
				seqs[conn]++
			}
			ids++
			id := fmt.Sprint("r", ids)
			m.arrivals++
			r := &rwReq{w: wtr, id: id, lease: lease, since: m.now, arrival: m.arrivals}
			for _, k := range asked {
				k.Limit = max(k.Limit, 1)
				r.keys = append(r.keys, k)
			}
			if wait > 0 && !try {
				r.deadline = m.now.Add(wait)
			}
			var out []Event
			var err error
			if try {
				out, err = e.TryAcquireSet(m.now, asked, lease, id, wtr, nil)
				wait = 0
			} else {
				out, err = e.AcquireSet(m.now, asked, lease, wait, id, wtr, nil)
			}
			own := m.apply(out, callAcquire, r)
			want := m.wantRefusal(r, asked, lease, wait)
			admitted := want == nil
			if admitted {
				for _, k := range r.keys {
					admitted = admitted && m.admittedAtTail(k.Key, k.Mode)
				}
			}
			if want == nil && !admitted && !try {
				want = m.wantQueueRefusal(r)
			}
			if !errors.Is(err, want) || (want == nil) != (err == nil) {
				m.fail("AcquireSet(%+v, %s, %s, try %v) by %+v: error %v; model %v", asked, lease, wait, try, wtr, err, want)
			}
			if want != nil {
				refused[want]++
				if own != nil {
					m.fail("refused (%v) and answered %q", err, brief(own))
				}
				break
			}
			m.instant = m.now
			switch {
			case own != nil && own[0].Kind == Granted:
				m.grant(r, own, false) // fails if the keys do not admit r
			case admitted:
				m.fail("%+v: every key admits %+v; the engine answered %q", wtr, r.keys, brief(own))
			case try:
				if own == nil || own[0].Kind != TimedOut {
					m.fail("try %+v not admitted; answered %q", r.keys, brief(own))
				}
				m.timeOut(r, own, "")
				m.counts["try refused"]++
			default:
				if own != nil {
					m.fail("%+v: keys %+v do not all admit it; the engine answered %q", wtr, r.keys, brief(own))
				}
				for _, k := range r.keys {
					m.queues[k.Key] = append(m.queues[k.Key], r)
					m.limits[k.Key] = k.Limit
				}
				m.waiting[wtr] = r
				m.counts["queued"]++
				for _, k := range r.keys {
					if m.admitted(k.Key)[r] && len(r.keys) > 1 {
						m.counts["set keeps a place"]++
						break
					}
				}
			}
		case op < 60: // Release
			key := names[rng.IntN(len(names))]
			tok := m.pickToken(rng, key)
			out, ok := e.Release(m.now, key, tok, nil)
			m.apply(out, callRelease, nil)
			freed := slices.ContainsFunc(out, func(ev Event) bool { return ev.Kind == Freed && !ev.Expired })
			again := false
			if at, was := m.released[tok]; was && !freed && at.key == key && m.now.Sub(at.at) < ReleasedMemory {
				again = true
			}
			if ok != (freed || again) {
				m.fail("Release(%s, %d) = %v; freed %v, released before %v", key, tok, ok, freed, again)
			}
		case op < 66: // Renew
			key := names[rng.IntN(len(names))]
			tok := m.pickToken(rng, key)
			out, err := e.Renew(m.now, key, tok, tick(1+rng.IntN(30)), nil)
			m.apply(out, callOther, nil)
			if held := m.holder(key, tok) != nil; held != (err == nil) {
				m.fail("Renew(%s, %d): %v; model holds %v", key, tok, err, held)
			}
		case op < 82: // Cancel or Withdraw, the waiter leaving
			m.apply(e.Advance(m.now, nil), callOther, nil)
			var r *rwReq
			if ws := m.sortedWaiting(); len(ws) > 0 && rng.IntN(4) > 0 {
				r = ws[rng.IntN(len(ws))]
				// Half the time, a writer with readers behind it.
				if held := m.holdingBack(); len(held) > 0 && rng.IntN(2) == 0 {
					r = held[rng.IntN(len(held))]
				}
			}
			var out []Event
			var ok bool
			if rng.IntN(2) == 0 {
				w := Waiter{Conn: uint64(1 + rng.IntN(4)), Seq: uint64(rng.IntN(9))}
				if r != nil {
					w = r.w
				}
				r = m.waiting[w]
				out, ok = e.Cancel(m.now, w, nil)
			} else {
				key, id, conn := names[rng.IntN(len(names))], "none", uint64(1)
				if r != nil {
					key, id, conn = r.keys[rng.IntN(len(r.keys))].Key, r.id, r.w.Conn
					if rng.IntN(8) == 0 {
						conn++ // another connection's: refused
					}
				}
				var w Waiter
				out, w, ok = e.Withdraw(m.now, key, id, conn, nil)
				if r != nil && (conn != r.w.Conn || ok && w != r.w) {
					r = nil
				}
			}
			if ok != (r != nil) {
				m.fail("the waiter leaving: ok %v; model %+v", ok, r)
			}
			if r != nil {
				m.stable("before a waiter leaves")
				m.unqueue(r)
				m.counts["left"]++
				if len(out) > 0 {
					m.counts["leaving lets through"]++
				}
			}
			m.apply(out, callOther, nil)
		case op < 98: // Advance, sometimes to the next deadline exactly
			switch d, ok := e.NextDeadline(); {
			case ok && rng.IntN(3) == 0 && !d.Before(m.now):
				m.now = d
			default:
				m.now = m.now.Add(tick(rng.IntN(8)))
			}
			m.apply(e.Advance(m.now, nil), callOther, nil)
		default:
			m.apply(e.DropWaiters(nil), callDrop, nil)
			if len(m.waiting) > 0 {
				m.fail("DropWaiters left %d waiting", len(m.waiting))
			}
		}
		m.check(e)
		if m.step%50 == 0 {
			m.checkSnapshot(e)
		}
	}
	if w.drains {
		m.drain(e)
	}
	for _, err := range []error{ErrQueueFull, ErrTooManyWaiters, ErrTooManyKeys, ErrLimitMismatch, ErrSharedLimit, ErrSetKeys} {
		if !w.sets && (err == ErrSharedLimit || err == ErrSetKeys) {
			continue
		}
		m.counts["refused "+err.Error()] = refused[err]
	}
	return m
}

// drain releases every holder, at one instant, until nothing is held:
// every request that waits must be granted in turn, none left behind.
func (m *rwModel) drain(e *Engine) {
	m.t.Helper()
	for round := 0; len(m.keySet()) > 0; round++ {
		if round > 1000 {
			m.fail("requests still wait after %d rounds of releases: a deadlock (queues %v)", round, m.dumpQueues())
		}
		for _, k := range slices.Sorted(mapKeys(m.holders)) {
			for _, h := range slices.Clone(m.holders[k]) {
				out, ok := e.Release(m.now, k, h.token, nil)
				if !ok {
					m.fail("drain: release of %s %d refused", k, h.token)
				}
				m.apply(out, callRelease, nil)
			}
		}
		m.check(e)
		if len(m.holders) == 0 && len(m.waiting) > 0 {
			m.fail("nothing held, and %d requests wait", len(m.waiting))
		}
	}
}

// holdingBack returns the requests that wait as writers of a key with
// readers waiting behind them.
func (m *rwModel) holdingBack() []*rwReq {
	var rs []*rwReq
	for _, r := range m.sortedWaiting() {
		for _, k := range r.keys {
			q := m.queues[k.Key]
			i := slices.Index(q, r)
			if k.Mode == Exclusive && slices.ContainsFunc(q[i+1:], func(x *rwReq) bool { return x.modeAt(k.Key) == Shared }) {
				rs = append(rs, r)
				break
			}
		}
	}
	return rs
}

func (m *rwModel) pickToken(rng *rand.Rand, key string) uint64 {
	if hs := m.holders[key]; len(hs) > 0 && rng.IntN(3) > 0 {
		return hs[rng.IntN(len(hs))].token
	}
	if len(m.tokens) > 0 && rng.IntN(2) == 0 {
		return m.tokens[rng.IntN(len(m.tokens))]
	}
	return m.lastTok + 1
}

// TestRandomReadWrite walks locks taken by readers and writers, one key
// at a time, against the model.
func TestRandomReadWrite(t *testing.T) {
	runWalks(t, rwWalk{steps: 4000, drains: true}, []string{
		"readers together", "reader granted after waiting", "expired", "timed out", "queued", "left", "leaving lets through", "try refused",
		"refused queue full", "refused too many waiters", "refused too many keys", "refused limit mismatch",
	})
}

// TestRandomSets walks sets of one to three keys, readers and writers
// of locks and places of semaphores, against the model.
func TestRandomSets(t *testing.T) {
	runWalks(t, rwWalk{sets: true, steps: 4000, drains: true}, []string{
		"readers together", "reader granted after waiting", "set granted", "set granted after waiting", "set timed out", "set keeps a place",
		"expired", "timed out", "left", "leaving lets through", "try refused",
		"refused queue full", "refused too many waiters", "refused too many keys", "refused limit mismatch", "refused shared semaphore", "refused bad set of keys",
	})
}

func runWalks(t *testing.T, w rwWalk, want []string) {
	if testing.Short() {
		w.steps = 500
	}
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			m1 := runRandomRW(t, seed, w)
			m2 := runRandomRW(t, seed, w)
			if !slices.Equal(m1.log, m2.log) {
				t.Fatal("the same calls at the same times gave different events")
			}
			if testing.Short() {
				return
			}
			// The walk must reach every outcome, or it proves little.
			for _, c := range want {
				if m1.counts[c] < 3 {
					t.Errorf("only %d %q in %d steps: %v", m1.counts[c], c, w.steps, m1.counts)
				}
			}
		})
	}
}
