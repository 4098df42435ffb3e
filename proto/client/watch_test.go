package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// refOf reads the ref=R of a request line.
func refOf(t *testing.T, line string) string {
	t.Helper()
	_, ref, ok := strings.Cut(line, " ref=")
	if !ok || ref == "" {
		t.Fatalf("request %q carries no ref", line)
	}
	return ref
}

func TestTryAcquireSendsTheTryForm(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	res := async(func() lockResult {
		l, err := c.TryAcquire(bg, "k", 30*time.Second)
		return lockResult{l, err}
	})
	r := f.next()
	if !strings.HasPrefix(r.line, "A k 30 - id=") {
		t.Fatalf("request %q, want the try form A k 30 - id=...", r.line)
	}
	r.sc.send("T k ref=" + refOf(t, r.line))
	got := await(t, res)
	if !errors.Is(got.err, ErrHeld) || !errors.Is(got.err, ErrTimeout) {
		t.Fatalf("try-acquire of a held key: %v, want ErrHeld and ErrTimeout", got.err)
	}
	if !strings.Contains(got.err.Error(), "nothing was queued") {
		t.Errorf("error %q does not say that nothing was queued", got.err)
	}
	res = async(func() lockResult {
		l, err := c.TryAcquire(bg, "k", 30*time.Second, Limit(2))
		return lockResult{l, err}
	})
	r = f.next()
	if !strings.HasPrefix(r.line, "A k 30 - limit=2 id=") {
		t.Fatalf("request %q", r.line)
	}
	r.sc.send("A k 7 ref=" + refOf(t, r.line))
	if got := await(t, res); got.err != nil || got.lock.Token != 7 || got.lock.Limit != 2 {
		t.Fatalf("try-acquire of a free key: %+v", got)
	}
}

// Answers that carry refs go to their acquire whatever the order: a
// try-lock sent behind a long wait of the same key, on the same
// connection, returns as soon as its own answer comes.
func TestAnswersByRefOvertakeOlderAcquires(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1}, hooks{})
	long := acquireAsync(c, bg, "k", 30*time.Second, 0)
	r1 := f.next()
	try := async(func() lockResult {
		l, err := c.TryAcquire(bg, "k", 30*time.Second)
		return lockResult{l, err}
	})
	r2 := f.next()
	if r1.sc != r2.sc {
		t.Fatal("want both acquires on the one connection")
	}
	ref1, ref2 := refOf(t, r1.line), refOf(t, r2.line)
	if ref1 == ref2 {
		t.Fatalf("two acquires with the same ref %s", ref1)
	}
	r2.sc.send("T k ref=" + ref2)
	if got := await(t, try); !errors.Is(got.err, ErrHeld) {
		t.Fatalf("try-acquire: %+v", got)
	}
	// A refusal of a third, with its ref, also overtakes the wait.
	third := async(func() lockResult {
		l, err := c.AcquireWith(bg, "k", 30*time.Second, time.Second, Limit(2))
		return lockResult{l, err}
	})
	r3 := f.next()
	r3.sc.send("E k A: ref=" + refOf(t, r3.line) + " limit mismatch: key \"k\" allows 1 holder")
	got := await(t, third)
	var se *ServerError
	if !errors.As(got.err, &se) || !errors.Is(got.err, ErrLimitMismatch) || strings.Contains(se.Msg, "ref=") {
		t.Fatalf("refused acquire: %v", got.err)
	}
	r1.sc.send("A k 9 ref=" + ref1)
	if got := await(t, long); got.err != nil || got.lock.Token != 9 {
		t.Fatalf("long acquire: %+v", got)
	}
}

func recvQueue(t *testing.T, ch <-chan proto.Queue) proto.Queue {
	t.Helper()
	select {
	case q, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return q
	case <-time.After(5 * time.Second):
		t.Fatal("no watch state within 5s")
	}
	return proto.Queue{}
}

