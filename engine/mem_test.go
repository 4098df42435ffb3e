package engine

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkHeldKeyMemory measures the heap one held key costs: 1M keys
// each acquired once (locks), the key strings built before the measure.
func BenchmarkHeldKeyMemory(b *testing.B) {
	const n = 1 << 20
	keys := benchKeys(n)
	now := time.Unix(1_700_000_000, 0)
	var per float64
	for b.Loop() {
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
		per = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(e)
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
