package engine

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// setGrant checks that evs end with the grant of a set of n keys to w, in
// order, as one batch: consecutive tokens in key order, the first one the
// set's id on each. It returns the tokens by key.
func setGrant(t *testing.T, evs []Event, w Waiter, keys ...string) map[string]uint64 {
	t.Helper()
	if len(evs) < len(keys) {
		t.Fatalf("events %q; want a set of %d at the end", brief(evs), len(keys))
	}
	batch := evs[len(evs)-len(keys):]
	toks := map[string]uint64{}
	for i, ev := range batch {
		if ev.Kind != Granted || ev.Waiter != w || ev.Key != keys[i] || ev.SetSize != len(keys) || ev.Set != batch[0].Token {
			t.Fatalf("event %d of the set %+v; want key %s granted to %+v, set %d of %d", i, ev, keys[i], w, batch[0].Token, len(keys))
		}
		if i > 0 && ev.Token <= batch[i-1].Token {
			t.Fatalf("set tokens not increasing: %+v", batch)
		}
		toks[ev.Key] = ev.Token
	}
	return toks
}

func TestSetOfFreeKeysGrantedAtOnce(t *testing.T) {
	e := New(Config{}, t0)
	out := take(t, e, t0, time.Minute, 0, wtr(1), "b", "a/r", "c=3")
	wantBrief(t, "set", out, "granted b c1/1 set", "granted a c1/1 shared set", "granted c c1/1 set")
	toks := setGrant(t, out, wtr(1), "b", "a", "c")
	set := toks["b"]
	for _, k := range []string{"a", "b", "c"} {
		hs, _ := e.Inspect(t0, k)
		if len(hs) != 1 || hs[0].Set != set || hs[0].Token != toks[k] {
			t.Fatalf("%s holders %+v; want token %d of set %d", k, hs, toks[k], set)
		}
	}
	wantModes(t, e, t0, "a", 1, Shared)
	if hs, _ := e.Inspect(t0, "c"); hs[0].Limit != 3 {
		t.Fatalf("c's limit %d; want 3", hs[0].Limit)
	}
	// Another reader shares a; a writer of b waits.
	read(t, e, t0, "a", time.Minute, wtr(2))
	wantBrief(t, "writer of b", take(t, e, t0, time.Minute, 0, wtr(3), "b"))
}

// All or none: a set waits while one key is held, holding none of the
// others, and keeps its place in their queues: a later acquire of a free
// key of the set waits behind it. The set is granted, all at once, when
// the last key frees.
func TestSetAllOrNone(t *testing.T) {
	e := New(Config{}, t0)
	b := hold(t, e, t0, "b", time.Minute, wtr(1))
	wantBrief(t, "set behind b", take(t, e, t0, time.Minute, 0, wtr(2), "a", "b"))
	if hs, ws := e.Inspect(t0, "a"); len(hs) != 0 || len(ws) != 1 || !reflect.DeepEqual(ws[0].Set, []SetKey{{"a", 1, Exclusive}, {"b", 1, Exclusive}}) {
		t.Fatalf("a: holders %+v waiters %+v; want the set waiting, nothing held", hs, ws)
	}
	wantStats(t, e, 2, 2)
	wantBrief(t, "a after the set", take(t, e, at(time.Second), time.Minute, 0, wtr(3), "a"))
	wantBrief(t, "a reader after the set", take(t, e, at(time.Second), time.Minute, 0, wtr(4), "a/r"))
	out, _ := e.TryAcquireID(at(time.Second), "a", 1, time.Minute, "", wtr(5), nil)
	wantBrief(t, "try of a", out, "timedout a c5/5")
	out, _ = e.Release(at(2*time.Second), "b", b, nil)
	wantBrief(t, "b freed", out, "freed b", "granted a c2/2 set", "granted b c2/2 set")
	toks := setGrant(t, out, wtr(2), "a", "b")
	out, _ = e.Release(at(3*time.Second), "a", toks["a"], nil)
	wantBrief(t, "a of the set released", out, "freed a set", "granted a c3/3")
	// b stays held: each key is the set's own to release.
	wantModes(t, e, at(3*time.Second), "b", 1, Exclusive)
}

