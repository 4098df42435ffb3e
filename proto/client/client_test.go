package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

var bg = context.Background()

func TestNewRefusesMissingAddress(t *testing.T) {
	for _, addrs := range [][]string{nil, {}, {" "}, {"127.0.0.1:1", ""}, {"localhost"}} {
		c, err := New(addrs, Options{})
		if err == nil {
			c.Close()
			t.Fatalf("New(%q) succeeded", addrs)
		}
		if !strings.Contains(err.Error(), "HOST:PORT") {
			t.Errorf("New(%q): error %q does not say what to pass", addrs, err)
		}
	}
}

func TestNewReturnsAtOnceAndFirstRequestWaitsForDial(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	gate := make(chan struct{})
	dialing := make(chan struct{}, 8)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{dial: func(ctx context.Context, addr string) (net.Conn, error) {
		dialing <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}})
	await(t, dialing)
	await(t, dialing)
	res := acquireAsync(c, bg, "k", time.Second, 0)
	waitFor(t, "the acquire to wait for a connection", func() bool { return c.waits.Load() > 0 })
	select {
	case r := <-res:
		t.Fatalf("acquire returned before any dial finished: %+v", r)
	default:
	}
	close(gate)
	r := await(t, res)
	if r.err != nil || r.lock.Token == 0 {
		t.Fatalf("acquire after the dial: %+v", r)
	}
}

func TestOneAddressGetsTwoConnections(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	waitFor(t, "2 live connections", func() bool { return c.liveConns(f.addr) == 2 && f.accepts.Load() == 2 })
	if n := c.connCount(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

func TestConnectionsPerAddress(t *testing.T) {
	checkLeaks(t)
	f1 := newFakeServer(t, nil)
	f2 := newFakeServer(t, nil)
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{}, hooks{})
	waitFor(t, "1 connection to each node", func() bool { return c.liveConns(f1.addr) == 1 && c.liveConns(f2.addr) == 1 })
	if n := c.connCount(); n != 2 {
		t.Fatalf("%d connections to 2 addresses, want 2", n)
	}
	c3 := newTestClient(t, []string{f1.addr}, Options{ConnsPerAddr: 3}, hooks{})
	waitFor(t, "3 connections", func() bool { return c3.liveConns(f1.addr) == 3 })
}

func TestRoundRobinOverConnections(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	waitFor(t, "2 live connections", func() bool { return c.liveConns("") == 2 && f.accepts.Load() == 2 })
	for i := range 10 {
		if _, err := c.Queue(bg, fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	conns := f.connList()
	if len(conns) != 2 || conns[0].reqs.Load() != 5 || conns[1].reqs.Load() != 5 {
		var counts []int32
		for _, sc := range conns {
			counts = append(counts, sc.reqs.Load())
		}
		t.Fatalf("requests per connection %v, want [5 5]", counts)
	}
}

func TestRequestsArePipelinedAndMatchedOutOfOrder(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1}, hooks{})
	r1 := acquireAsync(c, bg, "k1", 30*time.Second, 0)
	r2 := acquireAsync(c, bg, "k2", 30*time.Second, 0)
	// Both requests reach the server before it answers either.
	a, b := f.next(), f.next()
	if a.sc != b.sc {
		t.Fatal("requests went over 2 connections, want 1")
	}
	byKey := map[string]*serverConn{a.words[1]: a.sc, b.words[1]: b.sc}
	if byKey["k1"] == nil || byKey["k2"] == nil {
		t.Fatalf("requests %q, %q", a.line, b.line)
	}
	a.sc.send("A k2 22", "A k1 11")
	if r := await(t, r1); r.err != nil || r.lock.Token != 11 || r.lock.Key != "k1" {
		t.Errorf("k1: %+v", r)
	}
	if r := await(t, r2); r.err != nil || r.lock.Token != 22 || r.lock.Key != "k2" {
		t.Errorf("k2: %+v", r)
	}
}

func TestSameOpAndKeyMatchedInSendOrder(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1}, hooks{})
	first := acquireAsync(c, bg, "k", 30*time.Second, 0)
	f.next()
	second := acquireAsync(c, bg, "k", 30*time.Second, 0)
	r := f.next()
	r.sc.send("A k 1", "A k 2")
	if r := await(t, first); r.err != nil || r.lock.Token != 1 {
		t.Errorf("first acquire: %+v, want token 1", r)
	}
	if r := await(t, second); r.err != nil || r.lock.Token != 2 {
		t.Errorf("second acquire: %+v, want token 2", r)
	}
}

