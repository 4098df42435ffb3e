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

func epochOf(tok uint64) uint64   { return tok >> CounterBits }
func counterOf(tok uint64) uint64 { return tok & belowEpoch >> NodeBits }
func nodeOf(tok uint64) int       { return int(tok & (MaxNodes - 1)) }

// belowEpoch is every bit below the epoch: epoch<<CounterBits|belowEpoch
// is the largest token of an epoch, whatever its counter and node.
const belowEpoch = 1<<CounterBits - 1

// nextGrant takes and gives back a fresh key and returns the token.
func nextGrant(t *testing.T, e *Engine, now time.Time) uint64 {
	t.Helper()
	out, err := e.Acquire(now, "probe", 1, time.Second, 0, Waiter{Conn: 1 << 60}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := grantOf(t, out, Waiter{Conn: 1 << 60}).Token
	if _, ok := e.Release(now, "probe", tok, nil); !ok {
		t.Fatal("probe release refused")
	}
	return tok
}

func TestTokenLayout(t *testing.T) {
	for _, node := range []int{0, 1, 9, MaxNodes - 1} {
		e := New(Config{Node: node}, t0)
		tok := nextGrant(t, e, t0)
		if epochOf(tok) != uint64(t0.UnixMilli()) || counterOf(tok) != 1 || nodeOf(tok) != node {
			t.Fatalf("first token %d = epoch %d counter %d node %d; want epoch %d counter 1 node %d",
				tok, epochOf(tok), counterOf(tok), nodeOf(tok), t0.UnixMilli(), node)
		}
		want := uint64(t0.UnixMilli())<<CounterBits | 1<<NodeBits | uint64(node)
		if tok != want {
			t.Fatalf("node %d: first token %#x; want %#x", node, tok, want)
		}
		if e.LastToken() != tok || e.HighWater() != tok {
			t.Fatalf("LastToken %d HighWater %d; want %d", e.LastToken(), e.HighWater(), tok)
		}
		if next := nextGrant(t, e, t0); next != tok+1<<NodeBits {
			t.Fatalf("node %d: second token %#x; want %#x", node, next, tok+1<<NodeBits)
		}
	}
	if New(Config{}, t0).LastToken() != 0 {
		t.Fatal("a new engine reports a last token")
	}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"defaults", DefaultConfig, true},
		{"last node", Config{Node: MaxNodes - 1}, true},
		{"node past the last", Config{Node: MaxNodes}, false},
		{"negative node", Config{Node: -1}, false},
		{"negative keys", Config{MaxKeys: -1}, false},
		{"negative waiters per key", Config{MaxWaitersPerKey: -1}, false},
		{"negative waiters", Config{MaxWaiters: -1}, false},
		{"negative lease", Config{MaxLease: -1}, false},
		{"negative wait", Config{MaxWait: -1}, false},
		{"negative limit", Config{MaxLimit: -1}, false},
	} {
		err := c.cfg.Check()
		if (err == nil) != c.ok {
			t.Errorf("%s: Check() = %v; want ok %v", c.name, err, c.ok)
		}
	}
	if err := (Config{Node: MaxNodes}).Check(); err == nil || !strings.Contains(err.Error(), "--peers") {
		t.Errorf("Check() = %v; want an error that names --peers", err)
	}
}

func TestNewPanicsOnNodeOutOfRange(t *testing.T) {
	for _, node := range []int{-1, MaxNodes, 1 << 20} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New with node %d did not panic", node)
				}
			}()
			New(Config{Node: node}, t0)
		}()
	}
}

