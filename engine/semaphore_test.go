package engine

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// mustAcquireN is mustAcquire of a key with limit places.
func mustAcquireN(t *testing.T, e *Engine, now time.Time, key string, limit int, lease, wait time.Duration, w Waiter) []Event {
	t.Helper()
	out, err := e.Acquire(now, key, limit, lease, wait, w, nil)
	if err != nil {
		t.Fatalf("Acquire(%s, %d, %s, %s, %+v): %v", key, limit, lease, wait, w, err)
	}
	return out
}

// holdN takes a free place of key, whose limit is limit, and returns its
// token.
func holdN(t *testing.T, e *Engine, now time.Time, key string, limit int, lease time.Duration, w Waiter) uint64 {
	t.Helper()
	out := mustAcquireN(t, e, now, key, limit, lease, 0, w)
	wantEvents(t, "acquire of a free place", out, fmt.Sprintf("granted %s c%d/%d %s", key, w.Conn, w.Seq, lease))
	if out[0].Limit != max(limit, 1) {
		t.Fatalf("grant carries limit %d; want %d", out[0].Limit, max(limit, 1))
	}
	return out[0].Token
}

// wantHolders checks every holder of key, in grant order: tokens and
// what is left of their leases, at now.
func wantHolders(t *testing.T, e *Engine, now time.Time, key string, limit int, toks []uint64, left ...time.Duration) {
	t.Helper()
	var want []Holder
	for i, tok := range toks {
		want = append(want, Holder{Key: key, Token: tok, LeaseLeft: left[i], Limit: limit})
	}
	if hs, _ := e.Inspect(now, key); !reflect.DeepEqual(noPlaces(t, hs), want) {
		t.Fatalf("holders of %s\n got %+v\nwant %+v", key, hs, want)
	}
}

func wantIncreasing(t *testing.T, toks ...uint64) {
	t.Helper()
	for i := 1; i < len(toks); i++ {
		if toks[i] <= toks[i-1] {
			t.Fatalf("tokens not strictly increasing: %d", toks)
		}
	}
}

func TestSemaphoreHoldersAtOnce(t *testing.T) {
	e := New(Config{}, t0)
	var toks []uint64
	for i := range 3 {
		toks = append(toks, holdN(t, e, at(time.Duration(i)*time.Second), "k", 3, time.Minute, wtr(uint64(i+1))))
	}
	wantIncreasing(t, toks...)
	wantEvents(t, "the fourth waits", mustAcquireN(t, e, at(3*time.Second), "k", 3, time.Minute, 0, wtr(4)))
	wantQueue(t, e, at(3*time.Second), "k", wtr(4))
	wantHolders(t, e, at(10*time.Second), "k", 3, toks, 50*time.Second, 51*time.Second, 52*time.Second)
	wantStats(t, e, 1, 1)
	if e.Held() != 3 {
		t.Fatalf("Held %d; want 3 (holders, not keys)", e.Held())
	}
	// Another key is another semaphore.
	holdN(t, e, t0, "other", 2, time.Minute, wtr(5))
	if e.Held() != 4 {
		t.Fatalf("Held %d; want 4", e.Held())
	}
}