func TestErrorAnswerMatchesItsOp(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1}, hooks{})
	q := async(func() error { _, err := c.Queue(bg, "k"); return err })
	f.next()
	a := acquireAsync(c, bg, "k", 30*time.Second, 0)
	r := f.next()
	r.sc.send("E k A: lease longer than --max-lease 60s", "Q k - - 0")
	var se *ServerError
	got := await(t, a)
	if !errors.As(got.err, &se) || se.Op != proto.OpAcquire || se.Key != "k" || se.Msg != "lease longer than --max-lease 60s" {
		t.Fatalf("acquire: %+v, want a *ServerError for A", got)
	}
	if !strings.Contains(se.Error(), "acquire k") {
		t.Errorf("ServerError %q does not name the call", se)
	}
	if err := await(t, q); err != nil {
		t.Fatalf("queue: %v", err)
	}
}

func TestMovedAnswersOldestRequestOnKey(t *testing.T) {
	checkLeaks(t)
	f2 := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		sc.send("Q " + r.words[1] + " 7 1.5 0")
		return true
	})
	f1 := newFakeServer(t, nil)
	c := newTestClient(t, []string{f1.addr}, Options{ConnsPerAddr: 1}, hooks{})
	q := async(func() lockResult { qq, err := c.Queue(bg, "k"); return lockResult{Lock{Token: qq.Token}, err} })
	f1.next()
	a := acquireAsync(c, bg, "k", 30*time.Second, 0)
	r := f1.next()
	r.sc.send("M k "+f2.addr, "A k 9")
	if got := await(t, q); got.err != nil || got.lock.Token != 7 {
		t.Errorf("queue: %+v, want it moved to the other node and answered there", got)
	}
	if got := await(t, a); got.err != nil || got.lock.Token != 9 {
		t.Errorf("acquire: %+v, want token 9", got)
	}
}

func TestMovedAcquireGoesToActiveAndStaysThere(t *testing.T) {
	checkLeaks(t)
	f2 := newFakeServer(t, grantAll())
	f1 := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		sc.send("M " + r.words[1] + " " + f2.addr)
		return true
	})
	c := newTestClient(t, []string{f1.addr}, Options{}, hooks{})
	if c.Active() != "" {
		t.Fatalf("Active() = %q before any answer", c.Active())
	}
	for i := range 6 {
		l, err := c.Acquire(bg, fmt.Sprint("k", i), time.Second, 0)
		if err != nil || l.Token == 0 {
			t.Fatalf("acquire %d: %v %+v", i, err, l)
		}
	}
	if got := c.Active(); got != f2.addr {
		t.Errorf("Active() = %q, want %q", got, f2.addr)
	}
	if n := f1.requests(); n != 1 {
		t.Errorf("the standby got %d requests, want only the first", n)
	}
	if n := f2.requests(); n != 6 {
		t.Errorf("the active got %d requests, want 6", n)
	}
}