// Two sets over the same keys in opposite orders, and single keys, never
// deadlock: whoever came first is served first.
func TestSetsInOppositeOrders(t *testing.T) {
	e := New(Config{}, t0)
	a := hold(t, e, t0, "a", time.Minute, wtr(1))
	b := hold(t, e, t0, "b", time.Minute, wtr(2))
	take(t, e, t0, time.Minute, 0, wtr(3), "a", "b")
	take(t, e, t0, time.Minute, 0, wtr(4), "b", "a")
	take(t, e, t0, time.Minute, 0, wtr(5), "b")
	out, _ := e.Release(at(time.Second), "b", b, nil)
	wantBrief(t, "b freed", out, "freed b")
	out, _ = e.Release(at(2*time.Second), "a", a, nil)
	wantBrief(t, "a freed", out, "freed a", "granted a c3/3 set", "granted b c3/3 set")
	first := setGrant(t, out, wtr(3), "a", "b")
	e.Release(at(3*time.Second), "a", first["a"], nil)
	out, _ = e.Release(at(3*time.Second), "b", first["b"], nil)
	wantBrief(t, "first set released", out, "freed b set", "granted b c4/4 set", "granted a c4/4 set")
	second := setGrant(t, out, wtr(4), "b", "a")
	out, _ = e.Release(at(4*time.Second), "b", second["b"], nil)
	wantBrief(t, "second set's b", out, "freed b set", "granted b c5/5")
}

// A set's wait runs out on all its keys at once, and lets through what
// it held back; its connection closing or a withdrawal does the same.
func TestSetLeaves(t *testing.T) {
	setup := func() (*Engine, uint64) {
		e := New(Config{}, t0)
		b := hold(t, e, t0, "b", time.Minute, wtr(1))
		if _, err := e.AcquireSet(t0, keysOf("a", "b"), time.Minute, 5*time.Second, "s#1", wtr(2), nil); err != nil {
			t.Fatal(err)
		}
		take(t, e, t0, time.Minute, 0, wtr(3), "a")
		return e, b
	}
	t.Run("wait runs out", func(t *testing.T) {
		e, _ := setup()
		out := e.Advance(at(5*time.Second), nil)
		wantBrief(t, "timeout", out, "timedout a c2/2 set", "timedout b c2/2 set", "granted a c3/3")
		if out[0].ID != "s#1" || out[1].ID != "s#1" || out[0].SetSize != 2 {
			t.Fatalf("set timeout %+v; want its id and size on each key", out[:2])
		}
		if hs, _ := e.Inspect(at(5*time.Second), "a"); hs[0].LeaseLeft != time.Minute {
			t.Fatalf("a granted at the set's wait end: %+v", hs[0])
		}
		wantStats(t, e, 2, 0)
	})
	t.Run("cancel", func(t *testing.T) {
		e, _ := setup()
		out, ok := e.Cancel(at(time.Second), wtr(2), nil)
		if !ok {
			t.Fatal("Cancel of the set reported false")
		}
		wantBrief(t, "cancel", out, "granted a c3/3")
		wantStats(t, e, 2, 0)
	})
	t.Run("withdraw by its other key", func(t *testing.T) {
		e, _ := setup()
		if _, _, ok := e.Withdraw(at(time.Second), "c", "s#1", 2, nil); ok {
			t.Fatal("withdrew a set from a key it does not wait on")
		}
		out, w, ok := e.Withdraw(at(time.Second), "b", "s#1", 2, nil)
		if !ok || w != wtr(2) {
			t.Fatalf("Withdraw = %+v %v", w, ok)
		}
		wantBrief(t, "withdraw", out, "granted a c3/3")
	})
	t.Run("dropped", func(t *testing.T) {
		e, _ := setup()
		out := e.DropWaiters(nil)
		wantBrief(t, "drop", out, "timedout a c2/2 set", "timedout b c2/2 set", "timedout a c3/3")
		wantStats(t, e, 1, 0)
	})
}

