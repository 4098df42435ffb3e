package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// scanAll runs a scan to its end in slices of n, with nothing in between.
func scanAll(e *Engine, now time.Time, n int) (keys []string, holders map[string]Holder, calls int) {
	holders = map[string]Holder{}
	for cur := ScanStart; ; {
		cur = e.Scan(now, cur, n, func(h Holder, held bool) {
			keys = append(keys, h.Key)
			if held {
				holders[h.Key] = h
			}
		})
		calls++
		if cur == 0 {
			return keys, holders, calls
		}
	}
}

func TestScan(t *testing.T) {
	e := New(Config{}, t0)
	if keys, _, calls := scanAll(e, t0, 10); len(keys) != 0 || calls != 1 {
		t.Fatalf("scan of an empty engine visited %q in %d calls", keys, calls)
	}
	toks := map[string]uint64{}
	for i := range 7 {
		k := fmt.Sprint("k", i)
		toks[k] = hold(t, e, t0, k, time.Duration(i+1)*time.Minute, wtr(uint64(i)))
	}
	mustAcquire(t, e, t0, "k3", time.Minute, 0, wtr(100))
	toks["k9"] = hold(t, e, t0, "k9", time.Second, wtr(9))
	now := at(30 * time.Second)
	for _, n := range []int{1, 3, 8, 100} {
		keys, holders, calls := scanAll(e, now, n)
		if want := (8 + n - 1) / n; calls != want {
			t.Errorf("n=%d: %d calls; want %d", n, calls, want)
		}
		slices.Sort(keys)
		if want := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k9"}; !slices.Equal(keys, want) {
			t.Fatalf("n=%d: visited %q; want each of %q once", n, keys, want)
		}
		for k, h := range holders {
			// k9's lease ended, but Scan fires no deadline: it is
			// still held, with nothing left.
			lease := time.Duration(k[1]-'0'+1) * time.Minute
			if k == "k9" {
				lease = time.Second
			}
			want := Holder{Key: k, Token: toks[k], LeaseLeft: max(lease-30*time.Second, 0), Limit: 1}
			if h != want {
				t.Errorf("n=%d: holder %+v; want %+v", n, h, want)
			}
		}
	}
	// n below 1 counts as 1, so that a scan always ends.
	if cur := e.Scan(now, ScanStart, 0, func(Holder, bool) {}); cur != 7 {
		t.Fatalf("Scan with n 0 returned %d; want 7", cur)
	}
	if cur := e.Scan(now, -5, 3, func(Holder, bool) { t.Fatal("visit below 0") }); cur != 0 {
		t.Fatalf("Scan from -5 returned %d; want 0", cur)
	}

	// A key waited on but not held (a replicated free of a key with
	// waiters) is visited with held false.
	e.ApplyFree("k3", toks["k3"])
	var got []string
	e.Scan(now, ScanStart, 100, func(h Holder, held bool) {
		if h.Key == "k3" {
			got = append(got, fmt.Sprint(held, h.Token, h.LeaseLeft))
		}
	})
	if !slices.Equal(got, []string{"false 0 0s"}) {
		t.Fatalf("k3 visited as %q; want once, not held", got)
	}
}

func TestHeld(t *testing.T) {
	e := New(Config{}, t0)
	ta := hold(t, e, t0, "a", time.Minute, wtr(1))
	hold(t, e, t0, "b", time.Second, wtr(2))
	mustAcquire(t, e, t0, "a", time.Minute, 0, wtr(3))
	e.ApplyHeld(t0, "c", 1, 1, time.Minute)
	if e.Held() != 3 {
		t.Fatalf("Held %d; want 3", e.Held())
	}
	e.Release(t0, "a", ta, nil) // handed to wtr(3): still held
	e.Advance(at(time.Second), nil)
	e.ApplyFree("c", 1)
	if e.Held() != 1 {
		t.Fatalf("Held %d; want 1", e.Held())
	}
}

// TestScanVisitsEveryKeyPresentThroughout interleaves the slices of scans
// with random acquires, releases, cancels, expiries, timeouts and
// replicated holders and frees, and checks Scan's promise: every key held
// or waited on from a scan's start to its end is visited.
//
// Each call that changes the engine is preceded by an Advance to the same
// instant, so that it only adds keys or only removes them: a key that an
// Acquire's own Advance dropped and the Acquire added again would look
// present throughout, though it is a new entry that the scan may miss.
func TestScanVisitsEveryKeyPresentThroughout(t *testing.T) {
	scanWalk(t, func(int) int { return 1 })
}