func TestTokensStrictlyIncrease(t *testing.T) {
	e := New(Config{}, t0)
	now := t0
	var last uint64
	check := func(evs []Event) {
		for _, ev := range evs {
			if ev.Kind != Granted {
				continue
			}
			if ev.Token <= last {
				t.Fatalf("token %d after %d", ev.Token, last)
			}
			last = ev.Token
		}
	}
	// Grants of free keys, hand-offs by release and by expiry, interleaved.
	toks := map[string]uint64{}
	for i := range 20000 {
		key := fmt.Sprint("k", i%7)
		out, err := e.Acquire(now, key, 1, time.Duration(1+i%5)*time.Millisecond, 0, Waiter{Conn: uint64(i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(out)
		for _, ev := range out {
			if ev.Kind == Granted {
				toks[ev.Key] = ev.Token
			}
		}
		if i%3 == 0 {
			out, _ = e.Release(now, key, toks[key], nil)
			check(out)
		}
		now = now.Add(time.Duration(i%2) * time.Millisecond)
		out = e.Advance(now, nil)
		check(out)
		for _, ev := range out {
			if ev.Kind == Granted {
				toks[ev.Key] = ev.Token
			}
		}
	}
	if last != e.LastToken() {
		t.Fatalf("LastToken %d; last granted %d", e.LastToken(), last)
	}
}

func TestTokenCounterOverflow(t *testing.T) {
	for _, c := range []struct {
		name      string
		now       time.Time
		wantEpoch uint64
	}{
		// Within the same millisecond the epoch steps by one...
		{"same millisecond", t0, uint64(t0.UnixMilli()) + 1},
		// ...later it jumps to the wall clock, so it does not run ahead.
		{"an hour later", at(time.Hour), uint64(at(time.Hour).UnixMilli())},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := New(Config{Node: 5}, t0)
			e.counter = counterMax - 2
			var toks []uint64
			for range 4 {
				toks = append(toks, nextGrant(t, e, c.now))
			}
			old := uint64(t0.UnixMilli())
			if epochOf(toks[1]) != old || counterOf(toks[1]) != counterMax {
				t.Fatalf("token before overflow: epoch %d counter %d", epochOf(toks[1]), counterOf(toks[1]))
			}
			if epochOf(toks[2]) != c.wantEpoch || counterOf(toks[2]) != 1 {
				t.Fatalf("token after overflow: epoch %d counter %d; want epoch %d counter 1",
					epochOf(toks[2]), counterOf(toks[2]), c.wantEpoch)
			}
			for _, tok := range toks {
				if nodeOf(tok) != 5 {
					t.Fatalf("token %#x lost its node across the overflow", tok)
				}
			}
			for i := 1; i < len(toks); i++ {
				if toks[i] <= toks[i-1] {
					t.Fatalf("tokens not increasing across overflow: %d", toks)
				}
			}
		})
	}
}

// TestTokenCounterOverflowByGrants runs the counter out the slow way, by
// counterMax+1 real grants.
func TestTokenCounterOverflowByGrants(t *testing.T) {
	if testing.Short() {
		t.Skip("262144 grants")
	}
	e := New(Config{}, t0)
	out := make([]Event, 0, 4)
	var last uint64
	for i := 0; i <= counterMax; i++ {
		out, _ = e.Acquire(t0, "k", 1, time.Second, 0, Waiter{}, out[:0])
		tok := out[0].Token
		if tok <= last {
			t.Fatalf("grant %d: token %d after %d", i, tok, last)
		}
		last = tok
		out, _ = e.Release(t0, "k", tok, out[:0])
	}
	if epochOf(last) != uint64(t0.UnixMilli())+1 || counterOf(last) != 1 {
		t.Fatalf("after %d grants: epoch %d counter %d", counterMax+1, epochOf(last), counterOf(last))
	}
}

// TestTwoNodesSucceedTogether is the aborted handoff: two nodes that know
// the same high-water mark both become active in the same millisecond.
// They start the same epoch, and only the node bits keep their tokens
// apart.
func TestTwoNodesSucceedTogether(t *testing.T) {
	old := New(Config{Node: 2}, t0)
	for range 5 {
		nextGrant(t, old, t0)
	}
	a, b := New(Config{Node: 0}, t0), New(Config{Node: 1}, t0)
	a.Observe(t0, old.HighWater())
	b.Observe(t0, old.HighWater())
	a.Succeed(t0)
	b.Succeed(t0)
	ta, tb := nextGrant(t, a, t0), nextGrant(t, b, t0)
	if epochOf(ta) != epochOf(tb) || counterOf(ta) != counterOf(tb) {
		t.Fatalf("tokens %#x and %#x: the scenario should give the same epoch and counter", ta, tb)
	}
	if ta == tb {
		t.Fatalf("both nodes issued token %#x", ta)
	}
	if ta <= old.LastToken() || tb <= old.LastToken() {
		t.Fatalf("tokens %#x and %#x not above the old active's %#x", ta, tb, old.LastToken())
	}
}

// TestNodesNeverShareTokens drives two or three engines, each with its own
// Node and a clock a few milliseconds off the others', through a seeded
// random interleaving of grants, observations of each other's tokens,
// promotions (Succeed), simultaneous promotions from a common high-water
// mark, and counter overflows. No token may be issued twice, by one node
// or by two, and every token a node issues must exceed every token it
// issued or accepted (Observe) before, and everything it knew of when it
// was promoted.
func TestNodesNeverShareTokens(t *testing.T) {
	steps := 20000
	if testing.Short() {
		steps = 2000
	}
	type peer struct {
		e     *Engine
		node  int
		skew  time.Duration
		floor uint64 // every later token must exceed it
	}
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x70c))
			peers := make([]*peer, 2+seed%2)
			nodes := rng.Perm(MaxNodes)
			for i := range peers {
				skew := time.Duration(rng.IntN(5)-2) * time.Millisecond
				peers[i] = &peer{node: nodes[i], skew: skew, e: New(Config{Node: nodes[i]}, t0.Add(skew))}
			}
			other := func(p *peer) *peer {
				for {
					if q := peers[rng.IntN(len(peers))]; q != p {
						return q
					}
				}
			}
			issued := map[uint64]int{} // token: the node that issued it
			var all []uint64
			now := t0
			grants := 0
			for step := range steps {
				p := peers[rng.IntN(len(peers))]
				pnow := now.Add(p.skew)
				switch op := rng.IntN(100); {
				case op < 50:
					tok := nextGrant(t, p.e, pnow)
					if nodeOf(tok) != p.node {
						t.Fatalf("step %d: node %d issued %#x, whose node bits say %d", step, p.node, tok, nodeOf(tok))
					}
					if n, dup := issued[tok]; dup {
						t.Fatalf("step %d: node %d issued %#x, already issued by node %d", step, p.node, tok, n)
					}
					if tok <= p.floor {
						t.Fatalf("step %d: node %d issued %#x, not above %#x", step, p.node, tok, p.floor)
					}
					issued[tok] = p.node
					all = append(all, tok)
					p.floor = tok
					grants++
				case op < 75:
					// Heartbeats and replication carry another node's
					// latest or highest token, sometimes an old one.
					q := other(p)
					tok := q.e.LastToken()
					switch {
					case rng.IntN(3) == 0:
						tok = q.e.HighWater()
					case rng.IntN(3) == 0 && len(all) > 0:
						tok = all[rng.IntN(len(all))]
					}
					if !p.e.Observe(pnow, tok) {
						t.Fatalf("step %d: node %d ignored %#x from a clock milliseconds off", step, p.node, tok)
					}
					p.floor = max(p.floor, tok)
				case op < 85:
					p.e.Succeed(pnow)
					p.floor = max(p.floor, p.e.HighWater())
				case op < 90:
					// An aborted handoff: both learn the same high-water
					// mark and both take over at the same instant.
					q := other(p)
					q.e.Observe(now.Add(q.skew), p.e.HighWater())
					p.e.Observe(pnow, q.e.HighWater())
					for _, r := range []*peer{p, q} {
						r.e.Succeed(now.Add(r.skew))
						r.floor = max(r.floor, r.e.HighWater())
					}
				case op < 93:
					// Bring the overflow near, never rewinding the counter.
					p.e.counter = max(p.e.counter, counterMax-uint64(rng.IntN(3)))
				default:
					now = now.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
				}
			}
			if grants < steps/3 {
				t.Fatalf("only %d grants in %d steps", grants, steps)
			}
		})
	}
}

func TestTokensAfterRestart(t *testing.T) {
	old := New(Config{}, t0)
	for range 1000 {
		nextGrant(t, old, t0)
	}
	// The restarted node's clock reads a millisecond later.
	restarted := New(Config{}, at(time.Millisecond))
	if tok := nextGrant(t, restarted, at(time.Millisecond)); tok <= old.LastToken() {
		t.Fatalf("token after restart %d not above %d", tok, old.LastToken())
	}
}

