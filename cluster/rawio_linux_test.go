//go:build linux

package cluster

import "testing"

// A client that sends a request and waits for its answer costs the node
// one read and one write per request: after a read that emptied the
// socket the reader waits on the poller, without first reading again to
// find nothing (push, rawio_linux.go). Before, every request cost an
// empty read too.
func TestReaderWaitsWithoutAnEmptyRead(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	tn := startNode(t, addr, nil)
	h := dialWire(t, addr)
	const cycles = 200
	for range cycles {
		h.send("A k 30 0")
		tok := h.expect(`A k (\d+)`)[1]
		h.send("R k " + tok)
		h.expect(`R k ok`)
	}
	tn.mu.Lock()
	var empty uint64
	for _, c := range tn.conns {
		if c.raw != nil {
			empty += c.raw.empty.Load()
		}
	}
	tn.mu.Unlock()
	if empty > cycles/10 {
		t.Fatalf("%d requests answered one at a time took %d reads that found nothing; want at most %d", 2*cycles, empty, cycles/10)
	}
}
