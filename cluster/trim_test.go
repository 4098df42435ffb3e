package cluster

import (
	"testing"
	"time"
)

// Memory goes back to the OS once a wave of rests is over, not during it,
// and not again before restAfter; and once per mass release.
func TestTrimmerTicks(t *testing.T) {
	var tr trimmer
	now := time.Unix(1000, 0)
	step := func(size int, rests uint64, want string) {
		t.Helper()
		now = now.Add(trimEvery)
		if got := tr.tick(now, size, rests, 0); got != want {
			t.Fatalf("at %v, size %d, rests %d: trim %q, want %q", now.Unix(), size, rests, got, want)
		}
	}
	// A wave of rests: none while it lasts, one once a tick passes
	// without a rest, none after while nothing rests.
	for r := uint64(0); r <= 1500; r += 300 {
		step(0, r, "")
	}
	step(0, 1500, "idle connections rested")
	trimmed := now
	step(0, 1500, "")
	// Too few to be worth a collection.
	step(0, 1500+trimRests-1, "")
	step(0, 1500+trimRests-1, "")
	// Enough, but not before restAfter since the last.
	step(0, 1500+trimRests, "")
	for now.Add(trimEvery).Sub(trimmed) < restAfter {
		step(0, 1500+trimRests, "")
	}
	step(0, 1500+trimRests, "idle connections rested")
	// A mass release, once.
	step(trimMin, 1500+trimRests, "")
	step(trimMin/4-1, 1500+trimRests, "a mass release")
	step(trimMin/4-1, 1500+trimRests, "")
	step(0, 1500+trimRests, "")
}

// Output buffers shed by idle connections go back to the OS the same
// way: once trimShed bytes were shed and a tick passes with none shed.
func TestTrimmerReturnsShedBuffers(t *testing.T) {
	var tr trimmer
	now := time.Unix(1000, 0)
	step := func(shed uint64, want string) {
		t.Helper()
		now = now.Add(trimEvery)
		if got := tr.tick(now, 0, 0, shed); got != want {
			t.Fatalf("at %v, shed %d: trim %q, want %q", now.Unix(), shed, got, want)
		}
	}
	step(trimShed/2, "")
	step(trimShed-1, "")
	step(trimShed-1, "")
	step(trimShed+1, "")
	step(trimShed+1, "idle connections shed their output buffers")
	step(trimShed+1, "")
	step(2*trimShed, "")
	step(2*trimShed, "")
}

// A burst of keys or waiters gives its leftovers back once it is over:
// when the count grew by trimMin since its low point and held still for
// a tick; not while it grows, and not again before it grows by trimMin
// more.
func TestTrimmerReturnsMemoryAfterABurst(t *testing.T) {
	var tr trimmer
	now := time.Unix(1000, 0)
	step := func(size int, want string) {
		t.Helper()
		now = now.Add(trimEvery)
		if got := tr.tick(now, size, 0, 0); got != want {
			t.Fatalf("at %v, size %d: trim %q, want %q", now.Unix(), size, got, want)
		}
	}
	const settled = "a burst of keys or waiters settled"
	// Growing: nothing; still for a tick: once.
	for _, size := range []int{0, trimMin / 3, 2 * trimMin / 3, trimMin} {
		step(size, "")
	}
	step(trimMin, settled)
	step(trimMin, "")
	// Half a burst more is not worth a collection; a whole one is.
	step(3*trimMin/2, "")
	step(3*trimMin/2, "")
	step(2*trimMin, "")
	step(2*trimMin, settled)
	// Growth counts from the low point since the last trim.
	step(trimMin+trimMin/5, "")
	step(trimMin+trimMin/5, "")
	step(2*trimMin+trimMin/5-1, "")
	step(2*trimMin+trimMin/5-1, "")
	step(2*trimMin+trimMin/5, "")
	step(2*trimMin+trimMin/5, settled)
}