func TestWatchDeliversStatesAndEnds(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1}, hooks{})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	res := async(func() error {
		ch, err := c.Watch(ctx, "k")
		if err != nil {
			return err
		}
		// Limit reads as Queue's does: 1 for a lock, held or free.
		if q := recvQueue(t, ch); q.Held || q.Key != "k" || q.Limit != 1 {
			t.Errorf("first state %+v, want k free, limit 1", q)
		}
		if q := recvQueue(t, ch); !q.Held || q.Token != 7 || q.Limit != 1 {
			t.Errorf("second state %+v, want k held by 7, limit 1", q)
		}
		if q := recvQueue(t, ch); !q.Held || q.Limit != 3 || len(q.Holders) != 2 {
			t.Errorf("third state %+v, want a semaphore of 3 held by 2", q)
		}
		cancel()
		for range ch {
		}
		return nil
	})
	r := f.next()
	if r.line != "L k" {
		t.Fatalf("request %q, want L k", r.line)
	}
	r.sc.send("L k - - 0")
	r.sc.send("L k 7 30 0")
	r.sc.send("L k 8 30 0 limit=3 holder=9,29")
	if err := await(t, res); err != nil {
		t.Fatal(err)
	}
	if u := f.next(); u.line != "U k" {
		t.Fatalf("request after the watch ended %q, want U k", u.line)
	}
}

func TestWatchRefused(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		sc.send("E k L: this connection already watches 256 keys")
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	_, err := c.Watch(bg, "k")
	var se *ServerError
	if !errors.As(err, &se) || se.Op != proto.OpWatch {
		t.Fatalf("Watch: %v, want the node's refusal", err)
	}
}

// A watch follows the role: an M that answers nothing moves it to the
// node named, and a dropped connection to another; each time the state
// read first at the new place is delivered first.
func TestWatchFollowsMovesAndDrops(t *testing.T) {
	checkLeaks(t)
	f2 := newFakeServer(t, nil)
	f1 := newFakeServer(t, nil)
	c := newTestClient(t, []string{f1.addr, f2.addr}, Options{ConnsPerAddr: 1}, hooks{})
	waitFor(t, "both connections", func() bool { return c.liveConns("") == 2 })
	c.setActive(f1.addr)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	type got struct {
		ch  <-chan proto.Queue
		err error
	}
	res := async(func() got { ch, err := c.Watch(ctx, "k"); return got{ch, err} })
	r := f1.next()
	r.sc.send("L k 5 30 0")
	w := await(t, res)
	if w.err != nil {
		t.Fatal(w.err)
	}
	if q := recvQueue(t, w.ch); q.Token != 5 {
		t.Fatalf("first state %+v", q)
	}
	// The active hands its role to f2.
	r.sc.send("M k " + f2.addr)
	r2 := f2.next()
	if r2.line != "L k" {
		t.Fatalf("request at the new active %q, want L k", r2.line)
	}
	r2.sc.send("L k 6 30 1 0,-")
	if q := recvQueue(t, w.ch); q.Token != 6 || q.Waiting != 1 {
		t.Fatalf("state at the new active %+v", q)
	}
	// f2's connection drops: the watch comes back (on f1 or f2, whichever
	// the client reaches) with the current state first.
	r2.sc.drop()
	var r3 fakeReq
	select {
	case r3 = <-f1.reqs:
	case r3 = <-f2.reqs:
	case <-time.After(5 * time.Second):
		t.Fatal("no new subscription after the drop")
	}
	if r3.line != "L k" {
		t.Fatalf("request after the drop %q", r3.line)
	}
	r3.sc.send("L k 8 30 0")
	if q := recvQueue(t, w.ch); q.Token != 8 {
		t.Fatalf("state after the drop %+v, want token 8", q)
	}
	cancel()
	for range w.ch {
	}
}

// A node of a release before refs refuses the word: the acquire is sent
// again without it, and so are the next ones on that connection.
func TestAcquireWithoutRefsOnAnOlderNode(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if _, ref, ok := strings.Cut(r.line, " ref="); ok {
			sc.send(`E k A: "ref=` + ref + `": want limit=N or id=ID after the wait`)
			return true
		}
		return false
	})
	c := newTestClient(t, []string{f.addr}, Options{ConnsPerAddr: 1}, hooks{})
	res := acquireAsync(c, bg, "k", 30*time.Second, 0)
	r := f.next()
	if strings.Contains(r.line, "ref=") {
		t.Fatalf("re-sent request %q still has a ref", r.line)
	}
	r.sc.send("A k 7")
	if got := await(t, res); got.err != nil || got.lock.Token != 7 {
		t.Fatalf("acquire: %+v", got)
	}
	res = acquireAsync(c, bg, "k", 30*time.Second, 0)
	if r := f.next(); strings.Contains(r.line, "ref=") {
		t.Fatalf("next request %q has a ref", r.line)
	} else {
		r.sc.send("A k 8")
	}
	await(t, res)
}
