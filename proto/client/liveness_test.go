package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// A node that stops answering (a frozen process, a vanished machine)
// closes nothing: the client notices by its keep-alives and moves the
// acquire waiting there to another node, within about FailureTimeout.
func TestSilentNodeIsDroppedAndAcquireMoves(t *testing.T) {
	checkLeaks(t)
	f1 := newFakeServer(t, grantAll())
	f2 := newFakeServer(t, grantAll())
	const ft = 200 * time.Millisecond
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{FailureTimeout: ft, Redial: time.Hour}, hooks{})
	waitFor(t, "both nodes connected", func() bool { return c.liveConns("") == 2 })
	c.setActive(f1.addr)
	f1.mute.Store(true)
	start := time.Now()
	l, err := c.Acquire(bg, "k", time.Second, 0)
	took := time.Since(start)
	if err != nil || l.Token == 0 {
		t.Fatalf("acquire: %v %+v", err, l)
	}
	if took > 4*ft {
		t.Errorf("the acquire moved after %s, want within about the failure timeout %s", took, ft)
	}
	if c.Active() != f2.addr {
		t.Errorf("Active() = %q, want %q", c.Active(), f2.addr)
	}
	if err := c.Release(bg, "k", l.Token); err != nil {
		t.Errorf("release: %v", err)
	}
}

// A listener that takes connections and never answers is not a node:
// no connection to it counts as up, and a call fails with ErrNoAnswer
// (and ErrUnavailable) after FailureTimeout instead of waiting forever,
// saying that a node speaking TLS to this client without TLS looks so.
func TestNodeThatNeverAnswersFailsFast(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	f.mute.Store(true)
	const ft = 150 * time.Millisecond
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: ft, Redial: time.Hour}, hooks{})
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"acquire", func() error { _, err := c.Acquire(bg, "k", time.Second, 0); return err }},
		{"release", func() error { return c.Release(bg, "k", 7) }},
		{"renew", func() error { return c.Renew(bg, "k", 7, time.Second) }},
	} {
		start := time.Now()
		err := call.do()
		if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: err = %v, want ErrNoAnswer and ErrUnavailable", call.name, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "speaks TLS to a client without TLS")) {
			t.Errorf("%s: error %q does not say the node did not answer, and that a TLS node looks so", call.name, err)
		}
		if took := time.Since(start); took > 5*ft {
			t.Errorf("%s: returned after %s, want about the failure timeout %s", call.name, took, ft)
		}
	}
	if f.accepts.Load() == 0 {
		t.Error("the client never connected")
	}
}

// A release sent to a node that went silent is re-sent to another one
// before ReleaseFor runs out.
func TestReleaseMovesOffSilentNode(t *testing.T) {
	checkLeaks(t)
	f1 := newFakeServer(t, grantAll())
	f2 := newFakeServer(t, grantAll())
	const ft = 200 * time.Millisecond
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{FailureTimeout: ft, Redial: time.Hour, ReleaseEvery: time.Hour}, hooks{})
	waitFor(t, "both nodes connected", func() bool { return c.liveConns("") == 2 })
	c.setActive(f1.addr)
	f1.mute.Store(true)
	start := time.Now()
	if err := c.Release(bg, "k", 7); err != nil {
		t.Fatalf("release: %v", err)
	}
	if took := time.Since(start); took > 4*ft {
		t.Errorf("the release moved after %s, want within about the failure timeout %s", took, ft)
	}
}

// A slow node that still answers its keep-alives is not mistaken for a
// dead one: an answer that takes several failure timeouts still arrives
// on the same connection.
func TestSlowAnswerIsNotMistakenForDeadNode(t *testing.T) {
	checkLeaks(t)
	const ft = 100 * time.Millisecond
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		go func() {
			time.Sleep(5 * ft)
			sc.send("A " + r.words[1] + " 9")
		}()
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: ft, ConnsPerAddr: 1}, hooks{})
	l, err := c.Acquire(bg, "k", time.Second, 0)
	if err != nil || l.Token != 9 {
		t.Fatalf("acquire: %v %+v", err, l)
	}
	if n := f.accepts.Load(); n != 1 {
		t.Errorf("%d connections, want the first one kept", n)
	}
	if f.keepalives.Load() < 2 {
		t.Errorf("%d keep-alives while the answer took %s, want some", f.keepalives.Load(), 5*ft)
	}
}

