package client

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client/porttest"
)

// refSuffix echoes the ref=R of a request line, "" when it has none.
func refSuffix(line string) string {
	if _, ref, ok := strings.Cut(line, " ref="); ok {
		return " ref=" + ref
	}
	return ""
}

// redirectTo answers every request with M naming addr.
func redirectTo(addr string) func(sc *serverConn, r fakeReq) bool {
	return func(sc *serverConn, r fakeReq) bool {
		sc.send("M " + r.words[1] + " " + addr + refSuffix(r.line))
		return true
	}
}

// waitDown waits until every connection of c to addr has failed.
func waitDown(t *testing.T, c *Client, addr string) {
	t.Helper()
	waitFor(t, addr+" down for the client", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.deadLocked(addr)
	})
}

// clientInOutage is a client whose only node, at addr, served it and
// then went away: the client has every connection to it down.
func clientInOutage(t *testing.T) (*Client, string) {
	t.Helper()
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: 100 * time.Millisecond, Redial: time.Hour}, hooks{})
	waitFor(t, "two connections", func() bool { return c.liveConns("") == 2 })
	f.close()
	waitDown(t, c, f.addr)
	return c, f.addr
}

// A node that restarted and took its role back is named by the others'
// M while this client still has it down: the client dials it at once,
// and the call goes there, instead of failing or waiting for the next
// background redial (an hour here).
func TestMovedToRestartedNodeDialsItAtOnce(t *testing.T) {
	checkLeaks(t)
	first := newFakeServer(t, grantAll())
	addr := first.addr
	standby := newFakeServer(t, redirectTo(addr))
	c := newTestClient(t, []string{addr, standby.addr}, Options{FailureTimeout: 100 * time.Millisecond, Redial: time.Hour}, hooks{})
	waitFor(t, "both nodes connected", func() bool { return c.liveConns("") == 2 })
	first.close()
	waitDown(t, c, addr)
	back := newFakeServerAt(t, addr, grantAll())
	start := time.Now()
	for _, call := range []func() error{
		func() error { _, err := c.Acquire(bg, "k", time.Second, time.Second); return err },
		func() error { return c.Renew(bg, "k", 1, time.Second) },
	} {
		if err := call(); err != nil {
			t.Fatalf("a call redirected to the restarted node: %v", err)
		}
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("the calls took %s to reach the restarted node; it should be dialled at once", took)
	}
	if back.requests() != 2 {
		t.Errorf("the restarted node served %d requests, want 2", back.requests())
	}
}

// A release redirected to a node the client has down dials it at once
// too, and reaches it well before the next re-send of ReleaseEvery.
func TestReleaseMovedToRestartedNode(t *testing.T) {
	checkLeaks(t)
	first := newFakeServer(t, grantAll())
	addr := first.addr
	standby := newFakeServer(t, redirectTo(addr))
	c := newTestClient(t, []string{addr, standby.addr}, Options{FailureTimeout: 100 * time.Millisecond, Redial: time.Hour, ReleaseEvery: time.Second}, hooks{})
	waitFor(t, "both nodes connected", func() bool { return c.liveConns("") == 2 })
	first.close()
	waitDown(t, c, addr)
	back := newFakeServerAt(t, addr, grantAll())
	start := time.Now()
	if err := c.Release(bg, "k", 1); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("the release took %s to reach the restarted node", took)
	}
	if back.requests() != 1 {
		t.Errorf("the restarted node got %d requests, want the release", back.requests())
	}
}

