package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
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

// BenchmarkHandoff measures one hot key over loopback TCP: conns
// connections each acquire the key, release it at once and acquire it
// again, so every release hands the key to the oldest waiter, whose
// grant the releasing connection's reader writes itself (outwriter.go). One
// op is one handoff.
func BenchmarkHandoff(b *testing.B) {
	const conns = 8
	addr := benchNode(b)
	var done atomic.Bool
	var handoffs atomic.Int64
	errc := make(chan error, conns)
	b.ReportAllocs()
	b.ResetTimer()
	for range conns {
		go func() {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				errc <- err
				return
			}
			defer nc.Close()
			r := bufio.NewReader(nc)
			for !done.Load() {
				fmt.Fprintf(nc, "A hot 30 0\n")
				line, err := r.ReadString('\n')
				f := strings.Fields(line)
				if err != nil || len(f) != 3 || f[0] != "A" {
					errc <- fmt.Errorf("acquire: %q %v", line, err)
					return
				}
				if handoffs.Add(1) >= int64(b.N) {
					done.Store(true)
				}
				fmt.Fprintf(nc, "R hot %s\n", f[2])
				if line, err := r.ReadString('\n'); err != nil || line != "R hot ok\n" {
					errc <- fmt.Errorf("release: %q %v", line, err)
					return
				}
			}
			errc <- nil
		}()
	}
	for range conns {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApply measures the node's work per request without sockets:
// a batch of 64 acquires of free keys and then their 64 releases, parsed
// and applied as the reader does, the answers queued on the connection
// and dropped. One op is one acquire and one release.
func BenchmarkApply(b *testing.B) {
	const depth = 64
	n, err := New(Config{Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	n.timer = time.NewTimer(time.Hour)
	defer n.timer.Stop()
	here, there := net.Pipe()
	defer here.Close()
	defer there.Close()
	c := newConn(n, 1, here)
	n.conns[c.id] = c
	n.core.ConnOpened(n.now(), core.ConnID(c.id), c.remote)
	acquires := make([][]byte, depth)
	for i := range acquires {
		acquires[i] = fmt.Appendf(nil, "A bench-%d 30 0\n", i)
	}
	batch := make([]item, 0, depth)
	var releases [][]byte
	take := func() []byte {
		w := &c.out
		w.mu.Lock()
		defer w.mu.Unlock()
		out := w.out
		w.account(-len(out))
		w.out = w.spare[:0]
		w.spare = out[:0]
		return out
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%depth != 0 {
			continue
		}
		batch = batch[:0]
		for _, l := range acquires {
			req, err := proto.Parse(l)
			batch = append(batch, item{req, err})
		}
		n.apply(c, batch, nil)
		// What the client does in between is not the node's work.
		b.StopTimer()
		releases = releases[:0]
		for out := take(); len(out) > 0; {
			end := bytes.IndexByte(out, '\n') + 1
			a, err := proto.ParseAnswer(out[:end])
			if err != nil || a.Kind != proto.OpAcquire {
				b.Fatalf("acquire: %q %v", out[:end], err)
			}
			releases = append(releases, fmt.Appendf(nil, "R %s %s\n", a.Key, a.Fields[0]))
			out = out[end:]
		}
		b.StartTimer()
		batch = batch[:0]
		for _, l := range releases {
			req, err := proto.Parse(l)
			batch = append(batch, item{req, err})
		}
		n.apply(c, batch, nil)
		if out := take(); bytes.Count(out, []byte(" ok\n")) != depth {
			b.Fatalf("releases: %q", out)
		}
	}
}