func TestObserve(t *testing.T) {
	e0 := uint64(t0.UnixMilli())
	for _, c := range []struct {
		name     string
		issued   int    // tokens issued before the observation
		observed uint64 // the token observed
		now      time.Time
		// wantAbove: the next token must exceed this; wantNextIsLastPlusOne:
		// the observation must not disturb the sequence.
		wantAbove             uint64
		wantNextIsLastPlusOne bool
	}{
		{"later epoch", 3, (e0+5)<<CounterBits | 7, t0, (e0+5)<<CounterBits | belowEpoch, false},
		{"own epoch, higher counter", 3, e0<<CounterBits | 100<<NodeBits | 2, t0, e0<<CounterBits | belowEpoch, false},
		{"own epoch, same counter, higher node", 3, e0<<CounterBits | 3<<NodeBits | 2, t0, e0<<CounterBits | belowEpoch, false},
		{"later epoch, later clock", 1, (e0+5)<<CounterBits | 7, at(time.Hour), uint64(at(time.Hour).UnixMilli()) << CounterBits, false},
		{"earlier epoch", 3, (e0-1)<<CounterBits | belowEpoch, t0, 0, true},
		{"own token echoed back", 3, e0<<CounterBits | 2<<NodeBits | 1, t0, 0, true},
		{"own epoch, lower counter, higher node", 3, e0<<CounterBits | 2<<NodeBits | 9, t0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := New(Config{Node: 1}, t0)
			for range c.issued {
				nextGrant(t, e, t0)
			}
			last, hw := e.LastToken(), e.HighWater()
			e.Observe(c.now, c.observed)
			if want := max(hw, c.observed); e.HighWater() != want {
				t.Fatalf("HighWater %d; want %d", e.HighWater(), want)
			}
			next := nextGrant(t, e, c.now)
			if next <= c.observed || next <= last || next <= c.wantAbove {
				t.Fatalf("next token %d; want above observed %d, last %d and %d", next, c.observed, last, c.wantAbove)
			}
			if c.wantNextIsLastPlusOne && next != last+1<<NodeBits {
				t.Fatalf("next token %d; want %d (observation ignored)", next, last+1<<NodeBits)
			}
		})
	}
}

func TestSucceed(t *testing.T) {
	e0 := uint64(t0.UnixMilli())
	t.Run("above unseen tokens of a replicated epoch", func(t *testing.T) {
		// A standby learns of the active's token E|5 by replication; the
		// active may have issued E|6... since, never replicated.
		standby := New(Config{}, t0)
		seen := (e0+50)<<CounterBits | 5
		standby.ApplyHeld(t0, "k", 1, seen, time.Minute)
		if standby.HighWater() != seen {
			t.Fatalf("HighWater %d; want %d", standby.HighWater(), seen)
		}
		standby.Succeed(at(time.Millisecond))
		tok := nextGrant(t, standby, at(time.Millisecond))
		if bound := (e0+50)<<CounterBits | belowEpoch; tok <= bound {
			t.Fatalf("token after Succeed %d not above %d", tok, bound)
		}
	})
	t.Run("above an observed epoch", func(t *testing.T) {
		e := New(Config{}, t0)
		e.Observe(t0, (e0+50)<<CounterBits|5)
		e.Succeed(t0)
		if tok, bound := nextGrant(t, e, t0), (e0+50)<<CounterBits|belowEpoch; tok <= bound {
			t.Fatalf("token after Succeed %d not above %d", tok, bound)
		}
	})
	t.Run("above its own epoch", func(t *testing.T) {
		e := New(Config{}, t0)
		nextGrant(t, e, t0)
		e.Succeed(t0)
		if tok := nextGrant(t, e, t0); epochOf(tok) != e0+1 || counterOf(tok) != 1 {
			t.Fatalf("token after Succeed: epoch %d counter %d; want %d, 1", epochOf(tok), counterOf(tok), e0+1)
		}
	})
	t.Run("follows the clock", func(t *testing.T) {
		e := New(Config{}, t0)
		e.Succeed(at(time.Hour))
		if tok := nextGrant(t, e, at(time.Hour)); epochOf(tok) != uint64(at(time.Hour).UnixMilli()) {
			t.Fatalf("epoch %d; want the clock's %d", epochOf(tok), at(time.Hour).UnixMilli())
		}
	})
}

// TestRandomSequences drives the engine with random, seeded calls and
// checks it against a model after every step. The model predicts every
// event, refusal and deadline, so a change of behaviour anywhere shows.
// Each seed runs as another node (Config.Node), under a cap on waiters
// over all keys that is lower than the per-key queues allow together.
// Every key is a lock (limit 1) taken by writers; TestRandomSemaphores
// walks semaphores, and TestRandomReadWrite and TestRandomSets
// (rwmodel_test.go) readers, writers and sets against a model of their
// own.
func TestRandomSequences(t *testing.T) {
	steps := 4000
	if testing.Short() {
		steps = 500
	}
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			log1 := runRandom(t, seed, steps, false)
			log2 := runRandom(t, seed, steps, false)
			if !slices.Equal(log1, log2) {
				t.Fatal("the same calls at the same times gave different events")
			}
		})
	}
}

// TestRandomSemaphores is the walk of TestRandomSequences over keys of
// limits 1 to 4, with acquires that now and then ask for another limit
// than the key's, or for one out of range. The model holds the engine to
// at most limit holders of a key at any instant, grants in queue order,
// one waiter granted per place freed and none left waiting while a place
// is free (no grant leaked, by a timeout or otherwise).
func TestRandomSemaphores(t *testing.T) {
	steps := 4000
	if testing.Short() {
		steps = 500
	}
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			log1 := runRandom(t, seed, steps, true)
			log2 := runRandom(t, seed, steps, true)
			if !slices.Equal(log1, log2) {
				t.Fatal("the same calls at the same times gave different events")
			}
		})
	}
}

type mHolder struct {
	token    uint64
	deadline time.Time
	w        Waiter
}

type mWaiter struct {
	w        Waiter
	key      string
	limit    int // as asked, 0 taken as 1
	lease    time.Duration
	since    time.Time
	deadline time.Time // zero: forever
	arrival  int
}