// When the node others name stays silent, the error says for how long it
// has not answered: since it went silent, not since the call began.
func TestStaleRedirectErrorCountsFromTheSilence(t *testing.T) {
	checkLeaks(t)
	first := newFakeServer(t, grantAll())
	addr := first.addr
	standby := newFakeServer(t, redirectTo(addr))
	const ft = 50 * time.Millisecond
	c := newTestClient(t, []string{addr, standby.addr}, Options{FailureTimeout: ft, Redial: time.Hour}, hooks{})
	waitFor(t, "both nodes connected", func() bool { return c.liveConns("") == 2 })
	first.close()
	waitDown(t, c, addr)
	// The node was last heard 20 s ago.
	c.mu.Lock()
	for _, cn := range c.conns {
		if cn.addr == addr {
			cn.lastRead.Store(time.Now().Add(-20 * time.Second).UnixNano())
		}
	}
	c.mu.Unlock()
	_, err := c.Queue(bg, "k")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	m := regexp.MustCompile(`which has not answered this client for ([0-9.]+m?s)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q does not say how long the node has been silent", err)
	}
	if d, _ := time.ParseDuration(m[1]); d < 20*time.Second {
		t.Errorf("error says the node has been silent %s; it was last heard over 20s ago", d)
	}
}

// An acquire that waits until its ctx ends (Acquire with no wait, Hold
// and Campaign without Wait) waits through an outage of every node:
// it is served once a node is back, instead of failing as unavailable.
func TestWaitingCallsOutlastAnOutage(t *testing.T) {
	checkLeaks(t)
	for _, tc := range []struct {
		name string
		call func(c *Client) error
	}{
		{"acquire", func(c *Client) error { _, err := c.Acquire(bg, "k", time.Second, 0); return err }},
		{"hold", func(c *Client) error {
			h, err := c.Hold(bg, "k", time.Second)
			if err == nil {
				h.Release(bg)
			}
			return err
		}},
		{"campaign", func(c *Client) error {
			e := NewElection(c, "k")
			e.Lease = time.Second
			h, err := e.Campaign(bg, "me")
			if err == nil {
				h.Release(bg)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, addr := clientInOutage(t)
			res := async(func() error { return tc.call(c) })
			select {
			case err := <-res:
				t.Fatalf("returned during the outage: %v", err)
			case <-time.After(500 * time.Millisecond):
			}
			newFakeServerAt(t, addr, grantAll())
			if err := await(t, res); err != nil {
				t.Fatalf("once the node is back: %v", err)
			}
		})
	}
}

// An acquire with a wait waits through an outage shorter than its wait
// too, and is served once a node is back.
func TestBoundedAcquireOutlastsAShortOutage(t *testing.T) {
	checkLeaks(t)
	c, addr := clientInOutage(t)
	res := acquireAsync(c, bg, "k", time.Second, 5*time.Second)
	select {
	case got := <-res:
		t.Fatalf("returned during the outage: %+v", got)
	case <-time.After(500 * time.Millisecond):
	}
	newFakeServerAt(t, addr, grantAll())
	if got := await(t, res); got.err != nil {
		t.Fatalf("once the node is back: %v", got.err)
	}
}

// An outage longer than an acquire's wait ends it as unavailable once the
// wait ran out, not before and not as a timeout (no node said the key was
// busy); a try does not wait at all.
func TestBoundedAcquireOutageEndsWithItsWait(t *testing.T) {
	checkLeaks(t)
	c, _ := clientInOutage(t)
	const wait = 600 * time.Millisecond
	start := time.Now()
	_, err := c.Acquire(bg, "k", time.Second, wait)
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "whole wait of 600ms") {
		t.Fatalf("err = %v, want ErrUnavailable saying the wait ran out", err)
	}
	if took < wait {
		t.Errorf("gave up after %s, before its wait of %s ran out", took, wait)
	}
	start = time.Now()
	if _, err := c.TryAcquire(bg, "k", time.Second); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("try: err = %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took >= wait {
		t.Errorf("a try took %s in the outage; it does not wait", took)
	}
}

// A client made while nothing listens at its address yet (a cluster
// starting): an acquire with a wait waits for a node to start, to the
// end of its wait; one that waits forever fails at once, so that a
// client given a wrong address does not hang on it for good, and so does
// one whose wait runs out first.
func TestBoundedAcquireWaitsForANodeNotUpYet(t *testing.T) {
	checkLeaks(t)
	port := porttest.Reserve(t)
	c := newTestClient(t, []string{port.Addr}, Options{FailureTimeout: 100 * time.Millisecond, Redial: time.Hour}, hooks{})
	start := time.Now()
	if _, err := c.Acquire(bg, "k", time.Second, 0); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("waiting forever: err = %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("waiting forever on an address never reached: gave up after %s, want at once", took)
	}
	start = time.Now()
	if _, err := c.Acquire(bg, "k", time.Second, 300*time.Millisecond); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "whole wait of 300ms") {
		t.Fatalf("a wait of 300ms with nothing listening: err = %v, want ErrUnavailable saying the wait ran out", err)
	} else if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("a wait of 300ms gave up after %s, before it ran out", took)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(bg, "k", time.Second, 10*time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("an acquire with a wait returned before a node listened: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	newFakeServerOn(t, port.Listen(), grantAll())
	if err := <-done; err != nil {
		t.Fatalf("once a node listens: %v", err)
	}
}

// The wait through an outage ends with ctx.
func TestWaitingAcquireOutageEndsWithCtx(t *testing.T) {
	checkLeaks(t)
	c, _ := clientInOutage(t)
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(ctx, "k", time.Second, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the ctx's", err)
	}
}

// Hold refuses a lease shorter than twice the failure timeout, naming
// the shortest it takes; nothing is sent.
func TestHoldRefusesALeaseTooShortForAFailover(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: 400 * time.Millisecond}, hooks{})
	if c.MinHoldLease() != 800*time.Millisecond {
		t.Fatalf("MinHoldLease %s, want twice the failure timeout", c.MinHoldLease())
	}
	_, err := c.Hold(bg, "k", 30*time.Millisecond)
	if !errors.Is(err, ErrLeaseTooShort) || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "800ms") {
		t.Fatalf("Hold of 30ms: %v, want ErrLeaseTooShort naming 800ms", err)
	}
	e := NewElection(c, "k")
	e.Lease = 500 * time.Millisecond
	if _, err := e.Campaign(bg, "me"); !errors.Is(err, ErrLeaseTooShort) {
		t.Fatalf("Campaign with a lease of 500ms: %v, want ErrLeaseTooShort", err)
	}
	if n := f.requests(); n != 0 {
		t.Errorf("%d requests sent for refused holds", n)
	}
	h, err := c.Hold(bg, "k", 800*time.Millisecond)
	if err != nil {
		t.Fatalf("Hold of the shortest lease: %v", err)
	}
	h.Release(bg)
}

func recvEvent(t *testing.T, ch <-chan WatchEvent, within time.Duration) WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-time.After(within):
		t.Fatalf("no watch event within %s", within)
	}
	return WatchEvent{}
}

// WatchEvents says when the watch loses the cluster (a Stale event with
// the last state, within a little more than a failure timeout), and its
// next state, read where it subscribed again, says it is current again;
// Watch, beside it, gets the states alone; Observe sends the last
// leader again, Stale, then the leader once current.
func TestWatchSaysStaleAndCurrent(t *testing.T) {
	checkLeaks(t)
	var token atomic.Value
	token.Store("5")
	answer := func(sc *serverConn, r fakeReq) bool {
		switch r.words[0] {
		case "L":
			sc.send("L " + r.words[1] + " " + token.Load().(string) + " 9 0 id=" + token.Load().(string) + ",leader#1")
		case "U":
			sc.send("U " + r.words[1] + " ok")
		default:
			return false
		}
		return true
	}
	f := newFakeServer(t, answer)
	addr := f.addr
	const ft = 200 * time.Millisecond
	c := newTestClient(t, []string{addr}, Options{FailureTimeout: ft, Redial: time.Hour}, hooks{})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	events, err := c.WatchEvents(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	states, err := c.Watch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	leaders := NewElection(c, "k").Observe(ctx)
	if ev := recvEvent(t, events, 5*time.Second); ev.Stale || ev.Queue.Token != 5 {
		t.Fatalf("first event %+v, want the state with token 5", ev)
	}
	recvQueue(t, states)
	if l := <-leaders; l.Stale || l.Value != "leader" {
		t.Fatalf("first leader %+v", l)
	}
	lost := time.Now()
	f.close()
	ev := recvEvent(t, events, 5*time.Second)
	if !ev.Stale || ev.Queue.Token != 5 || !errors.Is(ev.Err, ErrUnavailable) {
		t.Fatalf("after the node went away: %+v, want a Stale event with the last state and ErrUnavailable", ev)
	}
	if took := time.Since(lost); took < ft || took > 10*ft {
		t.Errorf("Stale came %s after the node went away; the failure timeout is %s", took, ft)
	}
	if l := <-leaders; !l.Stale || l.Value != "leader" || l.Token != 5 {
		t.Fatalf("Observe after the node went away: %+v, want the last leader, Stale", l)
	}
	token.Store("6")
	newFakeServerAt(t, addr, answer)
	if ev := recvEvent(t, events, 5*time.Second); ev.Stale || ev.Queue.Token != 6 {
		t.Fatalf("once the node is back: %+v, want the state there, not Stale", ev)
	}
	if q := recvQueue(t, states); q.Token != 6 {
		t.Fatalf("Watch once the node is back: %+v; it gets no Stale state", q)
	}
	if l := <-leaders; l.Stale || l.Token != 6 {
		t.Fatalf("Observe once the node is back: %+v", l)
	}
}