func TestSemaphoreReleaseGrantsOne(t *testing.T) {
	e := New(Config{}, t0)
	t1 := holdN(t, e, t0, "k", 2, time.Minute, wtr(1))
	t2 := holdN(t, e, t0, "k", 2, time.Minute, wtr(2))
	for i, w := range []Waiter{wtr(3), wtr(4), wtr(5)} {
		mustAcquireN(t, e, at(time.Second), "k", 2, time.Duration(i+1)*time.Minute, 0, w)
	}

	out, ok := e.Release(at(10*time.Second), "k", t1, nil)
	if !ok {
		t.Fatal("release refused")
	}
	wantEvents(t, "release of one holder", out, "freed k", "granted k c3/3 1m0s")
	t3 := out[1].Token
	if out[0].Token != t1 || out[1].Limit != 2 {
		t.Fatalf("events %+v", out)
	}
	wantIncreasing(t, t1, t2, t3)
	wantQueue(t, e, at(10*time.Second), "k", wtr(4), wtr(5))
	wantHolders(t, e, at(10*time.Second), "k", 2, []uint64{t2, t3}, 50*time.Second, time.Minute)

	if out, ok := e.Release(at(10*time.Second), "k", t1, nil); !ok || len(out) != 0 {
		t.Fatalf("a release sent again: ok %v, events %q; want ok and no change", ok, describe(out))
	}
	out, _ = e.Release(at(11*time.Second), "k", t2, nil)
	wantEvents(t, "release of the other", out, "freed k", "granted k c4/4 2m0s")
	t4 := out[1].Token
	out, _ = e.Release(at(12*time.Second), "k", t4, nil)
	wantEvents(t, "release of the newest", out, "freed k", "granted k c5/5 3m0s")
	t5 := out[1].Token
	wantIncreasing(t, t1, t2, t3, t4, t5)
	wantStats(t, e, 1, 0)

	for _, tok := range []uint64{t3, t5} {
		out, _ = e.Release(at(13*time.Second), "k", tok, nil)
		wantEvents(t, "release with nobody waiting", out, "freed k")
	}
	wantFree(t, e, at(13*time.Second), "k")
	// Its limit went with it.
	holdN(t, e, at(13*time.Second), "k", 5, time.Minute, wtr(6))
}

func TestSemaphoreSameInstantExpiries(t *testing.T) {
	setup := func(t *testing.T) (*Engine, []uint64) {
		e := New(Config{}, t0)
		toks := []uint64{
			holdN(t, e, t0, "k", 3, 10*time.Second, wtr(1)),
			holdN(t, e, t0, "k", 3, 10*time.Second, wtr(2)),
			holdN(t, e, t0, "k", 3, time.Hour, wtr(3)),
		}
		for i, w := range []Waiter{wtr(4), wtr(5), wtr(6)} {
			mustAcquireN(t, e, at(time.Duration(i+1)*time.Second), "k", 3, time.Duration(i+1)*time.Minute, 0, w)
		}
		return e, toks
	}
	for _, late := range []time.Duration{0, 20 * time.Second} {
		t.Run(fmt.Sprint("advance ", late, " late"), func(t *testing.T) {
			e, toks := setup(t)
			now := at(10*time.Second + late)
			out := e.Advance(now, nil)
			wantEvents(t, "two leases end together", out,
				"expired k", "granted k c4/4 1m0s",
				"expired k", "granted k c5/5 2m0s")
			if freed := []uint64{out[0].Token, out[2].Token}; !slices.Contains(freed, toks[0]) || !slices.Contains(freed, toks[1]) {
				t.Fatalf("freed %d; want %d and %d", freed, toks[0], toks[1])
			}
			wantIncreasing(t, toks[2], out[1].Token, out[3].Token)
			wantQueue(t, e, now, "k", wtr(6))
			// Both leases count from the expiry, not from the late Advance.
			wantHolders(t, e, now, "k", 3, []uint64{toks[2], out[1].Token, out[3].Token},
				time.Hour-10*time.Second-late, time.Minute-late, 2*time.Minute-late)
		})
	}
	t.Run("a release at the instant a lease ends", func(t *testing.T) {
		e, toks := setup(t)
		// toks[0] and toks[1] expire at 10s; toks[2] is released then.
		out, ok := e.Release(at(10*time.Second), "k", toks[2], nil)
		if !ok {
			t.Fatal("release refused")
		}
		wantEvents(t, "expiries and release", out,
			"expired k", "granted k c4/4 1m0s",
			"expired k", "granted k c5/5 2m0s",
			"freed k", "granted k c6/6 3m0s")
		wantStats(t, e, 1, 0)
		// An expired token releases nothing, at its deadline or after.
		if _, ok := e.Release(at(10*time.Second), "k", toks[0], nil); ok {
			t.Fatal("an expired token released")
		}
	})
}

