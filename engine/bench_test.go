package engine

import (
	"strconv"
	"testing"
	"time"
)

// benchKeys returns n distinct keys, built before the timer starts so
// that the benchmark measures the engine and not strconv.
func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "bench/key/" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkAcquireRelease is the uncontended hot path: grant of a free key
// and its release, with the event slice reused as the caller does.
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("unique-keys", func(b *testing.B) {
		keys := benchKeys(1 << 12)
		now := time.Unix(1_700_000_000, 0)
		e := New(Config{}, now)
		out := make([]Event, 0, 8)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			key := keys[i&(len(keys)-1)]
			var err error
			out, err = e.Acquire(now, key, 1, time.Minute, 0, Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
			if err != nil || len(out) != 1 || out[0].Kind != Granted {
				b.Fatalf("acquire %d: %v %+v", i, err, out)
			}
			var ok bool
			out, ok = e.Release(now, key, out[0].Token, out[:0])
			if !ok {
				b.Fatalf("release %d refused", i)
			}
		}
	})
	b.Run("many-held", func(b *testing.B) {
		// 4096 keys stay held while one more is taken and given back, so
		// the lease heap and the key map are not trivially small.
		keys := benchKeys(1<<12 + 1)
		now := time.Unix(1_700_000_000, 0)
		e := New(Config{}, now)
		out := make([]Event, 0, 8)
		for i, k := range keys[1:] {
			out, _ = e.Acquire(now, k, 1, time.Hour+time.Duration(i), 0, Waiter{Conn: 2, Seq: uint64(i)}, out[:0])
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var err error
			out, err = e.Acquire(now, keys[0], 1, time.Minute, 0, Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
			if err != nil || len(out) != 1 {
				b.Fatalf("acquire %d: %v %+v", i, err, out)
			}
			out, _ = e.Release(now, keys[0], out[0].Token, out[:0])
		}
	})
	b.Run("limit-8-unique-keys", func(b *testing.B) {
		// The same as unique-keys, each key a semaphore of 8 places.
		keys := benchKeys(1 << 12)
		now := time.Unix(1_700_000_000, 0)
		e := New(Config{}, now)
		out := make([]Event, 0, 8)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			key := keys[i&(len(keys)-1)]
			var err error
			out, err = e.Acquire(now, key, 8, time.Minute, 0, Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
			if err != nil || len(out) != 1 || out[0].Kind != Granted {
				b.Fatalf("acquire %d: %v %+v", i, err, out)
			}
			var ok bool
			out, ok = e.Release(now, key, out[0].Token, out[:0])
			if !ok {
				b.Fatalf("release %d refused", i)
			}
		}
	})
	b.Run("hot-key", func(b *testing.B) {
		now := time.Unix(1_700_000_000, 0)
		e := New(Config{}, now)
		out := make([]Event, 0, 8)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var err error
			out, err = e.Acquire(now, "hot", 1, time.Minute, 0, Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
			if err != nil || len(out) != 1 {
				b.Fatalf("acquire %d: %v %+v", i, err, out)
			}
			var ok bool
			out, ok = e.Release(now, "hot", out[0].Token, out[:0])
			if !ok {
				b.Fatalf("release %d refused", i)
			}
		}
	})
}

// BenchmarkContendedHandoff measures a release that hands the key to a
// waiter at once, with a new waiter joining the queue each round so the
// queue length stays constant.
func BenchmarkContendedHandoff(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run("waiters="+strconv.Itoa(depth), func(b *testing.B) {
			now := time.Unix(1_700_000_000, 0)
			e := New(Config{}, now)
			out := make([]Event, 0, 8)
			out, _ = e.Acquire(now, "hot", 1, time.Minute, 0, Waiter{Conn: 0, Seq: 0}, out[:0])
			tok := out[0].Token
			seq := uint64(1)
			for range depth {
				out, _ = e.Acquire(now, "hot", 1, time.Minute, time.Minute, Waiter{Conn: seq, Seq: seq}, out[:0])
				seq++
			}
			b.ReportAllocs()
			for b.Loop() {
				var err error
				out, err = e.Acquire(now, "hot", 1, time.Minute, time.Minute, Waiter{Conn: seq, Seq: seq}, out[:0])
				if err != nil || len(out) != 0 {
					b.Fatalf("acquire: %v %+v", err, out)
				}
				seq++
				var ok bool
				out, ok = e.Release(now, "hot", tok, out[:0])
				if !ok || len(out) != 2 || out[1].Kind != Granted {
					b.Fatalf("release: %v %+v", ok, out)
				}
				tok = out[1].Token
			}
		})
	}
}

