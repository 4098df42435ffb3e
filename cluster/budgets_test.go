package cluster

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Connections of one address that loop key listings over every key slow
// another address's listing down about as much as one more listing
// would, not as much as all of theirs: the slices of every address take
// turns, so while the other address's listing is scanned, theirs get
// about as many slices as it does.
func TestKeyListingsOfOneAddressDoNotStarveAnother(t *testing.T) {
	const (
		keys    = 50_000
		looping = 8
	)
	addr := freeAddrs(t, 1)[0]
	tn := startNodeWith(t, addr, nil, func(c *Config) { c.Limits = Limits{MaxConnsPerIP: -1} })
	var mu sync.Mutex
	var turns []string // the address of each slice scanned
	tn.scanTurns.taken = func(ip string) {
		mu.Lock()
		turns = append(turns, ip)
		mu.Unlock()
	}
	w := dialWire(t, addr)
	var b strings.Builder
	for i := range keys {
		fmt.Fprintf(&b, "A k%06d 600 0\n", i)
	}
	w.nc.Write([]byte(b.String()))
	for range keys {
		if _, err := w.r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	list := func(w *wire, pattern string) time.Duration {
		start := time.Now()
		w.send("K " + pattern)
		w.expect(`K ` + strings.ReplaceAll(pattern, "*", `\*`) + ` \d+.*`)
		return time.Since(start)
	}
	alone := list(w, "legit*")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range looping {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			r := bufio.NewReader(nc)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := nc.Write([]byte("K *\n")); err != nil {
					return
				}
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	// Every looping connection has a listing under way.
	waitFor(t, "the looping listings", func() bool {
		tn.mu.Lock()
		defer tn.mu.Unlock()
		scanning := 0
		for _, c := range tn.conns {
			if c.scan.busy() {
				scanning++
			}
		}
		return scanning == looping
	})
	mu.Lock()
	from := len(turns)
	mu.Unlock()
	under := list(w, "legit*")
	mu.Lock()
	during := turns[from:]
	mu.Unlock()
	// The slices scanned from the first of this listing's to its last.
	first, last := slices.Index(during, "127.0.0.1"), 0
	for i, ip := range during {
		if ip == "127.0.0.1" {
			last = i
		}
	}
	own := 0
	for _, ip := range during[first : last+1] {
		if ip == "127.0.0.1" {
			own++
		}
	}
	others := last + 1 - first - own
	t.Logf("K legit* over %d keys: %v alone, %v beside %d connections of another address looping K *; %d slices of its own, %d of theirs in between", keys, alone, under, looping, own, others)
	if first < 0 || others > own {
		t.Fatalf("while K legit* scanned its %d slices, %d slices of %d looping listings of another address were scanned: want at most as many as its own", own, others, looping)
	}
}

// The connections of one address together watch at most a tenth of the
// node's watches; others still watch, and keys unwatched or closed
// with their connection make room again.
func TestWatchesPerAddressAreBounded(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, func(c *Config) { c.MaxWatches, c.MaxTotalWatches = 8, 100 })
	from := func(ip string) *wire {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return &wire{t: t, nc: nc, r: bufio.NewReader(nc)}
	}
	watch := func(w *wire, key string) {
		t.Helper()
		w.send("L " + key)
		w.expect(`L ` + key + ` - - 0`)
	}
	a, b := from("127.0.0.2"), from("127.0.0.2")
	for i := range 8 {
		watch(a, fmt.Sprintf("a%d", i))
	}
	watch(b, "b0")
	watch(b, "b1")
	watch(b, "b1") // the same watch again takes nothing more
	b.send("L b2")
	b.expect(`E b2 L: the connections from 127\.0\.0\.2 already watch 10 keys, the most one address may \(a tenth of lockd --max-total-watches\); unwatch some \(U\)`)
	watch(from("127.0.0.3"), "c0")
	b.send("U b0")
	b.expect(`U b0 ok`)
	watch(b, "b2")
	a.nc.Close()
	waitFor(t, "a's watches to end", func() bool {
		b.send("L b3")
		line, err := b.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.HasPrefix(line, "L b3 ")
	})
}