func TestSemaphoreWaitEndingAsPlaceFrees(t *testing.T) {
	t.Run("lease ends at the same instant", func(t *testing.T) {
		e := New(Config{}, t0)
		holdN(t, e, t0, "k", 2, 5*time.Second, wtr(1))
		holdN(t, e, t0, "k", 2, time.Hour, wtr(2))
		mustAcquireN(t, e, t0, "k", 2, time.Minute, 5*time.Second, wtr(3))
		mustAcquireN(t, e, t0, "k", 2, time.Minute, 0, wtr(4))
		out := e.Advance(at(5*time.Second), nil)
		wantEvents(t, "advance", out, "timedout k c3/3", "expired k", "granted k c4/4 1m0s")
		wantStats(t, e, 1, 0)
	})
	t.Run("release at the same instant", func(t *testing.T) {
		e := New(Config{}, t0)
		tok := holdN(t, e, t0, "k", 2, time.Hour, wtr(1))
		t2 := holdN(t, e, t0, "k", 2, time.Hour, wtr(2))
		mustAcquireN(t, e, at(time.Second), "k", 2, time.Minute, 4*time.Second, wtr(3))
		out, ok := e.Release(at(5*time.Second), "k", tok, nil)
		if !ok {
			t.Fatal("release refused")
		}
		wantEvents(t, "release", out, "timedout k c3/3", "freed k")
		wantStats(t, e, 1, 0)
		wantHolders(t, e, at(5*time.Second), "k", 2, []uint64{t2}, time.Hour-5*time.Second)
		// The place stays free for the next to ask.
		holdN(t, e, at(5*time.Second), "k", 2, time.Minute, wtr(4))
	})
	t.Run("release one nanosecond earlier grants", func(t *testing.T) {
		e := New(Config{}, t0)
		tok := holdN(t, e, t0, "k", 2, time.Hour, wtr(1))
		holdN(t, e, t0, "k", 2, time.Hour, wtr(2))
		mustAcquireN(t, e, at(time.Second), "k", 2, time.Minute, 4*time.Second, wtr(3))
		out, _ := e.Release(at(5*time.Second-time.Nanosecond), "k", tok, nil)
		wantEvents(t, "release", out, "freed k", "granted k c3/3 1m0s")
		wantEvents(t, "after the wait would have ended", e.Advance(at(6*time.Second), nil))
		if e.Held() != 2 {
			t.Fatalf("Held %d; want 2", e.Held())
		}
	})
}

func TestSemaphoreLimitMismatch(t *testing.T) {
	e := New(Config{MaxWaitersPerKey: 1}, t0)
	holdN(t, e, t0, "k", 3, time.Minute, wtr(1))
	tl := holdN(t, e, t0, "lock", 1, time.Minute, wtr(2))
	mustAcquireN(t, e, t0, "lock", 0, time.Minute, 0, wtr(3)) // 0 is 1: it waits
	before := e.Snapshot(t0)
	for _, c := range []struct {
		key   string
		limit int
		msg   string
	}{
		{"k", 2, `limit mismatch: key "k" allows 3 holders; this acquire asked for 2: every acquire of it must ask for that limit`},
		{"k", 1, `limit mismatch: key "k" allows 3 holders; this acquire asked for 1: every acquire of it must ask for that limit`},
		{"k", 0, `limit mismatch: key "k" allows 3 holders; this acquire asked for 1: every acquire of it must ask for that limit`},
		{"k", 4, `limit mismatch: key "k" allows 3 holders; this acquire asked for 4: every acquire of it must ask for that limit`},
		// The lock's queue is full: the mismatch is said first.
		{"lock", 2, `limit mismatch: key "lock" allows 1 holder; this acquire asked for 2: every acquire of it must ask for that limit`},
	} {
		out, err := e.Acquire(t0, c.key, c.limit, time.Minute, 0, wtr(9), nil)
		if !errors.Is(err, ErrLimitMismatch) || err.Error() != c.msg {
			t.Fatalf("Acquire(%s, limit %d) error %q; want %q", c.key, c.limit, err, c.msg)
		}
		wantEvents(t, "refusal", out)
	}
	if after := e.Snapshot(t0); !reflect.DeepEqual(before, after) {
		t.Fatalf("refusals changed the holders:\n%+v\n%+v", before, after)
	}
	wantStats(t, e, 2, 1)

	// A key waited on but not held (its holders freed by replication)
	// keeps its limit too.
	out, _ := e.Release(t0, "lock", tl, nil)
	wantEvents(t, "release", out, "freed lock", "granted lock c3/3 1m0s")
	e.ApplyFree("lock", out[1].Token)
	mustAcquireN(t, e, t0, "lock", 1, time.Minute, 0, wtr(4)) // the free place is taken
	e.ApplyFree("lock", e.LastToken())
	mustAcquireN(t, e, t0, "lock", 1, time.Minute, 0, wtr(5))
	mustAcquireN(t, e, t0, "lock", 1, time.Minute, 0, wtr(6)) // waits
	e.ApplyFree("lock", e.LastToken())
	if hs, ws := e.Inspect(t0, "lock"); len(hs) != 0 || len(ws) != 1 {
		t.Fatalf("lock has holders %+v and waiters %+v; want only a waiter", hs, ws)
	}
	if _, err := e.Acquire(t0, "lock", 2, time.Minute, 0, wtr(9), nil); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("acquire of a key only waited on, with another limit: %v", err)
	}
	// Once nothing holds or waits on it, the key takes the next limit.
	cancel(t, e, t0, wtr(6))
	wantFree(t, e, t0, "lock")
	holdN(t, e, t0, "lock", 2, time.Minute, wtr(9))
}