func TestPrefersActiveAmongConfiguredNodes(t *testing.T) {
	checkLeaks(t)
	f2 := newFakeServer(t, grantAll())
	f1 := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		sc.send("M " + r.words[1] + " " + f2.addr)
		return true
	})
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{}, hooks{})
	waitFor(t, "both nodes connected", func() bool { return c.liveConns("") == 2 })
	for i := range 10 {
		if _, err := c.Acquire(bg, fmt.Sprint("k", i), time.Second, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := f1.requests(); n > 1 {
		t.Errorf("the standby got %d requests, want at most the first", n)
	}
	if c.connCount() != 2 {
		t.Errorf("%d connections, want the 2 configured ones reused", c.connCount())
	}
}

// nodesThatNeverAgree starts two nodes that answer every request by
// naming the other as the active.
func nodesThatNeverAgree(t *testing.T) (f1, f2 *fakeServer) {
	bounce := func(to **fakeServer) func(sc *serverConn, r fakeReq) bool {
		return func(sc *serverConn, r fakeReq) bool {
			sc.send("M " + r.words[1] + " " + (*to).addr)
			return true
		}
	}
	f1 = newFakeServer(t, bounce(&f2))
	f2 = newFakeServer(t, bounce(&f1))
	return f1, f2
}

func TestRedirectLoopIsBounded(t *testing.T) {
	checkLeaks(t)
	f1, f2 := nodesThatNeverAgree(t)
	ft := 100 * time.Millisecond
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{FailureTimeout: ft}, hooks{})
	start := time.Now()
	_, err := c.Acquire(bg, "k", time.Second, 0)
	took := time.Since(start)
	if !errors.Is(err, ErrDisagree) || !strings.Contains(err.Error(), "times in a row over") {
		t.Fatalf("err = %v, want ErrDisagree naming the redirects", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Errorf("err = %v: nodes that answer are not unavailable", err)
	}
	// The redirects are followed for three failure timeouts, paced:
	// at least maxMoves of them, and not a busy loop.
	if took < 3*ft {
		t.Errorf("gave up after %s, want after 3 failure timeouts (%s)", took, 3*ft)
	}
	if n := f1.requests() + f2.requests(); n <= maxMoves || n > 100 {
		t.Errorf("%d requests sent, want more than %d and a paced few", n, maxMoves)
	}
}

// A wait that runs out while the nodes send the request to one another
// says so: no node said the key was held.
func TestWaitEndingInARedirectLoopSaysNodesDisagree(t *testing.T) {
	checkLeaks(t)
	f1, f2 := nodesThatNeverAgree(t)
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{FailureTimeout: time.Second}, hooks{})
	_, err := c.Acquire(bg, "k", time.Second, 700*time.Millisecond)
	if !errors.Is(err, ErrDisagree) || errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "the wait ran out while the request was redirected") {
		t.Fatalf("err = %v, want ErrDisagree saying the wait ran out among redirects", err)
	}
}

// Nodes that disagree for a while, as nodes restarted together do
// until they settle on an active node, do not fail a call: the client
// follows their redirects until the one named serves it.
func TestRedirectsWhileNodesSettleAreFollowed(t *testing.T) {
	checkLeaks(t)
	var f1, f2 *fakeServer
	ft := 500 * time.Millisecond
	// Longer than 10 redirects take, 700 ms shorter than three failure
	// timeouts: room for a loaded machine.
	settled := time.Now().Add(800 * time.Millisecond)
	bounce := func(to **fakeServer) func(sc *serverConn, r fakeReq) bool {
		return func(sc *serverConn, r fakeReq) bool {
			switch {
			case time.Now().Before(settled):
				sc.send("M " + r.words[1] + " " + (*to).addr)
			case *to == f1:
				sc.send("M " + r.words[1] + " " + f1.addr) // f2 follows f1 now
			default:
				sc.send("A " + r.words[1] + " 7") // and f1 serves
			}
			return true
		}
	}
	f1 = newFakeServer(t, bounce(&f2))
	f2 = newFakeServer(t, bounce(&f1))
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{FailureTimeout: ft}, hooks{})
	g, err := c.Acquire(bg, "k", time.Second, 0)
	if err != nil {
		t.Fatalf("acquire while the nodes settle: %v", err)
	}
	if g.Token != 7 {
		t.Errorf("grant %+v, want token 7 from the node that settled as active", g)
	}
}

