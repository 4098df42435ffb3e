package cluster

import (
	"bytes"
	"runtime"
	"testing"
)

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
