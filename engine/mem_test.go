package engine

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkHeldKeyMemory measures the heap one held key costs: 1M keys
// each acquired once (locks), the key strings built before the measure.
func BenchmarkHeldKeyMemory(b *testing.B) {
	const n = 1 << 20
	keys := benchKeys(n)
	var per float64
	for b.Loop() {
		per = heldKeyBytes(keys)
	}
	b.ReportMetric(per, "B/held-key")
}

// BenchmarkSemaphoreMemory measures the heap a semaphore's holders cost:
// 128Ki keys of limit 8, each held by 8, 1Mi holders in all.
func BenchmarkSemaphoreMemory(b *testing.B) {
	const keys, limit = 1 << 17, 8
	names := benchKeys(keys)
	now := time.Unix(1_700_000_000, 0)
	var per float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		e := New(Config{MaxKeys: keys}, now)
		out := make([]Event, 0, 1)
		for i := range keys * limit {
			out, _ = e.Acquire(now, names[i%keys], limit, time.Hour, 0, Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if e.Held() != keys*limit {
			b.Fatalf("%d held", e.Held())
		}
		per = float64(after.HeapAlloc-before.HeapAlloc) / (keys * limit)
		runtime.KeepAlive(e)
	}
	b.ReportMetric(per, "B/holder")
}

// heldKeyBytes is the heap a held lock costs, per key, when each of keys
// is acquired once: the key strings are built before the measure.
func heldKeyBytes(keys []string) float64 {
	n := len(keys)
	now := time.Unix(1_700_000_000, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e := New(Config{MaxKeys: n}, now)
	out := make([]Event, 0, 1)
	for i, k := range keys {
		out, _ = e.Acquire(now, k, 1, time.Hour, 0, Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(e)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestHeldKeyMemory bounds what a held lock costs: 1M of them must fit
// in 150 MB of RSS with the node's own. The layout before the bound was
// 183 bytes a key (a 128-byte keyState, a map entry of about 40); now
// 80 for the keyState, 5 to 11 in the index, 8 to 10 in each of the key
// list and the lease heap.
func TestHeldKeyMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 200k keys")
	}
	per := heldKeyBytes(benchKeys(200_000))
	t.Logf("%.1f bytes a held key", per)
	if per > 120 {
		t.Fatalf("a held key costs %.1f bytes of heap; want at most 120", per)
	}
}

// TestStateSizes pins the size classes of the states a million of which
// a node may hold: one more field, and each would take the next class.
func TestStateSizes(t *testing.T) {
	for _, s := range []struct {
		name      string
		size, max uintptr
	}{
		{"keyState", unsafe.Sizeof(keyState{}), 64},
		{"crowdHolder", unsafe.Sizeof(crowdHolder{}), 48},
		{"waiter", unsafe.Sizeof(waiter{}), 80},
	} {
		if s.size > s.max {
			t.Errorf("%s is %d bytes; want at most %d", s.name, s.size, s.max)
		}
	}
}

// TestReleaseGivesBackRoom: once a million keys (here 100k) and their
// waiters are gone, the engine's index, key list, heaps and waiter maps
// are small again, for the garbage collector to return their room.
func TestReleaseGivesBackRoom(t *testing.T) {
	const n = 100_000
	keys := benchKeys(n)
	now := time.Unix(1_700_000_000, 0)
	e := New(Config{MaxKeys: n, MaxWaitersPerKey: n, MaxWaiters: n}, now)
	toks := make([]uint64, n)
	for i, k := range keys {
		out, err := e.Acquire(now, k, 1, time.Hour, 0, Waiter{Conn: 1, Seq: uint64(i)}, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("acquire %s: %v %v", k, out, err)
		}
		toks[i] = out[0].Token
	}
	for i := range n {
		if _, err := e.Acquire(now, keys[0], 1, time.Hour, time.Hour, Waiter{Conn: 2, Seq: uint64(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		cancel(t, e, now, Waiter{Conn: 2, Seq: uint64(i)})
	}
	for i, k := range keys {
		if _, ok := e.Release(now, k, toks[i], nil); !ok {
			t.Fatalf("release %s", k)
		}
	}
	wantStats(t, e, 0, 0)
	if len(e.slots) > minSlots || len(e.all.c) > 2 || len(e.leases.c) > 2 || cap(e.waits) > 1024 || len(e.waiters.slots) > minSlots {
		t.Fatalf("after the release: index %d slots, room for %d keys, %d leases, %d waits; waiters' table %d slots",
			len(e.slots), len(e.all.c)*chunkLen, len(e.leases.c)*chunkLen, cap(e.waits), len(e.waiters.slots))
	}
}

// TestWaiterMemory bounds what a waiter costs the engine: 100k waiters
// on one key, over 100 connections, must fit in 30 MB of RSS with the
// node's own and the connections'. A waiter took 96 bytes and a
// map[Waiter]*waiter entry about 38 before the bound (about 134 in all);
// then 80 and 11 to 21 in the waiter table (101); now 64, the id of the
// few acquires that have one kept beside (85).
func TestWaiterMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100k waiters")
	}
	const n = 100_000
	now := time.Unix(1_700_000_000, 0)
	e := New(Config{MaxWaitersPerKey: n, MaxWaiters: n}, now)
	if _, err := e.Acquire(now, "hot", 1, time.Hour, 0, Waiter{Conn: 1}, nil); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		if _, err := e.Acquire(now, "hot", 1, time.Hour, 0, Waiter{Conn: uint64(2 + i%100), Seq: uint64(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(e)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.1f bytes a waiter", per)
	if per > 95 {
		t.Fatalf("a waiter costs %.1f bytes of heap; want at most 95", per)
	}
}