// Once granted, each key of a set is held on its own: a lease that runs
// out frees that key alone, and says which set it broke.
func TestSetKeyExpiresAlone(t *testing.T) {
	e := New(Config{}, t0)
	toks := setGrant(t, take(t, e, t0, 10*time.Second, 0, wtr(1), "a", "b"), wtr(1), "a", "b")
	out, err := e.Renew(at(5*time.Second), "b", toks["b"], time.Minute, nil)
	if err != nil || out[0].Set != toks["a"] {
		t.Fatalf("renew of b: %+v %v", out, err)
	}
	out = e.Advance(at(10*time.Second), nil)
	wantBrief(t, "a expires", out, "expired a set")
	if out[0].Set != toks["a"] {
		t.Fatalf("expiry %+v; want set %d", out[0], toks["a"])
	}
	wantModes(t, e, at(10*time.Second), "b", 1, Exclusive)
	// A release sent again of a set's key is answered ok too.
	e.Release(at(11*time.Second), "b", toks["b"], nil)
	if _, ok := e.Release(at(12*time.Second), "b", toks["b"], nil); !ok {
		t.Fatal("release of b sent again refused")
	}
}

// A set of a reader and a writer: the reader's key admits it beside the
// readers that hold, and it keeps a reader's place there while it waits
// for its writer's key: a later reader passes it, a later writer waits
// behind it, and the readers behind that writer wait too.
func TestSetMixedModes(t *testing.T) {
	e := New(Config{}, t0)
	read(t, e, t0, "a", time.Minute, wtr(1))
	b := hold(t, e, t0, "b", time.Minute, wtr(2))
	wantBrief(t, "set", take(t, e, t0, time.Minute, 0, wtr(3), "a/r", "b"))
	// A reader of a after the set: the set, a reader, keeps a reader's
	// place only, so a reader passes it.
	wantBrief(t, "reader beside the set", take(t, e, t0, time.Minute, 0, wtr(4), "a/r"), "granted a c4/4 shared")
	// A writer of a waits behind the set; a reader behind the writer too.
	wantBrief(t, "writer of a", take(t, e, t0, time.Minute, 0, wtr(5), "a"))
	wantBrief(t, "reader behind the writer", take(t, e, t0, time.Minute, 0, wtr(6), "a/r"))
	out, _ := e.Release(at(time.Second), "b", b, nil)
	wantBrief(t, "b freed", out, "freed b", "granted a c3/3 shared set", "granted b c3/3 set")
	wantModes(t, e, at(time.Second), "a", 3, Shared, Exclusive, Shared)
}

// A set keeps one place of a semaphore; a reader's place of a lock with
// readers at Config.MaxLimit waits its turn.
func TestSetSemaphoreAndReaderPlaces(t *testing.T) {
	e := New(Config{MaxLimit: 2}, t0)
	holdN(t, e, t0, "s", 2, time.Minute, wtr(1))
	x := hold(t, e, t0, "x", time.Minute, wtr(2))
	// s has a place free: the set keeps it while x is held.
	wantBrief(t, "set", take(t, e, t0, time.Minute, 0, wtr(3), "s=2", "x"))
	if _, err := e.Acquire(t0, "s", 2, time.Minute, 0, wtr(4), nil); err != nil {
		t.Fatal(err)
	}
	if hs, ws := e.Inspect(t0, "s"); len(hs) != 1 || len(ws) != 2 {
		t.Fatalf("s: %d holders %d waiters; want the free place kept for the set", len(hs), len(ws))
	}
	out, _ := e.Release(at(time.Second), "x", x, nil)
	wantBrief(t, "x freed", out, "freed x", "granted s c3/3 set", "granted x c3/3 set")

	// Readers at the cap: the set's reader waits for a place.
	r1 := read(t, e, t0, "r", time.Minute, wtr(5))
	read(t, e, t0, "r", time.Minute, wtr(6))
	wantBrief(t, "set of a full reader key", take(t, e, at(time.Second), time.Minute, 0, wtr(7), "r/r", "y"))
	out, _ = e.Release(at(2*time.Second), "r", r1, nil)
	wantBrief(t, "a reader goes", out, "freed r shared", "granted r c7/7 shared set", "granted y c7/7 set")
}

