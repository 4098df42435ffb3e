package engine

import (
	"testing"
	"time"
)

// A node that did not serve for a while gives its ghosts that much more
// grace: a client that re-sent its acquire meanwhile still claims its
// place, ahead of one that came after it.
func TestDelayedGhostsKeepTheirPlaceThroughAStop(t *testing.T) {
	e := New(Config{}, t0)
	tok := acquireID(t, e, t0, "k", 1, 30*time.Second, 0, "a#1", Waiter{1, 1})[0].Token
	e.AddGhost(t0, "k", 1, "b#1", 10*time.Second, 0, 500*time.Millisecond)
	e.AddGhost(t0, "k", 1, "c#1", 10*time.Second, 0, 500*time.Millisecond)
	e.DelayGhosts(time.Second)
	if d, ok := e.NextDeadline(); !ok || !d.Equal(at(1500*time.Millisecond)) {
		t.Fatalf("next deadline %v, %v, want the delayed grace's end", d, ok)
	}
	// After the grace it had, before the one it has now: c claims its
	// place behind b's.
	acquireID(t, e, at(1200*time.Millisecond), "k", 1, 10*time.Second, 0, "c#1", Waiter{3, 1})
	evs, _ := e.Release(at(1300*time.Millisecond), "k", tok, nil)
	if len(evs) != 1 || evs[0].Kind != Freed {
		t.Fatalf("release: %+v, want the place kept for b", evs)
	}
	evs = e.Advance(at(1500*time.Millisecond), nil)
	if len(evs) != 2 || evs[0].Kind != TimedOut || evs[0].ID != "b#1" || evs[1].Kind != Granted || evs[1].Waiter != (Waiter{3, 1}) {
		t.Fatalf("b's grace over: %+v, want b's end, then c granted", evs)
	}
}