func TestLimitRange(t *testing.T) {
	if got := New(Config{}, t0).Config().MaxLimit; got != 1024 {
		t.Fatalf("default MaxLimit %d; want 1024", got)
	}
	e := New(Config{MaxLimit: 4}, t0)
	for _, limit := range []int{-1, -1 << 40, 5, 1 << 40} {
		out, err := e.Acquire(t0, "k", limit, time.Minute, 0, wtr(1), nil)
		if !errors.Is(err, ErrLimitRange) || strings.Contains(err.Error(), "--") || !strings.Contains(err.Error(), "1 (a lock, the default) to 4 holders") {
			t.Fatalf("limit %d: error %v; want ErrLimitRange naming the range in the node's terms, no flag", limit, err)
		}
		wantEvents(t, "refusal", out)
	}
	wantStats(t, e, 0, 0)
	holdN(t, e, t0, "four", 4, time.Minute, wtr(1))
	holdN(t, e, t0, "zero", 0, time.Minute, wtr(2)) // 0 is a lock
	if hs, _ := e.Inspect(t0, "zero"); len(hs) != 1 || hs[0].Limit != 1 {
		t.Fatalf("holders of a key acquired with limit 0: %+v; want limit 1", hs)
	}
}

// TestSemaphoreTokensIncrease mixes grants of locks and semaphores, at
// once and by hand-on after a release or an expiry: every token exceeds
// every earlier one.
func TestSemaphoreTokensIncrease(t *testing.T) {
	e := New(Config{}, t0)
	now := t0
	var last uint64
	held := map[string][]uint64{}
	check := func(evs []Event) {
		for _, ev := range evs {
			switch ev.Kind {
			case Granted:
				if ev.Token <= last {
					t.Fatalf("token %d after %d", ev.Token, last)
				}
				last = ev.Token
				held[ev.Key] = append(held[ev.Key], ev.Token)
			case Freed:
				held[ev.Key] = slices.DeleteFunc(held[ev.Key], func(tok uint64) bool { return tok == ev.Token })
			}
		}
	}
	for i := range 20000 {
		k := i % 5
		key := fmt.Sprint("k", k)
		out, err := e.Acquire(now, key, 1+k, time.Duration(1+i%7)*time.Millisecond, 0, Waiter{Conn: uint64(i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(out)
		if hs := held[key]; i%3 == 0 && len(hs) > 0 {
			out, _ = e.Release(now, key, hs[i%len(hs)], nil)
			check(out)
		}
		now = now.Add(time.Duration(i%2) * time.Millisecond)
		check(e.Advance(now, nil))
	}
}

func TestSemaphoreRenewAndReleaseByToken(t *testing.T) {
	e := New(Config{}, t0)
	toks := []uint64{
		holdN(t, e, t0, "k", 3, 10*time.Second, wtr(1)),
		holdN(t, e, t0, "k", 3, 10*time.Second, wtr(2)),
		holdN(t, e, t0, "k", 3, 10*time.Second, wtr(3)),
	}
	other := holdN(t, e, t0, "other", 3, time.Minute, wtr(4))
	out, err := e.Renew(at(5*time.Second), "k", toks[1], 20*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "renew", out, "renewed k 20s")
	if out[0].Token != toks[1] || out[0].Limit != 3 {
		t.Fatalf("Renewed %+v; want token %d limit 3", out[0], toks[1])
	}
	wantHolders(t, e, at(5*time.Second), "k", 3, toks, 5*time.Second, 20*time.Second, 5*time.Second)
	for _, tok := range []uint64{other, toks[2] + 1, 0} {
		if _, err := e.Renew(at(5*time.Second), "k", tok, time.Second, nil); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("renew of k by %d: %v; want ErrNotHeld", tok, err)
		}
		if _, ok := e.Release(at(5*time.Second), "k", tok, nil); ok {
			t.Fatalf("release of k by %d succeeded", tok)
		}
	}
	wantHolders(t, e, at(5*time.Second), "k", 3, toks, 5*time.Second, 20*time.Second, 5*time.Second)

	out = e.Advance(at(10*time.Second), nil)
	wantEvents(t, "the two not renewed expire", out, "expired k", "expired k")
	wantHolders(t, e, at(10*time.Second), "k", 3, toks[1:2], 15*time.Second)
	for _, tok := range []uint64{toks[0], toks[2]} {
		if _, err := e.Renew(at(10*time.Second), "k", tok, time.Minute, nil); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("renew by expired %d: %v", tok, err)
		}
	}
	out, ok := e.Release(at(11*time.Second), "k", toks[1], nil)
	if !ok {
		t.Fatal("release by the renewed token refused")
	}
	wantEvents(t, "release", out, "freed k")
	wantFree(t, e, at(11*time.Second), "k")
	wantStats(t, e, 1, 0)
}

func TestSemaphoreCancel(t *testing.T) {
	e := New(Config{}, t0)
	t1 := holdN(t, e, t0, "k", 2, time.Minute, wtr(1))
	t2 := holdN(t, e, t0, "k", 2, time.Minute, wtr(2))
	mustAcquireN(t, e, t0, "k", 2, time.Minute, 0, wtr(3))
	mustAcquireN(t, e, t0, "k", 2, time.Minute, 5*time.Second, wtr(4))
	mustAcquireN(t, e, t0, "k", 2, time.Minute, 0, wtr(5))
	if !cancel(t, e, t0, wtr(4)) || cancel(t, e, t0, wtr(4)) || cancel(t, e, t0, wtr(1)) {
		t.Fatal("Cancel reports a waiter wrongly")
	}
	wantQueue(t, e, t0, "k", wtr(3), wtr(5))
	out, _ := e.Release(at(time.Second), "k", t1, nil)
	wantEvents(t, "release", out, "freed k", "granted k c3/3 1m0s")
	out, _ = e.Release(at(time.Second), "k", t2, nil)
	wantEvents(t, "release skips the cancelled waiter", out, "freed k", "granted k c5/5 1m0s")
	if cancel(t, e, at(time.Second), wtr(3)) {
		t.Fatal("Cancel of a granted waiter reported true")
	}
	wantStats(t, e, 1, 0)
}

func TestSemaphoreDropWaiters(t *testing.T) {
	e := New(Config{}, t0)
	t1 := holdN(t, e, t0, "s", 2, time.Minute, wtr(1))
	t2 := holdN(t, e, t0, "s", 2, time.Minute, wtr(2))
	holdN(t, e, t0, "l", 1, time.Minute, wtr(3))
	mustAcquireN(t, e, at(2*time.Second), "s", 2, time.Minute, 0, wtr(4))
	mustAcquireN(t, e, at(1*time.Second), "l", 1, time.Minute, 0, wtr(5))
	mustAcquireN(t, e, at(3*time.Second), "s", 2, time.Minute, time.Hour, wtr(6))
	wantEvents(t, "drop", e.DropWaiters(nil), "timedout l c5/5", "timedout s c4/4", "timedout s c6/6")
	wantStats(t, e, 2, 0)
	wantHolders(t, e, at(4*time.Second), "s", 2, []uint64{t1, t2}, 56*time.Second, 56*time.Second)
	out, _ := e.Release(at(4*time.Second), "s", t1, nil)
	wantEvents(t, "release after the drop", out, "freed s")
}

func TestSemaphoreSnapshotRestore(t *testing.T) {
	active := New(Config{}, t0)
	ts := []uint64{
		holdN(t, active, t0, "s", 3, 30*time.Second, wtr(1)),
		holdN(t, active, t0, "s", 3, 40*time.Second, wtr(2)),
	}
	tl := holdN(t, active, t0, "l", 1, time.Minute, wtr(3))
	ts = append(ts, holdN(t, active, t0, "s", 3, 50*time.Second, wtr(4)))
	mustAcquireN(t, active, t0, "s", 3, time.Minute, 0, wtr(5))

	snap := active.Snapshot(at(10 * time.Second))
	snap.Holders = noPlaces(t, snap.Holders)
	want := Snapshot{Token: ts[2], Holders: []Holder{
		{Key: "l", Token: tl, LeaseLeft: 50 * time.Second, Limit: 1},
		{Key: "s", Token: ts[0], LeaseLeft: 20 * time.Second, Limit: 3},
		{Key: "s", Token: ts[1], LeaseLeft: 30 * time.Second, Limit: 3},
		{Key: "s", Token: ts[2], LeaseLeft: 40 * time.Second, Limit: 3},
	}}
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("Snapshot =\n%+v\nwant\n%+v", snap, want)
	}

	// The standby's clock is an hour behind; it had a semaphore of its
	// own, which the restore replaces.
	tb0 := t0.Add(-time.Hour)
	standby := New(Config{Node: 1}, tb0)
	holdN(t, standby, tb0, "z", 2, time.Hour, wtr(7))
	holdN(t, standby, tb0, "z", 2, time.Hour, wtr(8))
	wantEvents(t, "restore", standby.Restore(tb0, snap, nil))
	wantFree(t, standby, tb0, "z")
	wantStats(t, standby, 2, 0)
	if standby.Held() != 4 {
		t.Fatalf("Held %d; want 4", standby.Held())
	}
	wantHolders(t, standby, tb0, "s", 3, ts, 20*time.Second, 30*time.Second, 40*time.Second)
	if again := standby.Snapshot(tb0); !reflect.DeepEqual(again, snap) {
		t.Fatalf("snapshot of the restored engine differs:\n%+v\n%+v", again, snap)
	}

	// Promoted, it keeps the limit and hands places on.
	standby.Succeed(tb0)
	if _, err := standby.Acquire(tb0, "s", 2, time.Minute, 0, wtr(9), nil); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("acquire with another limit after restore: %v", err)
	}
	wantEvents(t, "full after restore", mustAcquireN(t, standby, tb0, "s", 3, time.Minute, 0, wtr(9)))
	out := standby.Advance(tb0.Add(20*time.Second), nil)
	wantEvents(t, "the oldest restored lease ends", out, "expired s", "granted s c9/9 1m0s")
	if out[1].Token <= active.LastToken() {
		t.Fatalf("token after restore and Succeed %d; want above %d", out[1].Token, active.LastToken())
	}
	if _, ok := standby.Release(tb0.Add(20*time.Second), "s", ts[1], nil); !ok {
		t.Fatal("a restored holder cannot release")
	}
	wantHolders(t, standby, tb0.Add(20*time.Second), "s", 3, []uint64{ts[2], out[1].Token}, 20*time.Second, time.Minute)
}