func TestSetRefusals(t *testing.T) {
	e := New(Config{MaxKeys: 6, MaxWaitersPerKey: 1, MaxWaiters: 3}, t0)
	hold(t, e, t0, "a", time.Minute, wtr(1))
	holdN(t, e, t0, "s", 2, time.Minute, wtr(2))
	seventeen := make([]string, MaxSetKeys+1)
	for i := range seventeen {
		seventeen[i] = fmt.Sprint("k", i)
	}
	for _, c := range []struct {
		name  string
		words []string
		want  error
	}{
		{"no key", nil, ErrSetKeys},
		{"too many keys", seventeen, ErrSetKeys},
		{"a key twice", []string{"a", "b", "a/r"}, ErrSetKeys},
		{"a reader of a semaphore", []string{"b", "t=2/r"}, ErrSharedLimit},
		{"another limit", []string{"b", "s=3"}, ErrLimitMismatch},
		{"a limit out of range", []string{"b", "t=-1"}, ErrLimitRange},
		{"more new keys than room", []string{"a", "n1", "n2", "n3", "n4", "n5"}, ErrTooManyKeys},
	} {
		if _, err := e.AcquireSet(t0, keysOf(c.words...), time.Minute, 0, "", wtr(9), nil); !errors.Is(err, c.want) {
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		}
	}
	wantStats(t, e, 2, 0)
	take(t, e, t0, time.Minute, 0, wtr(3), "a", "b")
	if _, err := e.AcquireSet(t0, keysOf("c", "a"), time.Minute, 0, "", wtr(4), nil); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a set behind a full queue: %v", err)
	}
	// The set takes two places of the three; another set of two has no room.
	hold(t, e, t0, "c", time.Minute, wtr(5))
	if _, err := e.AcquireSet(t0, keysOf("c", "d"), time.Minute, 0, "", wtr(6), nil); !errors.Is(err, ErrTooManyWaiters) {
		t.Fatalf("a set past the waiters over all keys: %v", err)
	}
	if _, err := e.AcquireSet(t0, keysOf("c", "d"), time.Minute, 0, "", wtr(3), nil); !errors.Is(err, ErrDuplicateWaitr) {
		t.Fatalf("a set of a waiter already waiting: %v", err)
	}
	wantStats(t, e, 4, 2)
}