func TestDropMidAcquireMovesToOtherConnectionWithRemainingWait(t *testing.T) {
	checkLeaks(t)
	clock := newFakeClock()
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{now: clock.Now})
	waitFor(t, "2 live connections", func() bool { return c.liveConns("") == 2 && f.accepts.Load() == 2 })
	res := acquireAsync(c, bg, "k", 30*time.Second, 10*time.Second)
	r := f.next()
	line, id, _ := strings.Cut(noRef(r.line), " id=")
	if line != "A k 30 10" || id == "" {
		t.Fatalf("first request %q", r.line)
	}
	clock.advance(3*time.Second + 250*time.Millisecond)
	r.sc.drop()
	r2 := f.next()
	if r2.sc == r.sc {
		t.Fatal("request re-sent on the dropped connection")
	}
	// The same acquire, with what is left of its wait and the same id,
	// so that a node that granted or queued it answers that again.
	if noRef(r2.line) != "A k 30 6.75 id="+id {
		t.Fatalf("moved request %q, want the remaining wait 6.75s and id %s", r2.line, id)
	}
	r2.sc.send("A k 5")
	if got := await(t, res); got.err != nil || !sameLock(got.lock, Lock{Key: "k", Token: 5, Lease: 30 * time.Second, Limit: 1, ID: id}) {
		t.Fatalf("acquire: %+v", got)
	}
}

func TestDropAfterWaitElapsedTimesOut(t *testing.T) {
	checkLeaks(t)
	clock := newFakeClock()
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{now: clock.Now})
	res := acquireAsync(c, bg, "k", 30*time.Second, 2*time.Second)
	r := f.next()
	clock.advance(2 * time.Second)
	r.sc.drop()
	got := await(t, res)
	if !errors.Is(got.err, ErrTimeout) {
		t.Fatalf("acquire: %+v, want ErrTimeout", got)
	}
	if !strings.Contains(got.err.Error(), "acquire k") || !strings.Contains(got.err.Error(), "retry") {
		t.Errorf("error %q does not say what to do", got.err)
	}
}

func TestTimeoutAnswer(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool { sc.send("T " + r.words[1]); return true })
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	_, err := c.Acquire(bg, "k", time.Second, time.Second)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
}

func TestUnavailableWhenNothingListens(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	c := newTestClient(t, []string{dead}, Options{}, hooks{})
	_, err = c.Acquire(bg, "k", time.Second, 0)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Errorf("err = %v does not wrap the dial error", err)
	}
	for _, want := range []string{dead, "lockd is running", "given its address"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestUnavailableAfterEveryConnectionDropped(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	waitFor(t, "2 live connections", func() bool { return c.liveConns("") == 2 && f.accepts.Load() == 2 })
	f.stopListening()
	// A short wait: an acquire waits through an outage until its wait
	// runs out (TestBoundedAcquireOutageEndsWithItsWait).
	res := acquireAsync(c, bg, "k", time.Second, 300*time.Millisecond)
	r := f.next()
	r.sc.drop()
	r2 := f.next()
	if r2.sc == r.sc {
		t.Fatal("request re-sent on the dropped connection")
	}
	r2.sc.drop()
	got := await(t, res)
	if !errors.Is(got.err, ErrUnavailable) || !strings.Contains(got.err.Error(), f.addr) {
		t.Fatalf("acquire: %+v, want ErrUnavailable naming %s", got, f.addr)
	}
}

func TestDroppedConnectionIsRedialled(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1}, hooks{})
	waitFor(t, "a live connection", func() bool { return c.liveConns("") == 1 && f.accepts.Load() == 1 })
	f.connList()[0].drop()
	waitFor(t, "the connection to be redialled", func() bool { return f.accepts.Load() == 2 && c.liveConns("") == 1 })
	if _, err := c.Queue(bg, "k"); err != nil {
		t.Fatal(err)
	}
	if n := f.connList()[1].reqs.Load(); n != 1 {
		t.Errorf("the new connection served %d requests, want 1", n)
	}
}

