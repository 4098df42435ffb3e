package engine

import (
	"math"
	"sort"
	"testing"
	"time"
)

// Shorthands the engine's tests use; the cluster calls the forms with ids.

// Acquire is AcquireID without an id.
func (e *Engine) Acquire(now time.Time, key string, limit int, lease, wait time.Duration, w Waiter, out []Event) ([]Event, error) {
	return e.AcquireID(now, key, limit, lease, wait, "", w, out)
}

// Inspect is InspectN listing every waiter.
func (e *Engine) Inspect(now time.Time, key string) (hs []Holder, ws []WaiterInfo) {
	hs, ws, _ = e.InspectN(now, key, math.MaxInt)
	return hs, ws
}

// ApplyHeld is ApplyHeldID without an id.
func (e *Engine) ApplyHeld(now time.Time, key string, limit int, token uint64, leaseLeft time.Duration) {
	e.ApplyHeldID(now, key, limit, token, leaseLeft, "")
}

// Keys returns the keys held or waited on that match, sorted, at most
// limit of them, with the total number that matched, in one call.
func (e *Engine) Keys(match func(string) bool, limit int) ([]string, int) {
	var out []string
	total := 0
	for _, ks := range e.all.all {
		if k := ks.key; match(k) {
			total++
			out = append(out, k)
		}
	}
	sort.Strings(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, total
}

// cancel is Cancel of a waiter whose leaving lets nobody through (a
// lock's or a semaphore's): it fails t on any event.
func cancel(t testing.TB, e *Engine, now time.Time, w Waiter) bool {
	t.Helper()
	out, ok := e.Cancel(now, w, nil)
	if len(out) > 0 {
		t.Fatalf("Cancel(%+v) at %v: events %q; want none", w, now, describe(out))
	}
	return ok
}
