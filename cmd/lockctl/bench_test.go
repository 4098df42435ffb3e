package main

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBenchRunsCycles(t *testing.T) {
	for _, tc := range []struct {
		mode, keys string
		clients    int
		keyCount   int
	}{
		{"pipelined", "unique", 1, 8},
		{"pipelined", "hot", 1, 1},
		{"per-worker", "3", 8, 3},
	} {
		t.Run(tc.mode+"/"+tc.keys, func(t *testing.T) {
			f := startFake(t)
			code, stdout, stderr := lockctl(t, "--addr", f.addr, "--json", "bench",
				"--workers", "8", "--duration", "200ms", "--mode", tc.mode, "--keys", tc.keys)
			if code != 0 {
				t.Fatalf("exit %d; stderr %q", code, stderr)
			}
			var res benchResult
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("%q: %v", stdout, err)
			}
			if res.Mode != tc.mode || res.Workers != 8 || res.Clients != tc.clients || res.KeyCount != tc.keyCount {
				t.Errorf("result %+v does not describe the run asked for", res)
			}
			if res.Cycles == 0 || res.Errors != 0 || res.CyclesPerSecond <= 0 {
				t.Errorf("cycles %d, errors %d (%s), rate %f", res.Cycles, res.Errors, res.FirstError, res.CyclesPerSecond)
			}
			l := res.Latency
			if !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
				t.Errorf("latency quantiles out of order: %+v", l)
			}
			// Every cycle released its lock, and no lock was left behind.
			if r := f.count("R bench-"); uint64(r) != res.Cycles+1 {
				t.Errorf("%d releases for %d cycles and a probe", r, res.Cycles)
			}
			f.mu.Lock()
			if len(f.held) != 0 {
				t.Errorf("locks left held: %v", f.held)
			}
			f.mu.Unlock()
		})
	}
}

// bench --limit 8 --keys hot: eight workers at a time on one key, a
// semaphore, every acquire asking for the same limit.
func TestBenchSemaphoreRow(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "--json", "bench", "--workers", "4", "--duration", "100ms", "--keys", "hot", "--limit", "8")
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	var res benchResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Limit != 8 || res.Cycles == 0 {
		t.Fatalf("result %q, %v: want limit 8 and cycles", stdout, err)
	}
	for _, r := range f.requests() {
		if strings.HasPrefix(r, "A ") && !strings.HasSuffix(r, " limit=8") {
			t.Fatalf("acquire %q without the limit", r)
		}
	}
	// Against a node, the eight places of the hot key are shared by more
	// workers than places, and every cycle completes.
	tc := startCluster(t, 1)
	code, stdout, stderr = lockctl(t, "--addr", tc.addrs[0], "bench", "--workers", "16", "--duration", "300ms", "--keys", "hot", "--limit", "8")
	if code != 0 || !strings.Contains(stdout, "hot (1 key, each a semaphore of 8 places)") || !strings.Contains(stdout, "errors       0\n") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = lockctl(t, "--addr", f.addr, "bench", "--limit", "0")
	if code != exitUsage || !strings.Contains(stderr, "--limit 0: want how many may hold the key at once, from 1 (a lock, the default) to 65535") {
		t.Errorf("--limit 0: exit %d, %q", code, stderr)
	}
}

func TestBenchTextReport(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "bench", "--workers", "2", "--duration", "50ms")
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	for _, want := range []string{"mode ", "pipelined: 2 workers", "cycles ", "/s)", "errors ", "timeouts ", "latency ", "p50 ", "p99 ", "p99.9 "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	samples := make([]time.Duration, 0, 100000)
	r := rand.New(rand.NewPCG(1, 2))
	for range cap(samples) {
		d := time.Duration(r.ExpFloat64() * float64(time.Millisecond))
		samples = append(samples, d)
		h.record(d)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := samples[int(q*float64(len(samples)-1))]
		got := h.quantile(q)
		if diff := float64(got-exact) / float64(exact); diff > 0.04 || diff < -0.04 {
			t.Errorf("q%.3f = %s, exact %s: off by %.1f%%", q, got, exact, diff*100)
		}
	}
	if h.max != samples[len(samples)-1] || h.quantile(1) != h.max {
		t.Errorf("max %s, want %s", h.max, samples[len(samples)-1])
	}
	var empty histogram
	if empty.quantile(0.5) != 0 {
		t.Error("an empty histogram has no quantile")
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Every value falls in the bucket whose range holds it, and buckets
	// follow each other without gaps.
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 1 << 20, 123456789, 1<<63 + 12345, ^uint64(0)} {
		i := histBucket(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("value %d: bucket %d out of range", v, i)
		}
		low, width := histLow(i), histWidth(i)
		if v < low || v-low >= width {
			t.Errorf("value %d in bucket %d = [%d, +%d)", v, i, low, width)
		}
	}
	for i := 1; i < histBucket(^uint64(0)); i++ {
		if histLow(i) != histLow(i-1)+histWidth(i-1) {
			t.Fatalf("gap between buckets %d and %d", i-1, i)
		}
	}
}
