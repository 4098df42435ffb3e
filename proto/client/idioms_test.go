package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A Lock releases itself as a Held does: Release(ctx), same shape.
func TestLockReleasesItself(t *testing.T) {
	checkLeaks(t)
	grant := grantAll()
	released := make(chan string, 4)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.words[0] == "R" {
			released <- r.line
		}
		return grant(sc, r)
	})
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	l, err := c.Acquire(bg, "k", time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(bg); err != nil {
		t.Fatalf("Lock.Release: %v", err)
	}
	if got, want := <-released, "R k "+itoa(l.Token); got != want {
		t.Errorf("Lock.Release sent %q, want %q", got, want)
	}
	var zero Lock
	if err := zero.Release(bg); err == nil || !strings.Contains(err.Error(), "ReleaseToken") {
		t.Errorf("a Lock no client returned: Release = %v, want an error pointing at ReleaseToken", err)
	}
}

// TryAcquire never waits: a Wait option is refused before anything is sent.
func TestTryAcquireRefusesWait(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	for _, d := range []time.Duration{0, time.Second} {
		_, err := c.TryAcquire(bg, "k", time.Second, Wait(d))
		if err == nil || !strings.Contains(err.Error(), "AcquireWith") {
			t.Errorf("TryAcquire with Wait(%s): err = %v, want a refusal naming AcquireWith", d, err)
		}
	}
	if n := f.requests(); n != 0 {
		t.Errorf("the refused try-acquires sent %d requests", n)
	}
	if _, err := c.TryAcquire(bg, "k", time.Second, Limit(2)); err != nil {
		t.Errorf("TryAcquire with Limit: %v", err)
	}
}

// A wait that runs out gives one error, whether the wait's deadline or
// ctx's ended it: it matches ErrTimeout and context.DeadlineExceeded.
func TestWaitRunsOutOneError(t *testing.T) {
	checkLeaks(t)
	// Nothing is granted: T when asked with a wait, silence otherwise.
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.words[0] == "A" && r.words[3] != "0" {
			go func() { time.Sleep(100 * time.Millisecond); sc.send("T " + r.words[1]) }()
		}
		return r.words[0] == "A" || r.words[0] == "X"
	})
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	_, byWait := c.Acquire(bg, "k", time.Second, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	_, byCtx := c.Acquire(ctx, "k", time.Second, 0)
	for what, err := range map[string]error{"the wait": byWait, "ctx's deadline": byCtx} {
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s ended the acquire with %v; want an error matching ErrTimeout and context.DeadlineExceeded", what, err)
		}
	}
	cctx, ccancel := context.WithCancel(bg)
	ccancel()
	if _, err := c.Acquire(cctx, "k", time.Second, 0); !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Errorf("a cancelled ctx: err = %v, want context.Canceled, not a timeout", err)
	}
}

// sameLock compares what a Lock says, not the client that acquired it.
func sameLock(a, b Lock) bool {
	a.c, b.c = nil, nil
	return a == b
}
