package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// grantServer is the cheapest node possible: it grants every acquire and
// accepts every release, answering in batches, so that a benchmark through
// it measures the client.
type grantServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	token atomic.Uint64
	mu    sync.Mutex
	conns []net.Conn
}

func newGrantServer(b *testing.B) *grantServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &grantServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, nc)
			s.mu.Unlock()
			s.wg.Add(1)
			go s.serve(nc)
		}
	}()
	b.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, nc := range s.conns {
			nc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *grantServer) serve(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 64<<10)
	w := bufio.NewWriterSize(nc, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		// OP SP KEY [SP ...]
		if len(line) < 3 {
			return
		}
		end := bytes.IndexByte(line[2:], ' ')
		if end < 0 {
			end = len(line) - 3 // up to the LF
		}
		key := line[2 : 2+end]
		switch line[0] {
		case 'S':
			// The client's keep-alive, and its first request on a new
			// connection.
			w.WriteString("S ")
			w.Write(key)
			w.WriteString(" role=active\n")
		case 'A':
			w.WriteString("A ")
			w.Write(key)
			w.WriteByte(' ')
			w.Write(strconv.AppendUint(nil, s.token.Add(1), 10))
			w.WriteByte('\n')
		case 'R':
			w.WriteString("R ")
			w.Write(key)
			w.WriteString(" ok\n")
		}
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

// countingConn counts the write syscalls of the client.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// BenchmarkAcquireRelease runs Acquire then Release of a key of its own in
// many goroutines sharing one client (two connections to one node).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, par := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("goroutines=%dxGOMAXPROCS", par), func(b *testing.B) {
			s := newGrantServer(b)
			var writes atomic.Int64
			c, err := newClient([]string{s.ln.Addr().String()}, Options{}, hooks{dial: func(ctx context.Context, addr string) (net.Conn, error) {
				var d net.Dialer
				nc, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					return nil, err
				}
				return &countingConn{Conn: nc, writes: &writes}, nil
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var id atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("bench-%d", id.Add(1))
				for pb.Next() {
					l, err := c.Acquire(bg, key, 30*time.Second, 0)
					if err != nil {
						b.Error(err)
						return
					}
					if err := c.Release(bg, key, l.Token); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			// Two requests per op: how many share one write syscall.
			b.ReportMetric(float64(2*b.N)/float64(writes.Load()), "requests/write")
		})
	}
}

// BenchmarkAcquireReleaseSerial is one goroutine: the latency of a pair of
// round trips through the client, to compare with BenchmarkRawRoundTrips.
func BenchmarkAcquireReleaseSerial(b *testing.B) {
	s := newGrantServer(b)
	c, err := New([]string{s.ln.Addr().String()}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Acquire(bg, "bench", 30*time.Second, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Release(bg, "bench", l.Token); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawRoundTrips is the floor under BenchmarkAcquireReleaseSerial:
// the same two round trips written and read by hand on one connection,
// with no client at all.
func BenchmarkRawRoundTrips(b *testing.B) {
	s := newGrantServer(b)
	nc, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	for b.Loop() {
		if _, err := nc.Write([]byte("A bench 30 0\n")); err != nil {
			b.Fatal(err)
		}
		line, err := r.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		token := bytes.TrimSpace(line[len("A bench "):])
		if _, err := nc.Write(append(append([]byte("R bench "), token...), '\n')); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
}