func TestSemaphoreApplyHeldAndFree(t *testing.T) {
	e := New(Config{}, t0)
	for _, tok := range []uint64{100, 200, 300} {
		e.ApplyHeld(t0, "k", 3, tok, 30*time.Second)
	}
	wantHolders(t, e, t0, "k", 3, []uint64{100, 200, 300}, 30*time.Second, 30*time.Second, 30*time.Second)
	wantStats(t, e, 1, 0)

	// A record of a holder it has updates that holder's lease.
	e.ApplyHeld(at(5*time.Second), "k", 3, 200, 10*time.Second)
	wantHolders(t, e, at(5*time.Second), "k", 3, []uint64{100, 200, 300}, 25*time.Second, 10*time.Second, 25*time.Second)
	if d, _ := e.NextDeadline(); !d.Equal(at(15 * time.Second)) {
		t.Fatalf("NextDeadline %v; want %v", d, at(15*time.Second))
	}
	// A new holder of a full key: the oldest gave way on the active.
	e.ApplyHeld(at(5*time.Second), "k", 3, 400, time.Minute)
	wantHolders(t, e, at(5*time.Second), "k", 3, []uint64{200, 300, 400}, 10*time.Second, 25*time.Second, time.Minute)
	e.ApplyHeld(at(5*time.Second), "k", 3, 500, 2*time.Minute)
	wantHolders(t, e, at(5*time.Second), "k", 3, []uint64{300, 400, 500}, 25*time.Second, time.Minute, 2*time.Minute)
	// Even one older than those it has: it is the active's word.
	e.ApplyHeld(at(5*time.Second), "k", 3, 150, time.Minute)
	wantHolders(t, e, at(5*time.Second), "k", 3, []uint64{150, 400, 500}, time.Minute, time.Minute, 2*time.Minute)
	if e.HighWater() != 500 || e.Held() != 3 {
		t.Fatalf("HighWater %d Held %d; want 500, 3", e.HighWater(), e.Held())
	}

	e.ApplyFree("k", 500)
	wantHolders(t, e, at(5*time.Second), "k", 3, []uint64{150, 400}, time.Minute, time.Minute)
	for _, stale := range []struct {
		key string
		tok uint64
	}{{"k", 500}, {"k", 300}, {"k", 100}, {"k", 999}, {"nope", 150}} {
		e.ApplyFree(stale.key, stale.tok)
	}
	wantHolders(t, e, at(5*time.Second), "k", 3, []uint64{150, 400}, time.Minute, time.Minute)

	// A lowered limit: the oldest give way, never the holder applied.
	e.ApplyHeld(at(6*time.Second), "k", 1, 150, time.Minute)
	wantHolders(t, e, at(6*time.Second), "k", 1, []uint64{150}, time.Minute)
	// A raised one makes room.
	e.ApplyHeld(at(6*time.Second), "k", 2, 600, 2*time.Second)
	wantHolders(t, e, at(6*time.Second), "k", 2, []uint64{150, 600}, time.Minute, 2*time.Second)
	if e.Held() != 2 {
		t.Fatalf("Held %d; want 2", e.Held())
	}
	// Replicated holders expire on their own.
	wantEvents(t, "replicated leases end", e.Advance(at(66*time.Second), nil), "expired k", "expired k")
	wantStats(t, e, 0, 0)
	wantFree(t, e, at(66*time.Second), "k")
	if _, ok := e.NextDeadline(); ok {
		t.Fatal("deadline left with nothing held")
	}
}

