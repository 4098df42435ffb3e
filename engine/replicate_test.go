package engine

import (
	"reflect"
	"testing"
	"time"
)

func TestSnapshotRestore(t *testing.T) {
	active := New(Config{}, t0)
	ta := hold(t, active, t0, "a", 30*time.Second, wtr(1))
	tb := hold(t, active, t0, "b", time.Minute, wtr(2))
	mustAcquire(t, active, t0, "b", time.Minute, 0, wtr(3))

	snap := active.Snapshot(at(10 * time.Second))
	want := Snapshot{Token: tb, Holders: []Holder{
		{Key: "a", Token: ta, LeaseLeft: 20 * time.Second, Limit: 1},
		{Key: "b", Token: tb, LeaseLeft: 50 * time.Second, Limit: 1},
	}}
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("Snapshot =\n%+v\nwant\n%+v", snap, want)
	}
	// Tokens the active issues after the snapshot, never replicated.
	for range 10 {
		nextGrant(t, active, at(10*time.Second))
	}

	// The standby's clock is an hour behind the active's: the leases must
	// run for what was left of them, not to the active's instants.
	tb0 := t0.Add(-time.Hour)
	standby := New(Config{}, tb0)
	tz := hold(t, standby, tb0, "z", time.Hour, wtr(7))
	mustAcquire(t, standby, tb0, "z", time.Minute, 0, wtr(8))
	out := standby.Restore(tb0, snap, nil)
	wantEvents(t, "restore drops waiters", out, "timedout z c8/8")
	wantFree(t, standby, tb0, "z")
	if _, ok := standby.Release(tb0, "z", tz, nil); ok {
		t.Fatal("a holder replaced by the restore still releases")
	}
	wantStats(t, standby, 2, 0)
	wantHolder(t, standby, tb0, "a", ta, 20*time.Second)
	wantHolder(t, standby, tb0, "b", tb, 50*time.Second)
	if d, _ := standby.NextDeadline(); !d.Equal(tb0.Add(20 * time.Second)) {
		t.Fatalf("NextDeadline %v; want %v", d, tb0.Add(20*time.Second))
	}
	if again := standby.Snapshot(tb0); !reflect.DeepEqual(again, snap) {
		t.Fatalf("snapshot of the restored engine differs:\n%+v\n%+v", again, snap)
	}
	wantEvents(t, "before a's lease ends", standby.Advance(tb0.Add(20*time.Second-time.Nanosecond), nil))
	wantEvents(t, "a's lease ends", standby.Advance(tb0.Add(20*time.Second), nil), "expired a")

	standby.Succeed(tb0.Add(20 * time.Second))
	tok := nextGrant(t, standby, tb0.Add(20*time.Second))
	if tok <= active.LastToken() || tok <= snap.Token {
		t.Fatalf("token after restore and Succeed %d; want above %d (every token of the old active)", tok, active.LastToken())
	}
	// The promoted standby's holders are releasable by their tokens.
	if _, ok := standby.Release(tb0.Add(20*time.Second), "b", tb, nil); !ok {
		t.Fatal("restored holder b cannot release")
	}
}

func TestRestoreObservesWithoutSucceed(t *testing.T) {
	// A snapshot from a later epoch moves the restored engine past it.
	e0 := uint64(t0.UnixMilli())
	e := New(Config{}, t0)
	snap := Snapshot{Token: (e0+9)<<CounterBits | 3}
	e.Restore(t0, snap, nil)
	if e.HighWater() != snap.Token {
		t.Fatalf("HighWater %d; want %d", e.HighWater(), snap.Token)
	}
	if tok := nextGrant(t, e, t0); tok <= snap.Token {
		t.Fatalf("token %d not above the snapshot's %d", tok, snap.Token)
	}
}

func TestApplyHeldAndFree(t *testing.T) {
	active := New(Config{}, t0)
	t1 := nextGrant(t, active, t0)
	t2 := nextGrant(t, active, t0)

	e := New(Config{}, t0)
	e.ApplyHeld(t0, "k", 1, t1, 30*time.Second)
	wantHolder(t, e, t0, "k", t1, 30*time.Second)
	wantStats(t, e, 1, 0)

	// A later record replaces the holder and its lease.
	e.ApplyHeld(at(5*time.Second), "k", 1, t2, 10*time.Second)
	wantHolder(t, e, at(5*time.Second), "k", t2, 10*time.Second)
	wantStats(t, e, 1, 0)
	if d, _ := e.NextDeadline(); !d.Equal(at(15 * time.Second)) {
		t.Fatalf("NextDeadline %v; want %v", d, at(15*time.Second))
	}
	if e.HighWater() != max(t2, e.LastToken()) {
		t.Fatalf("HighWater %d; want %d", e.HighWater(), t2)
	}

	e.ApplyFree("k", t1) // stale: t2 holds k now
	wantHolder(t, e, at(5*time.Second), "k", t2, 10*time.Second)
	e.ApplyFree("nope", t2)
	wantStats(t, e, 1, 0)

	e.ApplyFree("k", t2)
	wantStats(t, e, 0, 0)
	wantFree(t, e, at(5*time.Second), "k")
	if _, ok := e.NextDeadline(); ok {
		t.Fatal("deadline left after ApplyFree")
	}
	e.ApplyFree("k", t2) // again: nothing to do
	wantStats(t, e, 0, 0)

	// A replicated holder expires on its own if no renewal comes.
	e.ApplyHeld(at(6*time.Second), "x", 1, t2, time.Second)
	wantEvents(t, "replicated lease ends", e.Advance(at(7*time.Second), nil), "expired x")
	wantStats(t, e, 0, 0)
}