type model struct {
	t       *testing.T
	cfg     Config
	now     time.Time
	holders map[string][]*mHolder // in token order
	// limits is the limit of every key held or waited on.
	limits   map[string]int
	queues   map[string][]*mWaiter
	waiting  map[Waiter]*mWaiter
	resolved map[Waiter]string // "granted" or "timed out"
	lastTok  uint64
	tokens   []uint64 // every token granted, for stale releases
	arrivals int
	log      []string
	// mostHeld is the most holders of one key seen at once.
	mostHeld int
	// Within the events of one call: when each key freed, and the
	// instant of the last deadline fired.
	freedAt     map[string]time.Time
	lastInstant time.Time
	// prev is the event before the one being applied, in the same call.
	prev *Event
	// released: the tokens released by Release, with their key and when.
	released map[uint64]mReleased
}

type mReleased struct {
	key string
	at  time.Time
}

func (m *model) keySet() map[string]bool {
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

// holder returns key's holder with token, nil if none.
func (m *model) holder(key string, token uint64) *mHolder {
	for _, h := range m.holders[key] {
		if h.token == token {
			return h
		}
	}
	return nil
}

// forget drops key's limit once nothing holds or waits on it.
func (m *model) forget(key string) {
	if len(m.holders[key]) == 0 && len(m.queues[key]) == 0 {
		delete(m.holders, key)
		delete(m.queues, key)
		delete(m.limits, key)
	}
}

func (m *model) removeWaiter(w Waiter) *mWaiter {
	mw := m.waiting[w]
	if mw == nil {
		return nil
	}
	delete(m.waiting, w)
	q := m.queues[mw.key]
	i := slices.Index(q, mw)
	m.queues[mw.key] = slices.Delete(q, i, i+1)
	m.forget(mw.key)
	return mw
}

// apply checks evs, in order, against the model and applies them. asker
// is the waiter of the Acquire that produced them, if any; dropping is
// true for the events of DropWaiters.
func (m *model) apply(evs []Event, asker *mWaiter, dropping bool) {
	m.t.Helper()
	m.begin()
	for _, ev := range evs {
		m.applyOne(ev, asker, dropping)
	}
}

// begin starts the events of one call.
func (m *model) begin() {
	m.freedAt = map[string]time.Time{}
	m.lastInstant = time.Time{}
	m.prev = nil
}

func (m *model) applyOne(ev Event, asker *mWaiter, dropping bool) {
	t := m.t
	t.Helper()
	freedAt := m.freedAt
	prev := m.prev
	m.prev = &ev
	m.log = append(m.log, fmt.Sprintf("%s %s %d %d/%d %s %v %d", ev.Kind, ev.Key, ev.Token, ev.Waiter.Conn, ev.Waiter.Seq, ev.Lease, ev.Expired, ev.Limit))
	switch ev.Kind {
	case Freed:
		h := m.holder(ev.Key, ev.Token)
		if h == nil {
			t.Fatalf("freed %s token %d; model holders %+v", ev.Key, ev.Token, m.holders[ev.Key])
		}
		if ev.Expired {
			if h.deadline.After(m.now) {
				t.Fatalf("%s expired at %v before its deadline %v", ev.Key, m.now, h.deadline)
			}
			if h.deadline.Before(m.lastInstant) {
				t.Fatalf("deadlines fired out of order: %v after %v", h.deadline, m.lastInstant)
			}
			m.lastInstant = h.deadline
			freedAt[ev.Key] = h.deadline
		} else {
			if !h.deadline.After(m.now) {
				t.Fatalf("%s released at %v, at or after its deadline %v", ev.Key, m.now, h.deadline)
			}
			freedAt[ev.Key] = m.now
		}
		m.holders[ev.Key] = slices.DeleteFunc(m.holders[ev.Key], func(x *mHolder) bool { return x == h })
		m.forget(ev.Key)
	case Granted:
		limit, exists := m.limits[ev.Key]
		if !exists {
			if asker == nil || asker.key != ev.Key {
				t.Fatalf("%s granted to %+v, but the key does not exist and nobody asked for it", ev.Key, ev.Waiter)
			}
			limit = asker.limit
		}
		if n := len(m.holders[ev.Key]); n >= limit {
			t.Fatalf("%s granted to %+v while %d hold it; its limit is %d", ev.Key, ev.Waiter, n, limit)
		}
		if ev.Limit != limit {
			t.Fatalf("%s granted with limit %d; the key's is %d", ev.Key, ev.Limit, limit)
		}
		if ev.Token <= m.lastTok {
			t.Fatalf("granted token %d not above %d", ev.Token, m.lastTok)
		}
		if nodeOf(ev.Token) != m.cfg.Node {
			t.Fatalf("granted token %#x carries node %d; the engine is node %d", ev.Token, nodeOf(ev.Token), m.cfg.Node)
		}
		if r, ok := m.resolved[ev.Waiter]; ok {
			t.Fatalf("%+v granted after it was already %s", ev.Waiter, r)
		}
		var lease time.Duration
		grantAt := m.now
		if q := m.queues[ev.Key]; len(q) > 0 {
			head := q[0]
			if head.w != ev.Waiter {
				t.Fatalf("%s granted to %+v; head of the queue is %+v", ev.Key, ev.Waiter, head.w)
			}
			// A waiter takes the place of the holder that just went:
			// one place, one grant.
			if prev == nil || prev.Kind != Freed || prev.Key != ev.Key {
				t.Fatalf("%s granted to waiter %+v, not right after a holder of the key went (before: %+v)", ev.Key, ev.Waiter, prev)
			}
			at := freedAt[ev.Key]
			if !head.deadline.IsZero() && !head.deadline.After(at) {
				t.Fatalf("%+v granted at %v; its wait ended at %v", ev.Waiter, at, head.deadline)
			}
			grantAt, lease = at, head.lease
			m.removeWaiter(ev.Waiter)
		} else {
			if asker == nil || asker.w != ev.Waiter || asker.key != ev.Key {
				t.Fatalf("%s granted to %+v, who was not waiting nor asking", ev.Key, ev.Waiter)
			}
			lease = asker.lease
		}
		if ev.Lease != lease {
			t.Fatalf("granted lease %s; asked %s", ev.Lease, lease)
		}
		m.limits[ev.Key] = limit
		m.holders[ev.Key] = append(m.holders[ev.Key], &mHolder{token: ev.Token, deadline: grantAt.Add(lease), w: ev.Waiter})
		m.mostHeld = max(m.mostHeld, len(m.holders[ev.Key]))
		m.lastTok = ev.Token
		m.tokens = append(m.tokens, ev.Token)
		m.resolved[ev.Waiter] = "granted"
	case TimedOut:
		mw := m.waiting[ev.Waiter]
		if mw == nil || mw.key != ev.Key {
			t.Fatalf("%+v timed out on %s but was not waiting for it (%+v)", ev.Waiter, ev.Key, mw)
		}
		if !dropping {
			if mw.deadline.IsZero() || mw.deadline.After(m.now) {
				t.Fatalf("%+v timed out at %v; its wait ends at %v", ev.Waiter, m.now, mw.deadline)
			}
			if mw.deadline.Before(m.lastInstant) {
				t.Fatalf("deadlines fired out of order: %v after %v", mw.deadline, m.lastInstant)
			}
			m.lastInstant = mw.deadline
		}
		if r, ok := m.resolved[ev.Waiter]; ok {
			t.Fatalf("%+v timed out after it was already %s", ev.Waiter, r)
		}
		m.removeWaiter(ev.Waiter)
		m.resolved[ev.Waiter] = "timed out"
	case Renewed:
		h := m.holder(ev.Key, ev.Token)
		if h == nil {
			t.Fatalf("renewed %s token %d; model holders %+v", ev.Key, ev.Token, m.holders[ev.Key])
		}
		if ev.Limit != m.limits[ev.Key] {
			t.Fatalf("renewed %s with limit %d; the key's is %d", ev.Key, ev.Limit, m.limits[ev.Key])
		}
		h.deadline = m.now.Add(ev.Lease)
	default:
		t.Fatalf("unknown event %+v", ev)
	}
}

// check compares the engine's whole visible state with the model.
func (m *model) check(e *Engine) {
	t := m.t
	t.Helper()
	keys := m.keySet()
	gotKeys, total := e.Keys(func(string) bool { return true }, 1000)
	wantKeys := slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	})
	if total != len(wantKeys) || !slices.Equal(gotKeys, wantKeys) {
		t.Fatalf("Keys = %q (%d); model %q", gotKeys, total, wantKeys)
	}
	nkeys, nwait := e.Stats()
	sumWait, nheld := 0, 0
	var next time.Time
	earliest := func(d time.Time) {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	for _, k := range gotKeys {
		hs, ws := e.Inspect(m.now, k)
		sumWait += len(ws)
		nheld += len(hs)
		if len(hs) == 0 && len(ws) == 0 {
			t.Fatalf("key %s listed but neither held nor waited on", k)
		}
		limit := m.limits[k]
		if len(hs) > limit {
			t.Fatalf("%s has %d holders; its limit is %d", k, len(hs), limit)
		}
		// No grant leaked: a place free under a queue would have gone
		// to its head.
		if len(ws) > 0 && len(hs) < limit {
			t.Fatalf("%s has %d holders of %d and %d waiters", k, len(hs), limit, len(ws))
		}
		mhs := m.holders[k]
		if len(hs) != len(mhs) {
			t.Fatalf("%s has holders %+v; model %d", k, hs, len(mhs))
		}
		for i, h := range hs {
			mh := mhs[i]
			if h.Key != k || h.Token != mh.token || h.LeaseLeft != mh.deadline.Sub(m.now) || h.LeaseLeft <= 0 || h.Limit != limit {
				t.Fatalf("%s holder %d %+v; model token %d deadline %v limit %d (now %v)", k, i, h, mh.token, mh.deadline, limit, m.now)
			}
			earliest(mh.deadline)
		}
		q := m.queues[k]
		if len(ws) != len(q) {
			t.Fatalf("%s has %d waiters; model %d", k, len(ws), len(q))
		}
		for i, wi := range ws {
			mw := q[i]
			want := WaiterInfo{Waiter: mw.w, Waited: m.now.Sub(mw.since), Lease: mw.lease}
			if !mw.deadline.IsZero() {
				want.WaitLeft = mw.deadline.Sub(m.now)
				if want.WaitLeft <= 0 {
					t.Fatalf("%+v still waiting after its wait ended", mw.w)
				}
				earliest(mw.deadline)
			}
			if !reflect.DeepEqual(wi, want) {
				t.Fatalf("%s waiter %d = %+v; model %+v", k, i, wi, want)
			}
		}
	}
	if nkeys != len(wantKeys) || nwait != len(m.waiting) || nwait != sumWait {
		t.Fatalf("Stats %d keys %d waiters; Inspect %d waiters; model %d keys %d waiters",
			nkeys, nwait, sumWait, len(wantKeys), len(m.waiting))
	}
	d, ok := e.NextDeadline()
	if ok != !next.IsZero() || (ok && !d.Equal(next)) {
		t.Fatalf("NextDeadline %v %v; model %v", d, ok, next)
	}
	if e.LastToken() != m.lastTok || e.HighWater() < m.lastTok {
		t.Fatalf("LastToken %d HighWater %d; model %d", e.LastToken(), e.HighWater(), m.lastTok)
	}
	if e.Held() != nheld {
		t.Fatalf("Held %d; the keys have %d holders", e.Held(), nheld)
	}
	m.checkIndex(e)
	m.checkScan(e, keys)
}

