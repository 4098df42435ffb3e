package engine

import (
	"testing"
	"time"
)

func acquireID(t *testing.T, e *Engine, now time.Time, key string, limit int, lease, wait time.Duration, id string, w Waiter) []Event {
	t.Helper()
	evs, err := e.AcquireID(now, key, limit, lease, wait, id, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// An acquire re-sent with the id of the grant it got answers that grant
// again: same token, lease renewed from now, nothing queued behind it.
func TestAcquireIDAnswersItsGrantAgain(t *testing.T) {
	e := New(Config{}, t0)
	evs := acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "c1-7", Waiter{1, 1})
	if len(evs) != 1 || evs[0].Kind != Granted || evs[0].ID != "c1-7" {
		t.Fatalf("first acquire: %+v", evs)
	}
	tok := evs[0].Token
	// The answer was lost with connection 1; the client re-sends on 2.
	evs = acquireID(t, e, at(8*time.Second), "k", 1, 10*time.Second, 0, "c1-7", Waiter{2, 1})
	if len(evs) != 1 || evs[0].Kind != Granted || evs[0].Token != tok || evs[0].Waiter != (Waiter{2, 1}) {
		t.Fatalf("re-sent acquire: %+v, want the grant %d again", evs, tok)
	}
	hs, ws := e.Inspect(at(8*time.Second), "k")
	if len(hs) != 1 || hs[0].LeaseLeft != 10*time.Second || len(ws) != 0 {
		t.Fatalf("after the re-send: holders %+v waiters %+v", hs, ws)
	}
	// Another id queues as usual.
	if evs := acquireID(t, e, at(9*time.Second), "k", 1, 10*time.Second, 0, "c2-1", Waiter{3, 1}); len(evs) != 0 {
		t.Fatalf("another client: %+v", evs)
	}
	// Once released, the id is forgotten: a new grant, a new token.
	evs, _ = e.Release(at(9*time.Second), "k", tok, nil)
	if len(evs) != 2 || evs[1].Kind != Granted || evs[1].Waiter != (Waiter{3, 1}) {
		t.Fatalf("release: %+v", evs)
	}
}

// An acquire re-sent while the first still waits takes its place in the
// queue; the first request is answered T, having been given up on.
func TestAcquireIDKeepsItsPlaceInTheQueue(t *testing.T) {
	e := New(Config{}, t0)
	holder := acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "", Waiter{1, 1})[0].Token
	acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "a", Waiter{2, 1})
	acquireID(t, e, t0, "k", 1, 10*time.Second, 0, "b", Waiter{3, 1})
	evs := acquireID(t, e, at(time.Second), "k", 1, 10*time.Second, 0, "a", Waiter{4, 1})
	if len(evs) != 1 || evs[0].Kind != TimedOut || evs[0].Waiter != (Waiter{2, 1}) {
		t.Fatalf("re-sent wait: %+v, want the first request answered T", evs)
	}
	evs, _ = e.Release(at(2*time.Second), "k", holder, nil)
	if len(evs) != 2 || evs[1].Waiter != (Waiter{4, 1}) || evs[1].ID != "a" {
		t.Fatalf("release: %+v, want the re-sent acquire, first in line, granted", evs)
	}
	// Its connection closing does not leave its id behind.
	if !cancel(t, e, at(2*time.Second), Waiter{3, 1}) || len(e.byID) != 0 || len(e.idOf) != 0 {
		t.Fatalf("ids left: %v, of waiters: %v", e.byID, e.idOf)
	}
}

// Ids travel with the grants to a replica, so a re-sent acquire finds
// its grant on the node that takes over.
func TestAcquireIDSurvivesReplication(t *testing.T) {
	a := New(Config{Node: 0}, t0)
	tok := acquireID(t, a, t0, "k", 2, 30*time.Second, 0, "x", Waiter{1, 1})[0].Token
	b := New(Config{Node: 1}, t0)
	b.Restore(t0, a.Snapshot(t0), nil)
	b.Succeed(at(time.Second))
	evs := acquireID(t, b, at(time.Second), "k", 2, 30*time.Second, 0, "x", Waiter{9, 1})
	if len(evs) != 1 || evs[0].Token != tok {
		t.Fatalf("after failover: %+v, want the grant %d again", evs, tok)
	}
}

// Inspect lists the id each holder and each waiter acquired with, so that
// Q can say who holds a key and who waits for it.
func TestInspectShowsIDs(t *testing.T) {
	e := New(Config{}, t0)
	acquireID(t, e, t0, "k", 2, 10*time.Second, 0, "alice#1", Waiter{1, 1})
	acquireID(t, e, t0, "k", 2, 10*time.Second, 0, "", Waiter{2, 1})
	acquireID(t, e, t0, "k", 2, 10*time.Second, 0, "bob#1", Waiter{3, 1})
	acquireID(t, e, t0, "k", 2, 10*time.Second, 0, "", Waiter{4, 1})
	hs, ws := e.Inspect(t0, "k")
	if len(hs) != 2 || hs[0].ID != "alice#1" || hs[1].ID != "" {
		t.Errorf("holders %+v", hs)
	}
	if len(ws) != 2 || ws[0].ID != "bob#1" || ws[1].ID != "" {
		t.Errorf("waiters %+v", ws)
	}
}