// TestScanVisitsEverySemaphorePresentThroughout is the same walk over
// keys of limits 1 to 4: Scan visits each holder, all of a key's holders
// in the call that visits the key.
func TestScanVisitsEverySemaphorePresentThroughout(t *testing.T) {
	scanWalk(t, func(k int) int { return 1 + k%4 })
}

// scanWalk is the walk of TestScanVisitsEveryKeyPresentThroughout; key
// k<i> has limit limitOf(i).
func scanWalk(t *testing.T, limitOf func(int) int) {
	scans := 3000
	if testing.Short() {
		scans = 300
	}
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x5ca9))
			e := New(Config{MaxKeys: 48, MaxWaitersPerKey: 3}, t0)
			names := make([]string, 64)
			for i := range names {
				names[i] = fmt.Sprint("k", i)
			}
			now := t0
			seq := uint64(0)
			present := func() map[string]bool {
				s := map[string]bool{}
				e.Scan(now, ScanStart, e.all.len()+1, func(h Holder, _ bool) { s[h.Key] = true })
				return s
			}
			// step makes one random change, calling settled after its
			// Advance and after the change itself.
			step := func(settled func()) {
				if rng.IntN(4) == 0 {
					now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
				}
				e.Advance(now, nil)
				settled()
				defer settled()
				ki := rng.IntN(len(names))
				key, limit := names[ki], limitOf(ki)
				// A holder of key: the only one draws nothing, so
				// that the walk of locks is the one it always was.
				pick := func() (Holder, bool) {
					hs, _ := e.Inspect(now, key)
					switch len(hs) {
					case 0:
						return Holder{}, false
					case 1:
						return hs[0], true
					}
					return hs[rng.IntN(len(hs))], true
				}
				switch op := rng.IntN(100); {
				case op < 45:
					seq++
					e.Acquire(now, key, limit, time.Duration(1+rng.IntN(2000))*time.Millisecond, time.Duration(rng.IntN(1500))*time.Millisecond, Waiter{Conn: seq % 7, Seq: seq}, nil)
				case op < 75:
					if h, held := pick(); held {
						e.Release(now, key, h.Token, nil)
					}
				case op < 82:
					// The waiter with the lowest Seq: map order would
					// make the walk differ from run to run.
					var first *Waiter
					for wt := range e.waiters.all {
						if w := wt.w; first == nil || w.Seq < first.Seq {
							first = &w
						}
					}
					if first != nil {
						e.Cancel(now, *first, nil)
					}
				case op < 92:
					e.ApplyHeld(now, key, limit, e.HighWater()+1, time.Duration(1+rng.IntN(1000))*time.Millisecond)
				default:
					if h, held := pick(); held {
						e.ApplyFree(key, h.Token)
					}
				}
			}
			for range 200 {
				step(func() {})
			}
			revisits, partial := 0, 0
			for range scans {
				throughout := present()
				visited := map[string]int{}
				for cur := ScanStart; ; {
					for range rng.IntN(6) {
						step(func() {
							for k := range throughout {
								if e.lookup(k) == nil {
									delete(throughout, k)
								}
							}
						})
					}
					var bad string
					inCall := map[string]int{}
					cur = e.Scan(now, cur, 1+rng.IntN(8), func(h Holder, held bool) {
						if inCall[h.Key] == 0 {
							visited[h.Key]++
						}
						inCall[h.Key]++
						hs, _ := e.Inspect(now, h.Key)
						if held && !slices.Contains(hs, h) || !held && (len(hs) > 0 || h != Holder{Key: h.Key}) {
							bad = fmt.Sprintf("visit %+v held=%v; Inspect %+v", h, held, hs)
						}
					})
					for k, n := range inCall {
						if hs, _ := e.Inspect(now, k); n != max(len(hs), 1) {
							bad = fmt.Sprintf("one call visits %s %d times; it has %d holders", k, n, len(hs))
						}
					}
					if bad != "" {
						t.Fatal(bad)
					}
					if cur == 0 {
						break
					}
					partial++
				}
				for k := range throughout {
					if visited[k] == 0 {
						t.Fatalf("key %s was present throughout the scan but not visited (visited %v)", k, visited)
					}
				}
				for _, n := range visited {
					if n > 1 {
						revisits++
					}
				}
			}
			// The walk must move keys under the scan, or it proves little.
			if revisits == 0 || partial < scans {
				t.Fatalf("%d revisits, %d partial slices in %d scans: the walk does not exercise the scan", revisits, partial, scans)
			}
		})
	}
}