// checkIndex checks the dense slice of keys that Scan walks against the
// index by name: every key of the slice is at the index it records and
// found by its name, the index has one entry per key, and the slice
// holds nothing else.
func (m *model) checkIndex(e *Engine) {
	t := m.t
	t.Helper()
	used := 0
	for _, s := range e.slots {
		if s != 0 {
			used++
		}
	}
	if used != e.all.len() {
		t.Fatalf("%d keys in the slice, %d in the index", e.all.len(), used)
	}
	if len(e.slots) > minSlots && 8*e.all.len() < len(e.slots) || 4*e.all.len() > 3*len(e.slots) {
		t.Fatalf("%d keys in an index of %d slots", e.all.len(), len(e.slots))
	}
	for i, ks := range e.all.all {
		if ks == nil || int(ks.first.idx) != i || e.lookup(ks.key) != ks {
			t.Fatalf("slice entry %d = %+v; not the index's entry for its key, or not at its recorded index", i, ks)
		}
	}
	for i := e.all.len(); i < len(e.all.c)*chunkLen; i++ {
		if *e.all.at(i) != nil {
			t.Fatalf("slot %d past the list's length %d keeps a removed key alive", i, e.all.len())
		}
	}
}

// checkScan runs whole scans, in one call and in slices, with nothing
// changing in between: each must visit every holder exactly once, in
// token order, and every key waited on but not held once, as the model
// has it.
func (m *model) checkScan(e *Engine, keys map[string]bool) {
	t := m.t
	t.Helper()
	for _, n := range []int{1, 2, len(keys) + 1} {
		seen := map[string][]Holder{}
		for cur := ScanStart; ; {
			cur = e.Scan(m.now, cur, n, func(h Holder, held bool) {
				if !keys[h.Key] {
					t.Fatalf("Scan by %d visits %s, which the model does not have", n, h.Key)
				}
				if !held {
					if len(seen[h.Key]) > 0 || len(m.holders[h.Key]) > 0 {
						t.Fatalf("Scan by %d visits %s again, or as not held while the model has %+v", n, h.Key, m.holders[h.Key])
					}
					h = Holder{Key: h.Key} // only the key is set
				}
				seen[h.Key] = append(seen[h.Key], h)
			})
			if cur == 0 {
				break
			}
		}
		if len(seen) != len(keys) {
			t.Fatalf("Scan by %d visits %d keys; model %d", n, len(seen), len(keys))
		}
		for k, hs := range seen {
			mhs := m.holders[k]
			if len(mhs) == 0 {
				if len(hs) != 1 || hs[0] != (Holder{Key: k}) {
					t.Fatalf("Scan by %d visits %s, waited on only, as %+v", n, k, hs)
				}
				continue
			}
			if len(hs) != len(mhs) {
				t.Fatalf("Scan by %d visits %s's holders %+v; model %d", n, k, hs, len(mhs))
			}
			for i, h := range hs {
				mh := mhs[i]
				if h.Token != mh.token || h.LeaseLeft != mh.deadline.Sub(m.now) || h.Limit != m.limits[k] {
					t.Fatalf("Scan by %d visits %+v; model %+v limit %d", n, h, mh, m.limits[k])
				}
			}
		}
	}
}

