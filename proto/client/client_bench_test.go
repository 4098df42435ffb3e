package client

import (
	"bufio"
	"bytes"
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
		// OP SP KEY SP ...
		end := bytes.IndexByte(line[2:], ' ')
		if end < 0 {
			return
		}
		key := line[2 : 2+end]
		switch line[0] {
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

// BenchmarkAcquireRelease runs Acquire then Release of a key of its own in
// many goroutines sharing one client (two connections to one node).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, par := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("goroutines=%dxGOMAXPROCS", par), func(b *testing.B) {
			s := newGrantServer(b)
			c, err := New([]string{s.ln.Addr().String()}, Options{})
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
		})
	}
}