// A waiting acquire moved by a handoff (the node took
// it in, then redirected it) starts its count of redirects afresh, so
// it survives any number of handoffs; only redirects answered at once
// count toward the limit.
func TestWaitSurvivesManyHandoffs(t *testing.T) {
	checkLeaks(t)
	f1 := newFakeServer(t, nil)
	f2 := newFakeServer(t, nil)
	const ft = 100 * time.Millisecond
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{FailureTimeout: ft}, hooks{})
	res := acquireAsync(c, bg, "hk", time.Second, 0)
	servers := map[string]*fakeServer{f1.addr: f1, f2.addr: f2}
	other := map[*fakeServer]*fakeServer{f1: f2, f2: f1}
	for i := range 3 * maxMoves {
		var r fakeReq
		var at *fakeServer
		select {
		case r = <-f1.reqs:
			at = f1
		case r = <-f2.reqs:
			at = f2
		case <-time.After(5 * time.Second):
			t.Fatalf("handoff %d: the acquire was not re-sent", i)
		}
		if r.words[0] != "A" {
			t.Fatalf("request %q", r.line)
		}
		// The node has taken it in: a keep-alive sent after it is
		// answered before the handoff moves it.
		seen := at.keepalives.Load()
		waitFor(t, "a keep-alive after the acquire", func() bool { return at.keepalives.Load() > seen })
		r.sc.send("M hk " + other[at].addr)
	}
	_ = servers
	var r fakeReq
	select {
	case r = <-f1.reqs:
	case r = <-f2.reqs:
	case got := <-res:
		t.Fatalf("acquire ended after %d handoffs: %+v", 3*maxMoves, got)
	}
	r.sc.send("A hk 5")
	if got := await(t, res); got.err != nil || got.lock.Token != 5 {
		t.Fatalf("acquire: %+v", got)
	}
}

// During a failover the standby that answers still names the old active,
// which this client already found silent: the call keeps asking (not
// counting those redirects as disagreement) until a node takes over.
func TestStaleRedirectToSilentNodeWaitsForTakeover(t *testing.T) {
	checkLeaks(t)
	const ft = 100 * time.Millisecond
	f1 := newFakeServer(t, grantAll())
	promoted := make(chan struct{})
	var f2 *fakeServer
	f2 = newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		select {
		case <-promoted:
			return grantAll()(sc, r)
		default:
			sc.send("M " + r.words[1] + " " + f1.addr)
			return true
		}
	})
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{FailureTimeout: ft, Redial: time.Hour}, hooks{})
	waitFor(t, "both nodes connected", func() bool { return c.liveConns("") == 2 })
	c.setActive(f1.addr)
	f1.mute.Store(true)
	time.AfterFunc(8*ft, func() { close(promoted) })
	l, err := c.Acquire(bg, "k", time.Second, 0)
	if err != nil || l.Token == 0 {
		t.Fatalf("acquire: %v %+v", err, l)
	}
	if n := f2.requests(); n < 3 {
		t.Errorf("the standby was asked %d times, want the call to keep asking", n)
	}
}

// A release when no node was ever reached fails at
// once, as an acquire does, instead of re-sending for ReleaseFor.
func TestReleaseFailsAtOnceWhenNoNodeWasReached(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	c := newTestClient(t, []string{dead}, Options{}, hooks{})
	start := time.Now()
	err = c.Release(bg, "k", 7)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("release gave up after %s, want at once", took)
	}
}

// Status of a node that takes the connection and answers nothing says
// so (ErrNoAnswer), rather than blaming the dial.
func TestStatusOfSilentNode(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	f.mute.Store(true)
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	_, err := Status(ctx, f.addr)
	if !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("err = %v, want ErrNoAnswer", err)
	}
}

// The wait counts from the first send: a connection that takes a while
// to come up does not eat a short wait (lockctl's --nonblock sends the
// smallest one, 1ms).
func TestShortWaitSurvivesSlowConnect(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{dial: func(ctx context.Context, addr string) (net.Conn, error) {
		time.Sleep(50 * time.Millisecond)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}})
	l, err := c.Acquire(bg, "k", time.Second, time.Millisecond)
	if err != nil || l.Token == 0 {
		t.Fatalf("acquire with a 1ms wait on a free key: %v %+v", err, l)
	}
	if r := f.connList()[0]; r == nil {
		t.Fatal("no connection")
	}
}

// A wait that runs out while the request sits on a node that stopped
// answering is not a busy lock: the error is ErrNoAnswer, not ErrTimeout.
func TestWaitOnSilentNodeIsNoAnswer(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	const ft = 150 * time.Millisecond
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: ft, Redial: time.Hour}, hooks{})
	waitFor(t, "both connections up", func() bool { return c.liveConns("") == 2 })
	f.mute.Store(true)
	_, err := c.Acquire(bg, "k", time.Second, 50*time.Millisecond)
	if !errors.Is(err, ErrNoAnswer) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrNoAnswer and not ErrTimeout", err)
	}
}

// Each Acquire call carries an id of its own (proto's id=ID), the same on
// every send of that call and different from every other call's, also
// across clients.
func TestAcquireIDs(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	c1 := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	c2 := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	seen := make(map[string]bool)
	for _, c := range []*Client{c1, c2, c1} {
		id := c.acquireID()
		if seen[id] || len(id) > proto.MaxIDLen || strings.ContainsAny(id, " \t") {
			t.Errorf("id %q: seen before, or not a valid id", id)
		}
		seen[id] = true
	}
}