func TestWritesAreCoalesced(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	gate := make(chan struct{})
	var writes atomic.Int32
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1}, hooks{dial: func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: nc, gate: gate, writes: &writes}, nil
	}})
	var openGate sync.Once
	t.Cleanup(func() { openGate.Do(func() { close(gate) }) })
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := c.Queue(bg, fmt.Sprint("k", i))
			errs <- err
		})
	}
	// The first write is held; everything else queues behind it.
	waitFor(t, "all requests queued", func() bool { return c.pendingCount() == n && writes.Load() == 1 })
	openGate.Do(func() { close(gate) })
	waitGroup(t, &wg)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if w := writes.Load(); w > 3 {
		t.Errorf("%d writes for %d requests queued together, want them coalesced", w, n)
	}
}

// gatedConn holds its first write of requests until gate is closed and
// counts those writes. Keep-alives (the first one is sent before the
// connection counts as up) pass.
type gatedConn struct {
	net.Conn
	gate   chan struct{}
	writes *atomic.Int32
}

func (g *gatedConn) Write(b []byte) (int, error) {
	if string(b) == "S -\n" {
		return g.Conn.Write(b)
	}
	if g.writes.Add(1) == 1 {
		<-g.gate
	}
	return g.Conn.Write(b)
}

func TestReleaseResentWhenUnanswered(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{ReleaseEvery: 20 * time.Millisecond}, hooks{})
	res := async(func() error { return c.Release(bg, "k", 7) })
	if r := f.next(); r.line != "R k 7" {
		t.Fatalf("request %q", r.line)
	}
	// The first one is lost; the re-sent one is answered.
	r := f.next()
	if r.line != "R k 7" {
		t.Fatalf("re-sent request %q", r.line)
	}
	r.sc.send("R k ok")
	if err := await(t, res); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseGivesUpAfterReleaseFor(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool { return true })
	c := newTestClient(t, []string{f.addr}, Options{ReleaseEvery: 10 * time.Millisecond, ReleaseFor: 150 * time.Millisecond}, hooks{})
	start := time.Now()
	err := c.Release(bg, "k", 7)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no node answered") || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("err = %v, want ErrUnavailable after re-sending", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("gave up after %s, before ReleaseFor", d)
	}
	if n := f.requests(); n < 3 {
		t.Errorf("release sent %d times, want it re-sent", n)
	}
}

