package client

import (
	"bufio"
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer is a scripted lockd node: each request line either goes to
// auto (when it returns true) or is queued for the test to answer by hand
// through next.
type fakeServer struct {
	t       testing.TB
	ln      net.Listener
	addr    string
	auto    func(sc *serverConn, r fakeReq) bool
	reqs    chan fakeReq
	done    chan struct{}
	wg      sync.WaitGroup
	accepts atomic.Int32

	// The keep-alives (S requests) the client sends are answered at once
	// and not counted, as a live node does, unless manualStatus hands
	// them to auto and next like any request, or mute leaves every line
	// unanswered: a node that accepts and never answers.
	manualStatus atomic.Bool
	mute         atomic.Bool
	keepalives   atomic.Int32

	mu     sync.Mutex
	conns  []*serverConn
	closed bool     // a connection accepted after close is closed at once
	lines  []string // every request line but the keep-alives, in arrival order
}

type fakeReq struct {
	sc    *serverConn
	line  string
	words []string
}

type serverConn struct {
	id   int
	nc   net.Conn
	wmu  sync.Mutex
	reqs atomic.Int32 // request lines read
}

func (sc *serverConn) send(lines ...string) {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	sc.nc.Write([]byte(strings.Join(lines, "\n") + "\n"))
}

func (sc *serverConn) drop() { sc.nc.Close() }

func newFakeServer(t testing.TB, auto func(sc *serverConn, r fakeReq) bool) *fakeServer {
	t.Helper()
	return newFakeServerAt(t, "127.0.0.1:0", auto)
}

// newFakeServerAt is newFakeServer on addr: a node that comes back where
// another stopped listening.
func newFakeServerAt(t testing.TB, addr string, auto func(sc *serverConn, r fakeReq) bool) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return newFakeServerOn(t, ln, auto)
}

// newFakeServerOn is a fake server on ln.
func newFakeServerOn(t testing.TB, ln net.Listener, auto func(sc *serverConn, r fakeReq) bool) *fakeServer {
	f := &fakeServer{t: t, ln: ln, addr: ln.Addr().String(), auto: auto, reqs: make(chan fakeReq, 4096), done: make(chan struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeServer) accept() {
	defer f.wg.Done()
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			nc.Close()
			return
		}
		sc := &serverConn{id: len(f.conns), nc: nc}
		f.conns = append(f.conns, sc)
		f.mu.Unlock()
		f.accepts.Add(1)
		f.wg.Add(1)
		go f.serve(sc)
	}
}

func (f *fakeServer) serve(sc *serverConn) {
	defer f.wg.Done()
	defer sc.nc.Close()
	s := bufio.NewScanner(sc.nc)
	for s.Scan() {
		r := fakeReq{sc: sc, line: s.Text(), words: strings.Fields(s.Text())}
		if f.mute.Load() {
			continue
		}
		if len(r.words) == 2 && r.words[0] == "S" && !f.manualStatus.Load() {
			f.keepalives.Add(1)
			sc.send("S " + r.words[1] + " self=" + f.addr + " role=active active=" + f.addr)
			continue
		}
		sc.reqs.Add(1)
		f.mu.Lock()
		f.lines = append(f.lines, r.line)
		f.mu.Unlock()
		if f.auto != nil && f.auto(sc, r) {
			continue
		}
		select {
		case f.reqs <- r:
		case <-f.done:
			return
		}
	}
}

// next returns the next request left to the test.
func (f *fakeServer) next() fakeReq {
	f.t.Helper()
	select {
	case r := <-f.reqs:
		return r
	case <-time.After(5 * time.Second):
		f.t.Fatalf("fake server %s: no request came within 5s", f.addr)
		return fakeReq{}
	}
}

// stopListening refuses new connections and keeps the open ones.
func (f *fakeServer) stopListening() { f.ln.Close() }

func (f *fakeServer) close() {
	f.ln.Close()
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	f.mu.Lock()
	f.closed = true
	for _, sc := range f.conns {
		sc.nc.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeServer) connList() []*serverConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*serverConn(nil), f.conns...)
}

// requests is the number of request lines the server read on all its
// connections.
func (f *fakeServer) requests() int {
	n := 0
	for _, sc := range f.connList() {
		n += int(sc.reqs.Load())
	}
	return n
}

// grantAll answers like a node that is free of contention: every acquire
// is granted with the next token, every release and renewal is ok.
func grantAll() func(sc *serverConn, r fakeReq) bool {
	var token atomic.Uint64
	return func(sc *serverConn, r fakeReq) bool {
		if len(r.words) < 2 {
			return false
		}
		switch r.words[0] {
		case "A":
			sc.send("A " + r.words[1] + " " + itoa(token.Add(1)))
		case "R", "N":
			sc.send(r.words[0] + " " + r.words[1] + " ok")
		case "Q":
			sc.send("Q " + r.words[1] + " - - 0")
		default:
			return false
		}
		return true
	}
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// checkLeaks fails the test if goroutines started during it are still
// running once its cleanups (registered after this) have run.
func checkLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		if !poll(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Errorf("goroutines leaked: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:n])
		}
	})
}

// poll reports whether cond became true within d.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	return true
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(5*time.Second, cond) {
		t.Fatalf("waited 5s for %s", what)
	}
}

func newTestClient(t *testing.T, addrs []string, opts Options, h hooks) *Client {
	t.Helper()
	if opts.Redial == 0 {
		opts.Redial = 20 * time.Millisecond
	}
	c, err := newClient(addrs, opts, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// liveConns counts the client's connections that are up, to addr or to
// any address when addr is "".
func (c *Client) liveConns(addr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, cn := range c.conns {
		if cn.state == stateUp && (addr == "" || cn.addr == addr) {
			n++
		}
	}
	return n
}

func (c *Client) connCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

func (c *Client) pendingCount() int {
	c.mu.Lock()
	conns := c.conns
	c.mu.Unlock()
	n := 0
	for _, cn := range conns {
		cn.mu.Lock()
		for _, q := range cn.pending {
			n += len(q.calls) - q.head
		}
		cn.mu.Unlock()
	}
	return n
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (k *fakeClock) Now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.now
}

func (k *fakeClock) advance(d time.Duration) {
	k.mu.Lock()
	k.now = k.now.Add(d)
	k.mu.Unlock()
}

// async runs f in a goroutine and returns a channel of its result.
func async[T any](f func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return within 5s")
		var zero T
		return zero
	}
}

type lockResult struct {
	lock Lock
	err  error
}

func acquireAsync(c *Client, ctx context.Context, key string, lease, wait time.Duration) <-chan lockResult {
	return async(func() lockResult {
		l, err := c.Acquire(ctx, key, lease, wait)
		return lockResult{l, err}
	})
}

func waitGroup(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	await(t, done)
}