// checkSnapshot restores a snapshot into a fresh engine whose clock is
// elsewhere and compares it with the model.
func (m *model) checkSnapshot(e *Engine) {
	t := m.t
	t.Helper()
	s := e.Snapshot(m.now)
	var want []Holder
	for k, hs := range m.holders {
		for _, h := range hs {
			want = append(want, Holder{Key: k, Token: h.token, LeaseLeft: h.deadline.Sub(m.now), Limit: m.limits[k]})
		}
	}
	slices.SortFunc(want, func(a, b Holder) int { return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Token, b.Token)) })
	if s.Token != e.HighWater() || !(len(s.Holders) == 0 && len(want) == 0 || reflect.DeepEqual(noPlaces(t, s.Holders), want)) {
		t.Fatalf("Snapshot %+v; model %+v", s, want)
	}
	later := m.now.Add(7 * time.Hour)
	// A standby, another node of the cluster.
	r := New(Config{Node: (m.cfg.Node + 1) % MaxNodes, MaxLease: m.cfg.MaxLease}, later)
	r.Restore(later, s, nil)
	if rs := r.Snapshot(later); !reflect.DeepEqual(rs, s) {
		t.Fatalf("restored snapshot %+v; want %+v", rs, s)
	}
	r.Succeed(later)
	if tok := nextGrant(t, r, later); tok <= s.Token || nodeOf(tok) != r.cfg.Node {
		t.Fatalf("restored engine (node %d) after Succeed issues %#x, not above %#x or not its own", r.cfg.Node, tok, s.Token)
	}
}

