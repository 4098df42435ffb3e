package engine

import (
	"testing"
	"time"
)

func TestTryAcquireNeverQueues(t *testing.T) {
	e := New(Config{}, t0)
	evs, err := e.TryAcquireID(t0, "k", 1, 10*time.Second, "a#1", Waiter{1, 1}, nil)
	if err != nil || len(evs) != 1 || evs[0].Kind != Granted {
		t.Fatalf("try of a free key: %+v, %v", evs, err)
	}
	tok := evs[0].Token
	evs, err = e.TryAcquireID(at(time.Second), "k", 1, 10*time.Second, "b#1", Waiter{2, 1}, nil)
	if err != nil || len(evs) != 1 || evs[0].Kind != TimedOut || evs[0].Waiter != (Waiter{2, 1}) {
		t.Fatalf("try of a held key: %+v, %v, want TimedOut at once", evs, err)
	}
	if _, ws := e.Inspect(at(time.Second), "k"); len(ws) != 0 {
		t.Fatalf("a try-lock queued: %+v", ws)
	}
	// The holder's own id answers its grant again, as for AcquireID.
	evs, _ = e.TryAcquireID(at(2*time.Second), "k", 1, 10*time.Second, "a#1", Waiter{3, 1}, nil)
	if len(evs) != 1 || evs[0].Kind != Granted || evs[0].Token != tok {
		t.Fatalf("try re-sent by the holder: %+v", evs)
	}
	// A limit mismatch is refused as for any acquire.
	if _, err := e.TryAcquireID(at(2*time.Second), "k", 2, 10*time.Second, "", Waiter{4, 1}, nil); err == nil {
		t.Fatal("try with another limit accepted")
	}
	// A try does not overtake a waiter: behind a queue it is T.
	acquireID(t, e, at(2*time.Second), "k", 1, 10*time.Second, 0, "c#1", Waiter{5, 1})
	e.Release(at(3*time.Second), "k", tok, nil)
	evs, _ = e.TryAcquireID(at(3*time.Second), "k", 1, 10*time.Second, "", Waiter{6, 1}, nil)
	if len(evs) != 1 || evs[0].Kind != TimedOut {
		t.Fatalf("try behind a granted waiter: %+v", evs)
	}
}

func TestWithdrawByConnectionAndID(t *testing.T) {
	e := New(Config{}, t0)
	tok := acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "", Waiter{1, 1})[0].Token
	acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "b#1", Waiter{2, 1})
	acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "c#1", Waiter{3, 1})
	if _, _, ok := e.Withdraw(t0, "k", "b#1", 3, nil); ok {
		t.Fatal("another connection withdrew b's acquire")
	}
	if _, _, ok := e.Withdraw(t0, "other", "b#1", 2, nil); ok {
		t.Fatal("withdrew from another key")
	}
	evs, w, ok := e.Withdraw(t0, "k", "b#1", 2, nil)
	if !ok || w != (Waiter{2, 1}) || len(evs) != 0 {
		t.Fatalf("Withdraw = %+v, %v, events %q", w, ok, describe(evs))
	}
	if _, _, ok := e.Withdraw(t0, "k", "b#1", 2, nil); ok {
		t.Fatal("withdrew twice")
	}
	evs, _ = e.Release(at(time.Second), "k", tok, nil)
	if len(evs) != 2 || evs[1].Waiter != (Waiter{3, 1}) {
		t.Fatalf("release after the withdraw: %+v, want c granted, nothing for b", evs)
	}
}

// A ghost keeps its waiter's place: claimed back by an acquire with its
// id, it is granted before the waiters queued behind it, with the wait it
// had left.
func TestGhostKeepsItsPlace(t *testing.T) {
	e := New(Config{}, t0)
	tok := acquireID(t, e, t0, "k", 1, 30*time.Second, 0, "a#1", Waiter{1, 1})[0].Token
	if !e.AddGhost(t0, "k", 1, "b#1", 10*time.Second, 20*time.Second, 3*time.Second) ||
		!e.AddGhost(t0, "k", 1, "c#1", 10*time.Second, 0, 3*time.Second) {
		t.Fatal("AddGhost refused")
	}
	if e.AddGhost(t0, "k", 1, "b#1", 10*time.Second, 0, time.Second) || e.AddGhost(t0, "k", 1, "a#1", 10*time.Second, 0, time.Second) {
		t.Fatal("a ghost of an id already queued or holding")
	}
	// c re-sends first: it takes its own place, second in line, no answer
	// for the ghost.
	if evs := acquireID(t, e, at(time.Second), "k", 1, 10*time.Second, 5*time.Second, "c#1", Waiter{3, 1}); len(evs) != 0 {
		t.Fatalf("c claims its place: %+v", evs)
	}
	if evs := acquireID(t, e, at(time.Second), "k", 1, 10*time.Second, 5*time.Second, "b#1", Waiter{2, 1}); len(evs) != 0 {
		t.Fatalf("b claims its place: %+v", evs)
	}
	_, ws := e.Inspect(at(time.Second), "k")
	if len(ws) != 2 || ws[0].Waiter != (Waiter{2, 1}) || ws[1].Waiter != (Waiter{3, 1}) {
		t.Fatalf("queue %+v, want b then c", ws)
	}
	if ws[0].WaitLeft != 19*time.Second || ws[1].WaitLeft != 0 {
		t.Fatalf("waits left %v and %v, want what each had: 19s and forever", ws[0].WaitLeft, ws[1].WaitLeft)
	}
	// The grace past, the claimed places stay.
	evs := e.Advance(at(10*time.Second), nil)
	if len(evs) != 0 {
		t.Fatalf("claimed places dropped: %+v", evs)
	}
	evs, _ = e.Release(at(11*time.Second), "k", tok, nil)
	if len(evs) != 2 || evs[1].Waiter != (Waiter{2, 1}) || evs[1].ID != "b#1" {
		t.Fatalf("release: %+v, want b granted", evs)
	}
}