// BenchmarkSemaphoreHandoff is BenchmarkContendedHandoff for a key of 8
// places, all held: each round a waiter joins the queue and the oldest
// holder releases, which hands its place to the head of the queue.
func BenchmarkSemaphoreHandoff(b *testing.B) {
	const limit = 8
	for _, depth := range []int{1, 64} {
		b.Run("limit=8/waiters="+strconv.Itoa(depth), func(b *testing.B) {
			now := time.Unix(1_700_000_000, 0)
			e := New(Config{}, now)
			out := make([]Event, 0, 8)
			var toks [limit]uint64 // the holders, oldest at toks[next]
			next := 0
			seq := uint64(0)
			for i := range limit {
				out, _ = e.Acquire(now, "hot", limit, time.Minute, 0, Waiter{Conn: seq, Seq: seq}, out[:0])
				toks[i] = out[0].Token
				seq++
			}
			for range depth {
				out, _ = e.Acquire(now, "hot", limit, time.Minute, time.Minute, Waiter{Conn: seq, Seq: seq}, out[:0])
				seq++
			}
			b.ReportAllocs()
			for b.Loop() {
				var err error
				out, err = e.Acquire(now, "hot", limit, time.Minute, time.Minute, Waiter{Conn: seq, Seq: seq}, out[:0])
				if err != nil || len(out) != 0 {
					b.Fatalf("acquire: %v %+v", err, out)
				}
				seq++
				var ok bool
				out, ok = e.Release(now, "hot", toks[next], out[:0])
				if !ok || len(out) != 2 || out[1].Kind != Granted {
					b.Fatalf("release: %v %+v", ok, out)
				}
				toks[next] = out[1].Token
				next = (next + 1) % limit
			}
		})
	}
}

// BenchmarkShared is the readers' hot path: a reader taken and given
// back beside 7 others that hold the key, and a writer's handoff to 8
// readers at once and back.
func BenchmarkShared(b *testing.B) {
	b.Run("reader-beside-readers", func(b *testing.B) {
		now := time.Unix(1_700_000_000, 0)
		e := New(Config{}, now)
		out := make([]Event, 0, 16)
		keys := []SetKey{{Key: "hot", Mode: Shared}}
		for i := range 7 {
			out, _ = e.AcquireSet(now, keys, time.Hour, 0, "", Waiter{Conn: 2, Seq: uint64(i)}, out[:0])
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var err error
			out, err = e.AcquireSet(now, keys, time.Minute, 0, "", Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
			if err != nil || len(out) != 1 || out[0].Kind != Granted {
				b.Fatalf("acquire %d: %v %+v", i, err, out)
			}
			out, _ = e.Release(now, "hot", out[0].Token, out[:0])
		}
	})
	b.Run("writer-to-8-readers", func(b *testing.B) {
		// Each round a writer waits behind 8 readers and 8 readers
		// behind it: the readers' releases grant the writer, whose
		// release grants the 8 readers together.
		now := time.Unix(1_700_000_000, 0)
		e := New(Config{}, now)
		out := make([]Event, 0, 16)
		keys := []SetKey{{Key: "hot", Mode: Shared}}
		var readers []uint64
		seq := uint64(0)
		for range 8 {
			seq++
			out, _ = e.AcquireSet(now, keys, time.Hour, 0, "", Waiter{Conn: seq, Seq: seq}, out[:0])
			readers = append(readers, out[0].Token)
		}
		b.ReportAllocs()
		for b.Loop() {
			seq++
			out, _ = e.Acquire(now, "hot", 1, time.Hour, 0, Waiter{Conn: seq, Seq: seq}, out[:0])
			for range 8 {
				seq++
				out, _ = e.AcquireSet(now, keys, time.Hour, 0, "", Waiter{Conn: seq, Seq: seq}, out[:0])
			}
			var writer uint64
			for _, r := range readers {
				out, _ = e.Release(now, "hot", r, out[:0])
				if len(out) == 2 {
					writer = out[1].Token
				}
			}
			out, _ = e.Release(now, "hot", writer, out[:0])
			if len(out) != 9 {
				b.Fatalf("the writer's release: %+v", out)
			}
			readers = readers[:0]
			for _, ev := range out[1:] {
				readers = append(readers, ev.Token)
			}
		}
	})
}

// BenchmarkSet is a set of 4 free keys taken and given back, and a set
// of 2 that waits for one key and is granted when it frees.
func BenchmarkSet(b *testing.B) {
	b.Run("4-free-keys", func(b *testing.B) {
		now := time.Unix(1_700_000_000, 0)
		e := New(Config{}, now)
		out := make([]Event, 0, 16)
		keys := []SetKey{{Key: "a"}, {Key: "b"}, {Key: "c", Mode: Shared}, {Key: "d"}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var err error
			out, err = e.AcquireSet(now, keys, time.Minute, 0, "", Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
			if err != nil || len(out) != 4 {
				b.Fatalf("acquire %d: %v %+v", i, err, out)
			}
			var toks [4]uint64
			for j, ev := range out {
				toks[j] = ev.Token
			}
			for j, k := range keys {
				out, _ = e.Release(now, k.Key, toks[j], out[:0])
			}
		}
	})
	b.Run("2-keys-waiting", func(b *testing.B) {
		now := time.Unix(1_700_000_000, 0)
		e := New(Config{}, now)
		out := make([]Event, 0, 16)
		keys := []SetKey{{Key: "a"}, {Key: "b"}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			out, _ = e.Acquire(now, "b", 1, time.Minute, 0, Waiter{Conn: 2, Seq: uint64(i)}, out[:0])
			tok := out[0].Token
			out, _ = e.AcquireSet(now, keys, time.Minute, 0, "", Waiter{Conn: 1, Seq: uint64(i)}, out[:0])
			out, _ = e.Release(now, "b", tok, out[:0])
			if len(out) != 3 {
				b.Fatalf("release: %+v", out)
			}
			a, bt := out[1].Token, out[2].Token
			out, _ = e.Release(now, "a", a, out[:0])
			out, _ = e.Release(now, "b", bt, out[:0])
		}
	})
}