func TestReleaseWhileConnectionsAreDown(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	var refuse atomic.Bool
	var refused atomic.Int32
	// No background redial during the test: only the release dials.
	c := newTestClient(t, []string{f.addr}, Options{Redial: time.Hour, ReleaseEvery: 10 * time.Millisecond}, hooks{dial: func(ctx context.Context, addr string) (net.Conn, error) {
		if refuse.Load() {
			refused.Add(1)
			return nil, errors.New("refused by the test")
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}})
	waitFor(t, "2 live connections", func() bool { return c.liveConns("") == 2 && f.accepts.Load() == 2 })
	refuse.Store(true)
	for _, sc := range f.connList() {
		sc.drop()
	}
	waitFor(t, "every connection down", func() bool { return c.liveConns("") == 0 })
	res := async(func() error { return c.Release(bg, "k", 7) })
	waitFor(t, "the release to redial more than once", func() bool { return refused.Load() > 4 })
	refuse.Store(false)
	if err := await(t, res); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseLateDuplicateAnswersAreConsumed(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1, ReleaseEvery: 50 * time.Millisecond}, hooks{})
	first := async(func() error { return c.Release(bg, "k", 7) })
	f.next()
	r := f.next() // the re-send
	r.sc.send("R k ok")
	if err := await(t, first); err != nil {
		t.Fatal(err)
	}
	second := async(func() error { return c.Release(bg, "k", 8) })
	// Under load the first release may have been re-sent more than once.
	unanswered := 1
	for {
		next := f.next()
		if next.line == "R k 8" {
			break
		}
		if next.line != "R k 7" {
			t.Fatalf("request %q", next.line)
		}
		unanswered++
	}
	// The answers to the re-sends of the first release come late; they
	// must not be taken for the answer to the second.
	for range unanswered {
		r.sc.send("R k ok")
	}
	r.sc.send("R k notheld")
	if err := await(t, second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
}

func TestReleaseFollowsMoved(t *testing.T) {
	checkLeaks(t)
	f2 := newFakeServer(t, func(sc *serverConn, r fakeReq) bool { sc.send("R " + r.words[1] + " notheld"); return true })
	f1 := newFakeServer(t, func(sc *serverConn, r fakeReq) bool { sc.send("M " + r.words[1] + " " + f2.addr); return true })
	c := newTestClient(t, []string{f1.addr}, Options{}, hooks{})
	err := c.Release(bg, "k", 7)
	if !errors.Is(err, ErrNotHeld) {
		t.Fatalf("err = %v, want ErrNotHeld from the active", err)
	}
	if !strings.Contains(err.Error(), "acquire the key again") {
		t.Errorf("error %q does not say what to do", err)
	}
	if c.Active() != f2.addr {
		t.Errorf("Active() = %q, want %q", c.Active(), f2.addr)
	}
}

func TestCancelledAcquireReleasesLateGrant(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	ctx, cancel := context.WithCancel(bg)
	res := acquireAsync(c, ctx, "k", 30*time.Second, 0)
	r := f.next()
	cancel()
	if got := await(t, res); !errors.Is(got.err, context.Canceled) {
		t.Fatalf("acquire: %+v, want context.Canceled", got)
	}
	// The client withdraws the acquire; the grant crossed the X on the
	// wire, so the node answers X none, and the grant is released.
	x := f.next()
	_, id, _ := strings.Cut(noRef(r.line), " id=")
	if x.line != "X k "+id {
		t.Fatalf("request after the cancel %q, want X k %s", x.line, id)
	}
	r.sc.send("A k 42", "X k none")
	rel := f.next()
	if rel.line != "R k 42" {
		t.Fatalf("request after the late grant %q, want its release", rel.line)
	}
	rel.sc.send("R k ok")
	waitFor(t, "the release to be answered", func() bool { return c.pendingCount() == 0 })
}

func TestCancelledAcquireWithdrawsIt(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	ctx, cancel := context.WithCancel(bg)
	res := acquireAsync(c, ctx, "k", 30*time.Second, 0)
	r := f.next()
	_, rest, _ := strings.Cut(r.line, " id=")
	id, ref, _ := strings.Cut(rest, " ref=")
	cancel()
	if got := await(t, res); !errors.Is(got.err, context.Canceled) {
		t.Fatalf("acquire: %+v, want context.Canceled", got)
	}
	x := f.next()
	if x.line != "X k "+id {
		t.Fatalf("request after the cancel %q, want X k %s", x.line, id)
	}
	// The waiter leaves the queue: its acquire is answered T, then X ok;
	// nothing is released.
	x.sc.send("T k ref="+ref, "X k ok")
	waitFor(t, "both answers consumed", func() bool { return c.pendingCount() == 0 })
	select {
	case r := <-f.reqs:
		t.Fatalf("request %q after a withdrawn acquire", r.line)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestCloseStopsWaitingCalls(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	res := acquireAsync(c, bg, "k", 30*time.Second, 0)
	f.next()
	c.Close()
	if got := await(t, res); !errors.Is(got.err, ErrClosed) {
		t.Fatalf("acquire: %+v, want ErrClosed", got)
	}
	if _, err := c.Acquire(bg, "k", time.Second, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRenew(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.words[2] == "1" {
			sc.send("N " + r.words[1] + " ok")
		} else {
			sc.send("N " + r.words[1] + " notheld")
		}
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	if err := c.Renew(bg, "k", 1, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.Renew(bg, "k", 2, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("err = %v, want ErrNotHeld", err)
	}
	if err := c.Renew(bg, "k", 2, 0); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("renew with no lease: %v", err)
	}
}

func TestQueueAndKeys(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		switch r.line {
		case "Q deploy":
			sc.send("Q deploy 7360982537641984001 29.5 2 3.2,127.0.0.1:51234 0.4,127.0.0.1:51240")
		case "K dep*":
			sc.send("K dep* 1200 deploy deps")
		case "K none":
			sc.send("K none 0")
		}
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	q, err := c.Queue(bg, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Held || q.Token != 7360982537641984001 || q.LeaseLeft != 29500*time.Millisecond || len(q.Waiters) != 2 || q.Waiters[1].Addr != "127.0.0.1:51240" {
		t.Errorf("queue %+v", q)
	}
	keys, total, err := c.Keys(bg, "dep*")
	if err != nil || total != 1200 || strings.Join(keys, ",") != "deploy,deps" {
		t.Errorf("keys %q total %d err %v", keys, total, err)
	}
	keys, total, err = c.Keys(bg, "none")
	if err != nil || total != 0 || len(keys) != 0 {
		t.Errorf("keys %q total %d err %v", keys, total, err)
	}
	if _, err := c.Queue(bg, "has space"); err == nil || !strings.Contains(err.Error(), "space") {
		t.Errorf("bad key: %v", err)
	}
}

func TestHandoffGoesToActive(t *testing.T) {
	checkLeaks(t)
	const successor = "127.0.0.1:7072"
	f2 := newFakeServer(t, nil)
	f1 := newFakeServer(t, func(sc *serverConn, r fakeReq) bool { sc.send("M - " + f2.addr); return true })
	c := newTestClient(t, []string{f1.addr}, Options{}, hooks{})
	res := async(func() lockResult {
		to, err := c.Handoff(bg, successor)
		return lockResult{Lock{Key: to}, err}
	})
	r := f2.next()
	if r.line != "H - "+successor {
		t.Fatalf("request %q", r.line)
	}
	r.sc.send("H - ok " + successor)
	if got := await(t, res); got.err != nil || got.lock.Key != successor {
		t.Fatalf("handoff: %+v", got)
	}
	if c.Active() != successor {
		t.Errorf("Active() = %q, want the new active %q", c.Active(), successor)
	}
}

func TestHandoffIsNotResentAfterDrop(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	res := async(func() error { _, err := c.Handoff(bg, ""); return err })
	r := f.next()
	if r.line != "H -" {
		t.Fatalf("request %q", r.line)
	}
	r.sc.drop()
	err := await(t, res)
	if err == nil || !strings.Contains(err.Error(), "may or may not") {
		t.Fatalf("err = %v, want one saying the handoff may have happened", err)
	}
	if n := f.requests(); n != 1 {
		t.Errorf("handoff sent %d times, want once", n)
	}
}

func TestStatus(t *testing.T) {
	checkLeaks(t)
	want := proto.Status{Self: "127.0.0.1:7070", Role: "active", Active: "127.0.0.1:7070", Token: 99, Seq: 5, Uptime: 1500 * time.Millisecond, Keys: 2, Waiters: 1,
		Peers: []proto.PeerStatus{{Addr: "127.0.0.1:7070", Role: "active", Reachable: true, Seq: 5, Token: 99}}}
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.line != "S -" {
			sc.send("E - ?: unexpected")
			return true
		}
		sc.send(strings.TrimSuffix(string(proto.AppendStatus(nil, "-", want)), "\n"))
		return true
	})
	f.manualStatus.Store(true)
	st, err := Status(bg, f.addr)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Errorf("status\n%+v\nwant\n%+v", st, want)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	if _, err := Status(bg, dead); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), dead) {
		t.Errorf("status of a dead address: %v", err)
	}
}

func TestStatusHonoursContext(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool { return true })
	f.manualStatus.Store(true)
	ctx, cancel := context.WithCancel(bg)
	res := async(func() error { _, err := Status(ctx, f.addr); return err })
	waitFor(t, "the status request", func() bool { return f.requests() == 1 })
	cancel()
	if err := await(t, res); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestManyGoroutinesShareOneClient(t *testing.T) {
	checkLeaks(t)
	// The server answers each batch it reads in reverse order, so answers
	// often come back out of order.
	f := newFakeServer(t, nil)
	var token atomic.Uint64
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			var batch []fakeReq
			select {
			case r := <-f.reqs:
				batch = append(batch, r)
			case <-done:
				return
			}
		more:
			for {
				select {
				case r := <-f.reqs:
					batch = append(batch, r)
				default:
					break more
				}
			}
			for i := len(batch) - 1; i >= 0; i-- {
				r := batch[i]
				switch r.words[0] {
				case "A":
					// The token tells which key it was granted for.
					k := uint64(r.words[1][1] - '0')
					r.sc.send("A " + r.words[1] + " " + itoa((k+1)*1_000_000+token.Add(1)))
				case "R":
					r.sc.send("R " + r.words[1] + " ok")
				}
			}
		}
	}()
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	var wg sync.WaitGroup
	var failures atomic.Int32
	for g := range 32 {
		wg.Go(func() {
			for i := range 30 {
				k := (g + i) % 8
				key := fmt.Sprintf("k%d", k)
				l, err := c.Acquire(bg, key, time.Second, 0)
				if err != nil || l.Token/1_000_000 != uint64(k+1) {
					t.Errorf("acquire %s: token %d, err %v", key, l.Token, err)
					failures.Add(1)
					continue
				}
				if err := c.Release(bg, key, l.Token); err != nil {
					t.Errorf("release %s: %v", key, err)
				}
			}
		})
	}
	waitGroup(t, &wg)
}