// A ghost at the head of a key that frees keeps the place free for its
// grace only: nobody claims it, and the next waiter is granted when the
// grace ends, not a lease later.
func TestGhostAtTheHeadHoldsTheKeyForItsGraceOnly(t *testing.T) {
	e := New(Config{}, t0)
	tok := acquireID(t, e, t0, "k", 1, 30*time.Second, 0, "a#1", Waiter{1, 1})[0].Token
	e.AddGhost(t0, "k", 1, "b#1", 10*time.Second, 0, 2*time.Second)
	acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "c#1", Waiter{3, 1})
	evs, _ := e.Release(at(500*time.Millisecond), "k", tok, nil)
	if len(evs) != 1 || evs[0].Kind != Freed {
		t.Fatalf("release under a ghost: %+v, want the place kept for it", evs)
	}
	// A try-lock does not take the kept place.
	if evs, _ := e.TryAcquireID(at(time.Second), "k", 1, time.Second, "", Waiter{4, 1}, nil); len(evs) != 1 || evs[0].Kind != TimedOut {
		t.Fatalf("try under a ghost: %+v", evs)
	}
	if d, ok := e.NextDeadline(); !ok || !d.Equal(at(2*time.Second)) {
		t.Fatalf("next deadline %v, %v, want the grace's end", d, ok)
	}
	evs = e.Advance(at(2*time.Second), nil)
	if len(evs) != 2 || evs[0].Kind != TimedOut || evs[0].Waiter.Conn != GhostConn || evs[0].ID != "b#1" ||
		evs[1].Kind != Granted || evs[1].Waiter != (Waiter{3, 1}) {
		t.Fatalf("grace over: %+v, want the ghost's end, then c granted", evs)
	}
	if e.byID["b#1"] != nil {
		t.Fatal("the ghost's id still queued after its grace")
	}
}

// A ghost claimed while the key is free is granted at once.
func TestGhostClaimedOnAFreeKeyIsGranted(t *testing.T) {
	e := New(Config{}, t0)
	e.AddGhost(t0, "k", 1, "b#1", 10*time.Second, 0, 2*time.Second)
	acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "c#1", Waiter{3, 1})
	evs := acquireID(t, e, at(time.Second), "k", 1, 10*time.Second, 0, "b#1", Waiter{2, 1})
	if len(evs) != 1 || evs[0].Kind != Granted || evs[0].Waiter != (Waiter{2, 1}) {
		t.Fatalf("claim on a free key: %+v, want b granted", evs)
	}
	if _, ws := e.Inspect(at(time.Second), "k"); len(ws) != 1 || ws[0].Waiter != (Waiter{3, 1}) {
		t.Fatalf("queue %+v, want c", ws)
	}
}

// A ghost's grace is capped, whatever is asked.
func TestGhostGraceIsBounded(t *testing.T) {
	e := New(Config{}, t0)
	e.AddGhost(t0, "k", 1, "b#1", 10*time.Second, 0, time.Hour)
	if d, ok := e.NextDeadline(); !ok || !d.Equal(at(MaxGhostGrace)) {
		t.Fatalf("grace ends %v, want %v", d, at(MaxGhostGrace))
	}
	if evs := e.Advance(at(MaxGhostGrace), nil); len(evs) != 1 || evs[0].Waiter.Conn != GhostConn {
		t.Fatalf("a ghost's end: %+v", evs)
	}
	if k, w := e.Stats(); k != 0 || w != 0 {
		t.Fatalf("after the grace: %d keys, %d waiters", k, w)
	}
}