// runRandom walks the engine for steps calls from seed. Without
// semaphores every acquire asks for limit 1 and the walk is the one it
// was before engines knew of limits; with them, keys have limits 1 to 4.
func runRandom(t *testing.T, seed uint64, steps int, semaphores bool) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x10cd))
	// Up to 15 waiters fit in the queues of 5 keys; the cap is far lower.
	cfg := Config{Node: MaxNodes - int(seed), MaxKeys: 5, MaxWaitersPerKey: 3, MaxWaiters: 4, MaxLease: 3 * time.Second, MaxWait: 4 * time.Second}
	leaseTicks := 30
	// The limit each key's clients agree on; the crowded keys are a and b.
	limits := map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1}
	if semaphores {
		cfg.MaxLimit = 4
		// More holders mean fewer waiters: lower caps, longer leases
		// and a crowd on a and b keep the queues full.
		cfg.MaxKeys, cfg.MaxWaitersPerKey, cfg.MaxWaiters = 4, 2, 3
		cfg.MaxLease *= 2
		leaseTicks *= 2
		limits = map[string]int{"a": 3, "b": 1, "c": 2, "d": 4, "e": 1, "f": 2}
		if seed%2 == 0 {
			limits["a"], limits["b"] = 2, 4
		}
	}
	e := New(cfg, t0)
	m := &model{
		t: t, cfg: cfg, now: t0,
		holders: map[string][]*mHolder{}, limits: map[string]int{}, queues: map[string][]*mWaiter{},
		waiting: map[Waiter]*mWaiter{}, resolved: map[Waiter]string{}, released: map[uint64]mReleased{},
	}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	seqs := map[uint64]uint64{} // next Seq per connection
	refused := map[error]int{}
	// Times are in steps of 100ms so that deadlines often coincide.
	tick := func(n int) time.Duration { return time.Duration(n) * 100 * time.Millisecond }
	for step := range steps {
		op := rng.IntN(100)
		// Cancel and DropWaiters take no time: the clock moves only
		// before the calls that do.
		if op < 70 && rng.IntN(2) == 0 {
			m.now = m.now.Add(tick(rng.IntN(8)))
		}
		switch {
		case op < 40: // Acquire
			key := keys[rng.IntN(len(keys))]
			if crowd := rng.IntN(3); crowd == 0 || semaphores && crowd == 1 {
				// Crowd two keys, so that queues fill up.
				key = keys[rng.IntN(2)]
			}
			lease := tick(1 + rng.IntN(leaseTicks))
			wait := time.Duration(0)
			if rng.IntN(4) > 0 {
				wait = tick(1 + rng.IntN(40))
			}
			switch rng.IntN(40) {
			case 0:
				lease = cfg.MaxLease + time.Nanosecond
			case 1:
				lease = 0
			case 2:
				wait = cfg.MaxWait + time.Nanosecond
			}
			limit := limits[key]
			if semaphores && rng.IntN(10) == 0 {
				// Another limit than the others': a mismatch if the key
				// exists, else the key's limit until it goes. -1 and
				// MaxLimit+1 are out of range; 0 is 1.
				limit = rng.IntN(cfg.MaxLimit+3) - 1
			}
			conn := uint64(1 + rng.IntN(4))
			w := Waiter{Conn: conn, Seq: seqs[conn]}
			if len(m.waiting) > 0 && rng.IntN(20) == 0 {
				ws := m.sortedWaiting()
				w = ws[rng.IntN(len(ws))]
			} else {
				seqs[conn]++
			}
			out, err := e.Acquire(m.now, key, limit, lease, wait, w, nil)
			asker := &mWaiter{w: w, key: key, limit: max(limit, 1), lease: lease, since: m.now}
			if wait > 0 {
				asker.deadline = m.now.Add(wait)
			}
			// Apply the events of the deadlines that fired first, then
			// predict the refusal, then apply the asker's own grant: the
			// one grant to w of a key with a place free and nobody
			// waiting.
			m.begin()
			immediate := false
			for i, ev := range out {
				if i == len(out)-1 && ev.Kind == Granted && ev.Waiter == w && ev.Key == key &&
					len(m.queues[key]) == 0 && m.waiting[w] == nil {
					immediate = true
					break
				}
				m.applyOne(ev, nil, false)
			}
			keyLimit, exists := m.limits[key]
			full := exists && len(m.holders[key]) >= keyLimit
			var want error
			switch {
			case lease <= 0 || lease > cfg.MaxLease:
				want = ErrLeaseRange
			case wait < 0 || wait > cfg.MaxWait:
				want = ErrWaitRange
			case limit < 0 || limit > e.Config().MaxLimit:
				want = ErrLimitRange
			case m.waiting[w] != nil:
				want = ErrDuplicateWaitr
			case !exists && len(m.keySet()) >= cfg.MaxKeys:
				want = ErrTooManyKeys
			case exists && keyLimit != asker.limit:
				want = ErrLimitMismatch
			case full && len(m.queues[key]) >= cfg.MaxWaitersPerKey:
				want = ErrQueueFull
			case full && len(m.waiting) >= cfg.MaxWaiters:
				want = ErrTooManyWaiters
			}
			if want != nil {
				refused[want]++
			}
			if !errors.Is(err, want) || (want == nil) != (err == nil) {
				t.Fatalf("step %d: Acquire(%s, %d, %s, %s, %+v) error %v; model %v", step, key, limit, lease, wait, w, err, want)
			}
			if err == nil {
				// A new request: the identity may have been used by
				// an earlier request that is over.
				delete(m.resolved, w)
			}
			switch {
			case err != nil:
				if immediate {
					t.Fatalf("step %d: refused (%v) and granted", step, err)
				}
			case full != !immediate:
				t.Fatalf("step %d: %s has %d holders of %d (exists %v); the engine granted at once: %v", step, key, len(m.holders[key]), keyLimit, exists, immediate)
			case immediate:
				m.applyOne(out[len(out)-1], asker, false)
			default:
				m.arrivals++
				asker.arrival = m.arrivals
				m.queues[key] = append(m.queues[key], asker)
				m.waiting[w] = asker
			}
		case op < 60: // Release
			key := keys[rng.IntN(len(keys))]
			tok := pickToken(rng, m, key)
			out, ok := e.Release(m.now, key, tok, nil)
			m.apply(out, nil, false)
			freed := slices.ContainsFunc(out, func(ev Event) bool { return ev.Kind == Freed && !ev.Expired })
			again := false
			if at, was := m.released[tok]; was && at.key == key && m.now.Sub(at.at) < ReleasedMemory {
				again = true // the same release, sent again: ok, nothing changes
			}
			if ok != (freed || again) || (again && slices.ContainsFunc(out, func(ev Event) bool { return ev.Kind == Freed && !ev.Expired })) {
				t.Fatalf("step %d: Release ok=%v; events %q (released before: %v)", step, ok, describe(out), again)
			}
			if freed {
				m.released[tok] = mReleased{key, m.now}
			}
			if !ok && m.holder(key, tok) != nil {
				t.Fatalf("step %d: release by a holder's token refused", step)
			}
		case op < 70: // Renew
			key := keys[rng.IntN(len(keys))]
			tok := pickToken(rng, m, key)
			lease := tick(1 + rng.IntN(30))
			out, err := e.Renew(m.now, key, tok, lease, nil)
			n := len(out)
			if err == nil {
				n--
			}
			m.apply(out[:n], nil, false)
			held := m.holder(key, tok) != nil
			if held != (err == nil) || (err != nil && !errors.Is(err, ErrNotHeld)) {
				t.Fatalf("step %d: Renew error %v; model holds=%v", step, err, held)
			}
			m.apply(out[n:], nil, false)
		case op < 80: // Cancel
			w := Waiter{Conn: uint64(1 + rng.IntN(4)), Seq: uint64(rng.IntN(20))}
			if len(m.waiting) > 0 && rng.IntN(3) > 0 {
				ws := m.sortedWaiting()
				w = ws[rng.IntN(len(ws))]
			}
			want := m.waiting[w] != nil
			out, got := e.Cancel(m.now, w, nil)
			if got != want {
				t.Fatalf("step %d: Cancel(%+v) = %v; model %v", step, w, got, want)
			}
			m.removeWaiter(w)
			// Nothing fires (the clock has not moved since the last call
			// that advanced it), and a waiter that leaves lets nobody
			// through: the model takes any event as a failure.
			m.apply(out, nil, false)
		case op < 98: // Advance, sometimes exactly to the next deadline
			switch d, ok := e.NextDeadline(); {
			case ok && rng.IntN(3) == 0 && !d.Before(m.now):
				m.now = d
			case ok && rng.IntN(3) == 0 && d.Add(-time.Nanosecond).After(m.now):
				m.now = d.Add(-time.Nanosecond)
			default:
				m.now = m.now.Add(tick(rng.IntN(10)))
			}
			m.apply(e.Advance(m.now, nil), nil, false)
		default: // DropWaiters
			want := slices.SortedFunc(func(yield func(*mWaiter) bool) {
				for _, mw := range m.waiting {
					if !yield(mw) {
						return
					}
				}
			}, func(a, b *mWaiter) int { return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.arrival, b.arrival)) })
			out := e.DropWaiters(nil)
			if len(out) != len(want) {
				t.Fatalf("step %d: DropWaiters returned %d events; model has %d waiters", step, len(out), len(want))
			}
			for i, ev := range out {
				if ev.Kind != TimedOut || ev.Waiter != want[i].w || ev.Key != want[i].key {
					t.Fatalf("step %d: drop %d = %+v; model %+v", step, i, ev, want[i])
				}
			}
			m.apply(out, nil, true)
		}
		m.check(e)
		if step%50 == 0 {
			m.checkSnapshot(e)
		}
	}
	// The sequence must reach every kind of outcome, or it proves little.
	seen := map[string]int{}
	for _, l := range m.log {
		kind, _, _ := strings.Cut(l, " ")
		if strings.Contains(l, " true ") {
			kind = "expired"
		}
		seen[kind]++
	}
	// Every limit must be reached too; a short run may not get there.
	wantRefused := []error{ErrQueueFull, ErrTooManyWaiters, ErrTooManyKeys}
	if semaphores {
		wantRefused = append(wantRefused, ErrLimitMismatch, ErrLimitRange)
	}
	for _, err := range wantRefused {
		if refused[err] == 0 && !testing.Short() {
			t.Fatalf("no refusal %q in %d steps: %v", err, steps, refused)
		}
	}
	for _, kind := range []string{"granted", "timed", "freed", "expired", "renewed"} {
		if seen[kind] < steps/100 {
			t.Fatalf("only %d %q events in %d steps: %v", seen[kind], kind, steps, seen)
		}
	}
	if want := 1 + 2*btoi(semaphores); m.mostHeld < want {
		t.Fatalf("at most %d holders of a key at once in %d steps; want %d", m.mostHeld, steps, want)
	}
	return m.log
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (m *model) sortedWaiting() []Waiter {
	return slices.SortedFunc(func(yield func(Waiter) bool) {
		for w := range m.waiting {
			if !yield(w) {
				return
			}
		}
	}, func(a, b Waiter) int { return cmp.Or(cmp.Compare(a.Conn, b.Conn), cmp.Compare(a.Seq, b.Seq)) })
}