func TestTryAcquireSet(t *testing.T) {
	e := New(Config{}, t0)
	hold(t, e, t0, "b", time.Minute, wtr(1))
	out, err := e.TryAcquireSet(t0, keysOf("a", "b"), time.Minute, "", wtr(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantBrief(t, "try of a busy set", out, "timedout a c2/2 set", "timedout b c2/2 set")
	wantStats(t, e, 1, 0)
	out, _ = e.TryAcquireSet(t0, keysOf("a", "c/r"), time.Minute, "", wtr(3), nil)
	wantBrief(t, "try of a free set", out, "granted a c3/3 set", "granted c c3/3 shared set")
}

// A set re-sent with its id finds its grant, or its place; a set that
// lost a key before its answer came is asked anew.
func TestSetAgain(t *testing.T) {
	e := New(Config{}, t0)
	out, _ := e.AcquireSet(t0, keysOf("a", "b"), 10*time.Second, 0, "s#1", wtr(1), nil)
	toks := setGrant(t, out, wtr(1), "a", "b")
	out, err := e.AcquireSet(at(5*time.Second), keysOf("a", "b"), 10*time.Second, 0, "s#1", wtr(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if again := setGrant(t, out, wtr(2), "a", "b"); !reflect.DeepEqual(again, toks) || len(out) != 2 {
		t.Fatalf("re-sent set: %+v; want the grant %v again", out, toks)
	}
	if hs, _ := e.Inspect(at(5*time.Second), "b"); hs[0].LeaseLeft != 10*time.Second {
		t.Fatalf("lease not renewed by the re-send: %+v", hs[0])
	}
	// A key taken alone with the set's id is not the set's grant.
	if out, _ := e.AcquireID(at(5*time.Second), "a", 1, time.Minute, 0, "s#1", wtr(3), nil); len(out) != 0 {
		t.Fatalf("a key of the set alone, with its id: %q; want it to wait", brief(out))
	}
	e.Cancel(at(5*time.Second), wtr(3), nil)

	// One key expires: the re-send frees the other and asks anew.
	e.Renew(at(5*time.Second), "b", toks["b"], time.Minute, nil)
	out, _ = e.AcquireSet(at(16*time.Second), keysOf("a", "b"), 10*time.Second, 0, "s#1", wtr(4), nil)
	wantBrief(t, "re-send of a broken set", out, "expired a set", "freed b set", "granted a c4/4 set", "granted b c4/4 set")

	// A waiting set re-sent takes its place; the first is answered T.
	hold(t, e, at(16*time.Second), "c", time.Minute, wtr(5))
	e.AcquireSet(at(16*time.Second), keysOf("c", "d"), time.Minute, 0, "s#2", wtr(6), nil)
	take(t, e, at(16*time.Second), time.Minute, 0, wtr(7), "d")
	out, _ = e.AcquireSet(at(17*time.Second), keysOf("d", "c"), time.Minute, 0, "s#2", wtr(8), nil)
	wantBrief(t, "re-send of a waiting set", out, "timedout c c6/6 set", "timedout d c6/6 set")
	wantQueue(t, e, at(17*time.Second), "d", wtr(8), wtr(7))
}

// A set's ghost keeps its places in every queue until its waiter claims
// them or its grace ends.
func TestSetGhost(t *testing.T) {
	e := New(Config{}, t0)
	b := hold(t, e, t0, "b", time.Minute, wtr(1))
	if !e.AddGhostSet(t0, keysOf("a", "b/r"), "g#1", time.Minute, 0, 2*time.Second) {
		t.Fatal("AddGhostSet refused")
	}
	for _, c := range [][]string{{"b=2"}, {"c", "c"}, {"x=2/r"}} {
		if e.AddGhostSet(t0, keysOf(c...), "g#2", time.Minute, 0, time.Second) {
			t.Fatalf("AddGhostSet(%q) accepted", c)
		}
	}
	if e.AddGhostSet(t0, keysOf("z"), "g#1", time.Minute, 0, time.Second) {
		t.Fatal("a second ghost of one id")
	}
	take(t, e, t0, time.Minute, 0, wtr(2), "a")
	e.Release(at(time.Second), "b", b, nil)
	wantModes(t, e, at(time.Second), "a", 0, Exclusive, Exclusive, Exclusive)
	out, err := e.AcquireSet(at(time.Second), keysOf("a", "b/r"), time.Minute, 0, "g#1", wtr(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantBrief(t, "the ghost claimed", out, "granted a c3/3 set", "granted b c3/3 shared set")

	e = New(Config{}, t0)
	e.AddGhostSet(t0, keysOf("a", "b"), "g#1", time.Minute, 0, 2*time.Second)
	take(t, e, t0, time.Minute, 0, wtr(2), "a")
	out = e.Advance(at(2*time.Second), nil)
	wantBrief(t, "grace over", out, "timedout a c18446744073709551615/1 set", "timedout b c18446744073709551615/1 set", "granted a c2/2")
	wantStats(t, e, 1, 0)
}

// Sets and their modes travel to a replica with the holders.
func TestSetsReplicate(t *testing.T) {
	a := New(Config{Node: 0}, t0)
	toks := setGrant(t, take(t, a, t0, time.Minute, 0, wtr(1), "x", "y/r"), wtr(1), "x", "y")
	b := New(Config{Node: 1}, t0)
	b.Restore(t0, a.Snapshot(t0), nil)
	for _, k := range []string{"x", "y"} {
		hs, _ := b.Inspect(t0, k)
		if len(hs) != 1 || hs[0].Set != toks["x"] || hs[0].Token != toks[k] {
			t.Fatalf("replica's %s: %+v", k, hs)
		}
	}
	// A renewal that carries no set keeps the holder's.
	b.ApplyHolder(t0, Holder{Key: "y", Token: toks["y"], LeaseLeft: time.Hour, Limit: 1, Mode: Shared})
	if hs, _ := b.Inspect(t0, "y"); hs[0].Set != toks["x"] || hs[0].LeaseLeft != time.Hour {
		t.Fatalf("after a renewal: %+v", hs)
	}
	b.ApplyFree("x", toks["x"])
	if hs, _ := b.Inspect(t0, "x"); len(hs) != 0 || len(b.heldSet) != 1 {
		t.Fatalf("after a free: %+v, %d holders of sets", hs, len(b.heldSet))
	}
}