// TestSemaphoreReplicatedFreeUnderQueue: places freed by ApplyFree under
// a queue (a standby has none, so only a test gets there) are filled at
// the next hand-on, in queue order.
func TestSemaphoreReplicatedFreeUnderQueue(t *testing.T) {
	e := New(Config{}, t0)
	t1 := holdN(t, e, t0, "k", 3, time.Minute, wtr(1))
	t2 := holdN(t, e, t0, "k", 3, time.Minute, wtr(2))
	holdN(t, e, t0, "k", 3, time.Minute, wtr(3))
	for _, w := range []Waiter{wtr(4), wtr(5), wtr(6), wtr(7)} {
		mustAcquireN(t, e, t0, "k", 3, time.Minute, 0, w)
	}
	e.ApplyFree("k", t1)
	out, _ := e.Release(at(time.Second), "k", t2, nil)
	wantEvents(t, "two places free", out, "freed k", "granted k c4/4 1m0s", "granted k c5/5 1m0s")
	wantQueue(t, e, at(time.Second), "k", wtr(6), wtr(7))
	if e.Held() != 3 {
		t.Fatalf("Held %d; want 3", e.Held())
	}
}

func TestSemaphoreScan(t *testing.T) {
	e := New(Config{}, t0)
	ts := []uint64{
		holdN(t, e, t0, "s", 3, time.Minute, wtr(1)),
		holdN(t, e, t0, "s", 3, 2*time.Minute, wtr(2)),
		holdN(t, e, t0, "s", 3, 3*time.Minute, wtr(3)),
	}
	tl := holdN(t, e, t0, "l", 1, time.Minute, wtr(4))
	tw := holdN(t, e, t0, "w", 2, time.Minute, wtr(5))
	holdN(t, e, t0, "w", 2, time.Minute, wtr(6))
	mustAcquireN(t, e, t0, "w", 2, time.Minute, 0, wtr(7))
	e.ApplyFree("w", tw)
	e.ApplyFree("w", e.LastToken()) // w is only waited on now
	// The first holder goes and comes back, so that s's holders are not
	// in the order they sit in the engine.
	out, _ := e.Release(t0, "s", ts[0], nil)
	wantEvents(t, "release", out, "freed s")
	ts = append(ts[1:], holdN(t, e, t0, "s", 3, 4*time.Minute, wtr(8)))

	now := at(30 * time.Second)
	var calls [][]string
	for cur := ScanStart; ; {
		var call []string
		cur = e.Scan(now, cur, 1, func(h Holder, held bool) {
			call = append(call, fmt.Sprint(h.Key, " ", held, " ", h.Token, " ", h.LeaseLeft, " ", h.Limit))
		})
		calls = append(calls, call)
		if cur == 0 {
			break
		}
	}
	slices.SortFunc(calls, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	want := [][]string{
		{fmt.Sprint("l true ", tl, " 30s 1")},
		{
			fmt.Sprint("s true ", ts[0], " 1m30s 3"),
			fmt.Sprint("s true ", ts[1], " 2m30s 3"),
			fmt.Sprint("s true ", ts[2], " 3m30s 3"),
		},
		{"w false 0 0s 0"},
	}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("Scan by 1 key visits\n%q\nwant\n%q", calls, want)
	}
}

// TestSemaphoreFreeListsBounded: a burst of holders that all go must not
// stay allocated for the life of the engine, nor the crowds of their keys.
func TestSemaphoreFreeListsBounded(t *testing.T) {
	e := New(Config{}, t0)
	for k := range 10 {
		for i := range 1000 {
			holdN(t, e, t0, fmt.Sprint("k", k), 1000, time.Second, Waiter{Conn: uint64(k), Seq: uint64(i)})
		}
	}
	if e.Held() != 10000 {
		t.Fatalf("Held %d; want 10000", e.Held())
	}
	e.Advance(at(time.Second), nil)
	wantStats(t, e, 0, 0)
	if len(e.freeHold) > 4096 || len(e.freeKeys) > 4096 {
		t.Fatalf("free lists keep %d holders and %d keys after the burst", len(e.freeHold), len(e.freeKeys))
	}
	for _, ks := range e.freeKeys {
		if ks.ext != nil && (cap(ks.ext.more) > maxKeptCrowd || len(ks.ext.more) > 0) {
			t.Fatalf("a free key keeps a crowd of %d, room for %d", len(ks.ext.more), cap(ks.ext.more))
		}
	}
}