// A server holds a T back behind an older acquire of the same key on the
// same connection (it answers one (op, key) in send order). An acquire
// with a finite wait must still return near its wait when another
// goroutine of the client waits forever on that key on the same
// connection.
func TestAcquireWaitBoundedBehindSameKeyOnSameConn(t *testing.T) {
	// Requests are queued and never answered: both acquires wait.
	srv := newFakeServer(t, nil)
	c, err := New([]string{srv.addr}, Options{ConnsPerAddr: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Acquire(context.Background(), "hot", time.Second, 0)
	start := time.Now()
	_, err = c.Acquire(context.Background(), "hot", time.Second, 100*time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond+acquireGrace+2*time.Second {
		t.Fatalf("returned after %s", took)
	}
}

// An acquire avoids a connection where an older acquire of the same key
// is outstanding, so the server's answer to it is not held back behind
// that older acquire's wait.
func TestAcquireAvoidsConnectionBusyWithSameKey(t *testing.T) {
	srv := newFakeServer(t, nil)
	c, err := New([]string{srv.addr}, Options{}) // one address: two connections
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := func() *serverConn {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Queue(context.Background(), "other")
		}()
		q := srv.next()
		q.sc.send("Q other - - 0")
		<-done
		return q.sc
	}
	// Until both connections are up, everything goes to the first.
	for deadline := time.Now().Add(5 * time.Second); queue() == queue(); {
		if time.Now().After(deadline) {
			t.Fatal("the second connection never came up")
		}
	}
	for i := 0; i < 3; i++ {
		go c.Acquire(context.Background(), "hot", time.Second, 0)
		first := srv.next()
		// One request in between, so that plain round-robin over the two
		// connections would put the next acquire where the first waits.
		queue()
		go c.Acquire(context.Background(), "hot", time.Second, 5*time.Second)
		second := srv.next()
		if first.sc == second.sc {
			t.Fatalf("round %d: both acquires of the same key went to connection %d", i, first.sc.id)
		}
		first.sc.send("A hot 1")
		second.sc.send("T hot")
	}
}

// noRef is an acquire line without its ref=R, which numbers the acquires
// of each connection.
func noRef(line string) string {
	if i := strings.Index(line, " ref="); i >= 0 {
		return line[:i]
	}
	return line
}
