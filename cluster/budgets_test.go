package cluster

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Connections of one address that loop key listings over every key slow
// another address's listing down about as much as one more listing
// would, not as much as all of theirs: the slices of every address take
// turns.
func TestKeyListingsOfOneAddressDoNotStarveAnother(t *testing.T) {
	const (
		keys    = 50_000
		looping = 8
	)
	addr := freeAddrs(t, 1)[0]
	tn := startNodeWith(t, addr, nil, func(c *Config) { c.Limits = Limits{MaxConnsPerIP: -1} })
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
			if c.scanner {
				scanning++
			}
		}
		return scanning == looping
	})
	under := list(w, "legit*")
	t.Logf("K legit* over %d keys: %v alone, %v beside %d connections of another address looping K *", keys, alone, under, looping)
	if under > 3*alone+100*time.Millisecond {
		t.Fatalf("K legit* took %v beside %d looping listings of another address, %v alone: want at most about twice", under, looping, alone)
	}
}
