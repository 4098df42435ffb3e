package cluster

// The writer in a running node, over loopback.

import (
	"bufio"
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A release hands the key to a waiter whose client reads nothing: the
// releasing connection's reader, which writes the grant itself
// (outwriter.go), must not block on the waiter's full socket. The release
// is answered at once, and the waiter gets its grant behind every answer
// queued before it once it reads.
func TestGrantToAFullSocketDoesNotBlockTheRelease(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	tn := startNode(t, addr, nil)
	h := dialWire(t, addr)
	h.send("A k 30 0")
	tok := h.expect(`A k (\d+)`)[1]

	w := dialWire(t, addr)
	w.send("A k 30 0")
	waitFor(t, "the waiter", func() bool {
		h.send("Q k")
		return strings.Contains(h.expect(`Q k .*`)[0], " 1 ")
	})
	// w asks for far more than its socket holds and reads nothing, until
	// the node holds answers it cannot write.
	const asks = 200_000
	flood := []byte(strings.Repeat("Q k\n", asks))
	sent := make(chan error, 1)
	go func() {
		_, err := w.nc.Write(flood)
		sent <- err
	}()
	waitFor(t, "answers piling up for w", func() bool { return tn.output.bytes.Load() >= readPauseAt/2 })

	h.send("R k " + tok)
	h.expect(`R k ok`)

	r := bufio.NewReaderSize(w.nc, 1<<16)
	w.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	queued := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d answers: %v", queued, err)
		}
		if strings.HasPrefix(line, "A k ") {
			break
		}
		if !strings.HasPrefix(line, "Q k ") {
			t.Fatalf("got %q", line)
		}
		queued++
	}
	if queued == 0 || queued == asks {
		t.Fatalf("the grant came after %d of %d answers; want it among them, where the release came", queued, asks)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// writers counts the goroutines of the process that run a connection's
// writer.
func writers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("cluster.(*outWriter).writeLoop("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// An idle connection holds no writer goroutine: not one that never sent
// a request, not one whose answers its reader wrote, and not one whose
// answer came late, from a lease that ended: the writer that wrote it
// returns once it has.
func TestIdleConnectionHasNoWriter(t *testing.T) {
	tn := startNode(t, freeAddrs(t, 1)[0], nil)
	waitFor(t, "active", func() bool { return tn.roleIs(Active) })
	if n := writers(); n != 0 {
		t.Fatalf("%d writer goroutines before any connection, want 0", n)
	}
	dialWire(t, tn.Addr())
	holder, waiter := dialWire(t, tn.Addr()), dialWire(t, tn.Addr())
	holder.send("A k 0.2 0")
	holder.expect(`A k \d+`)
	if n := writers(); n != 0 {
		t.Fatalf("%d writer goroutines with every answer written by its reader, want 0", n)
	}
	// The grant comes from the timer loop once the lease ends, outside
	// any batch: a writer writes it.
	waiter.send("A k 30 0")
	waiter.expect(`A k \d+`)
	waitFor(t, "the writer of the late grant to return", func() bool { return writers() == 0 })
}
