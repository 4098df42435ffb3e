package cluster

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The reader takes a client's bytes however they are cut: lines split
// across writes, many lines in one write, writes of one byte, reads that
// cross the small array an idle connection reads into (readloop.go). Each
// request is answered, in order, for several ways of cutting the same
// stream of 400.
func TestReaderTakesLinesHoweverCut(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	var stream strings.Builder
	const n = 400
	for i := range n {
		// Keys of varied length put line ends at every offset.
		fmt.Fprintf(&stream, "Q key-%d-%s\n", i, strings.Repeat("x", i%97))
	}
	data := []byte(stream.String())
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := dialWire(t, addr)
		lines := n
		if seed == 0 { // a byte at a time: a few lines suffice
			lines = 40
		}
		end := strings.Index(stream.String(), fmt.Sprintf("Q key-%d-", lines))
		if lines == n {
			end = len(data)
		}
		go func() {
			for rest := data[:end]; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN([]int{1, 16, 127, 129, 300, 5000}[seed]))
				if _, err := w.nc.Write(rest[:k]); err != nil {
					return
				}
				rest = rest[k:]
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}
		}()
		for i := range lines {
			w.expect(fmt.Sprintf(`Q key-%d-x{%d} .*`, i, i%97))
		}
	}
}

// A connection whose reader holds back its answers while it reads on
// (a pipelining client, outwriter.go) still gets a grant another
// connection's release hands it, and every answer of its own, in order.
func TestPipeliningReaderGetsItsGrant(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	h := dialWire(t, addr)
	h.send("A hot 30 0")
	tok := h.expect(`A hot (\d+)`)[1]

	p := dialWire(t, addr)
	p.send("A hot 30 0")
	stop := make(chan struct{})
	const per = 8
	go func() {
		batch := []byte(strings.Repeat("Q x\n", per))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := p.nc.Write(batch); err != nil {
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	p.expect(`Q x .*`) // p's reader is reading on
	h.send("R hot " + tok)
	h.expect(`R hot ok`)
	// p stops sending: nothing more wakes its reader, which must not
	// keep answers back.
	stop <- struct{}{}
	p.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		line, err := p.r.ReadString('\n')
		if err != nil {
			t.Fatalf("no grant for the pipelining connection: %v", err)
		}
		if strings.HasPrefix(line, "A hot ") {
			break
		}
		if !strings.HasPrefix(line, "Q x ") {
			t.Fatalf("got %q", line)
		}
	}
}