// pickToken is mostly the token of one of the key's current holders, else
// an old or a made-up one.
func pickToken(rng *rand.Rand, m *model, key string) uint64 {
	if hs := m.holders[key]; len(hs) > 0 && rng.IntN(3) > 0 {
		if len(hs) == 1 {
			// No draw: the walk of locks stays the one it was.
			return hs[0].token
		}
		return hs[rng.IntN(len(hs))].token
	}
	if len(m.tokens) > 0 && rng.IntN(2) == 0 {
		return m.tokens[rng.IntN(len(m.tokens))]
	}
	return m.lastTok + 1
}

func TestObserveIgnoresTokensFromFarAhead(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	e := New(Config{}, now)
	var evs []Event
	evs, _ = e.Acquire(now, "a", 1, time.Second, 0, Waiter{Conn: 1}, evs)
	first := evs[0].Token
	for _, forged := range []uint64{^uint64(0), uint64(now.Add(23*time.Hour).UnixMilli()) << CounterBits} {
		if e.Observe(now, forged) {
			t.Fatalf("Observe(%#x) accepted a token far ahead", forged)
		}
		if e.HighWater() != first {
			t.Fatalf("HighWater %#x after an ignored token; want %#x", e.HighWater(), first)
		}
		evs, _ = e.Acquire(now, "b", 1, time.Second, 0, Waiter{Conn: 2}, evs[:0])
		tok := evs[0].Token
		if tok <= first || tok>>CounterBits > uint64(now.UnixMilli())+1 {
			t.Fatalf("after observing %d: token %d (first %d)", forged, tok, first)
		}
		e.Release(now, "b", tok, nil)
		first = tok
	}
	// Within the bound, an observed token still moves the epoch past it.
	ahead := uint64(now.Add(30*time.Second).UnixMilli()) << CounterBits
	if !e.Observe(now, ahead) {
		t.Fatalf("Observe(%#x) ignored a token 30s ahead", ahead)
	}
	evs, _ = e.Acquire(now, "c", 1, time.Second, 0, Waiter{Conn: 3}, evs[:0])
	if evs[0].Token <= ahead {
		t.Fatalf("token %d not above the observed %d", evs[0].Token, ahead)
	}
}

// TestObserveBound: a token whose epoch is exactly MaxEpochAhead ahead of
// now is taken, one a millisecond further is not, whatever the bound.
func TestObserveBound(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   Config
		bound time.Duration
	}{
		{"default", Config{}, time.Minute},
		{"configured", Config{MaxEpochAhead: 5 * time.Second}, 5 * time.Second},
		{"configured, not whole milliseconds", Config{MaxEpochAhead: 5*time.Second + 999*time.Microsecond}, 5 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			// now has a fraction of a millisecond: epochs are whole ones.
			now := at(700 * time.Microsecond)
			for _, d := range []struct {
				ahead time.Duration
				want  bool
			}{
				{c.bound - time.Millisecond, true},
				{c.bound, true},
				{c.bound + time.Millisecond, false},
				{c.bound + time.Hour, false},
			} {
				e := New(c.cfg, t0)
				before := nextGrant(t, e, now)
				tok := uint64(t0.Add(d.ahead).UnixMilli())<<CounterBits | 7<<NodeBits | 3
				if got := e.Observe(now, tok); got != d.want {
					t.Fatalf("Observe of a token %s ahead = %v; want %v", d.ahead, got, d.want)
				}
				next := nextGrant(t, e, now)
				switch {
				case d.want && (next <= tok || e.HighWater() < tok):
					t.Fatalf("%s ahead: next token %#x, HighWater %#x; want above the observed %#x", d.ahead, next, e.HighWater(), tok)
				case !d.want && (next != before+1<<NodeBits || e.HighWater() != next):
					t.Fatalf("%s ahead: next token %#x, HighWater %#x; want %#x (the token ignored)", d.ahead, next, e.HighWater(), before+1<<NodeBits)
				}
			}
		})
	}
	if err := (Config{MaxEpochAhead: -1}).Check(); err == nil {
		t.Fatal("Check accepted a negative MaxEpochAhead")
	}
}
