package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// benchNode runs a single node on a free loopback port until b ends.
func benchNode(b *testing.B) string {
	b.Helper()
	n, err := New(Config{Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Listen(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return n.Addr()
}

// cycles runs acquire/release cycles on keys of its own over one
// connection, depth of them in flight: each round writes depth A lines,
// reads their grants, writes depth R lines and reads their answers.
func cycles(b *testing.B, addr, prefix string, depth int, next func() bool) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Error(err)
		return
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	keys := make([]string, depth)
	for i := range keys {
		keys[i] = prefix + "-" + strconv.Itoa(i)
	}
	tokens := make([]string, depth)
	var out []byte
	for next() {
		out = out[:0]
		for _, k := range keys {
			out = fmt.Appendf(out, "A %s 30 0\n", k)
		}
		nc.Write(out)
		for range keys {
			line, err := r.ReadString('\n')
			f := strings.Fields(line)
			if err != nil || len(f) != 3 || f[0] != "A" {
				b.Errorf("acquire: %q %v", line, err)
				return
			}
			for i, k := range keys {
				if k == f[1] {
					tokens[i] = f[2]
				}
			}
		}
		out = out[:0]
		for i, k := range keys {
			out = fmt.Appendf(out, "R %s %s\n", k, tokens[i])
		}
		nc.Write(out)
		for range keys {
			if line, err := r.ReadString('\n'); err != nil || !strings.HasSuffix(line, " ok\n") {
				b.Errorf("release: %q %v", line, err)
				return
			}
		}
	}
}

// BenchmarkNodeCycle measures a node's request path end to end over
// loopback TCP: one op is one acquire and one release. serial: one
// connection per goroutine, one request in flight on each, the
// request-answer client (every request a batch of its own); pipelined:
// 64 in flight per connection, as the official client sends them.
func BenchmarkNodeCycle(b *testing.B) {
	for _, mode := range []struct {
		name  string
		depth int
		par   int
	}{{"serial", 1, 8}, {"pipelined", 64, 1}} {
		b.Run(mode.name, func(b *testing.B) {
			addr := benchNode(b)
			var id atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(mode.par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// Rounds of depth cycles; the last round may run a few
				// more than its share.
				cycles(b, addr, "bench"+strconv.FormatInt(id.Add(1), 10), mode.depth, func() bool {
					for i := 0; i < mode.depth; i++ {
						if !pb.Next() {
							return i > 0
						}
					}
					return true
				})
			})
		})
	}
}
