package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

func TestQueuePosition(t *testing.T) {
	q := proto.Queue{Waiters: []proto.QueueWaiter{{Waited: 9 * time.Second}, {Waited: 5 * time.Second}, {Waited: 2 * time.Second}}}
	for waited, want := range map[time.Duration]int{
		10 * time.Second:        1, // nobody waited longer: we are first
		5100 * time.Millisecond: 2,
		2100 * time.Millisecond: 3,
		time.Second:             3, // not queued yet as far as Q knows: last
	} {
		if pos, of := queuePosition(q, waited); pos != want || of != 3 {
			t.Errorf("waited %s: #%d of %d, want #%d of 3", waited, pos, of, want)
		}
	}
	if pos, of := queuePosition(proto.Queue{Held: true}, time.Second); pos != 0 || of != 0 {
		t.Errorf("empty queue: #%d of %d", pos, of)
	}
	got := describePlace(proto.Queue{Held: true, LeaseLeft: 12 * time.Second, Waiters: q.Waiters}, 5100*time.Millisecond)
	if got != "#2 of 3 in the queue · holder's lease ends in 12.0s" {
		t.Errorf("describePlace: %q", got)
	}
	sem := proto.Queue{Held: true, Limit: 3, Waiters: q.Waiters, Holders: []proto.QueueHolder{
		{Token: 1, LeaseLeft: 40 * time.Second}, {Token: 2, LeaseLeft: 7 * time.Second}, {Token: 3, LeaseLeft: time.Minute}}}
	if got := describePlace(sem, 10*time.Second); got != "#1 of 3 in the queue · 3/3 held, the first lease ends in 7.0s" {
		t.Errorf("describePlace of a semaphore: %q", got)
	}
}

// lockedBuffer is a strings.Builder safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestWaitIndicatorDrawsAndClears(t *testing.T) {
	var out lockedBuffer
	start := time.Now().Add(-5100 * time.Millisecond)
	poll := func(ctx context.Context) (proto.Queue, error) {
		return proto.Queue{Key: "deploy", Held: true, LeaseLeft: time.Minute,
			Waiters: []proto.QueueWaiter{{Waited: 9 * time.Second}, {Waited: 5 * time.Second}}}, nil
	}
	stop := runWaitIndicator(context.Background(), &out, "deploy", start, poll, 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "#2 of 2 in the queue") {
		if time.Now().After(deadline) {
			t.Fatalf("no position drawn: %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	stop() // a second stop is harmless
	got := out.String()
	if !strings.Contains(got, `waiting for "deploy"`) || !strings.HasSuffix(got, "\r\x1b[2K") {
		t.Errorf("drawn: %q", got)
	}
	time.Sleep(30 * time.Millisecond)
	if out.String() != got {
		t.Errorf("drew after stop returned")
	}
}

func TestWaitIndicatorQuietWhenQuick(t *testing.T) {
	var out lockedBuffer
	poll := func(ctx context.Context) (proto.Queue, error) { return proto.Queue{}, nil }
	stop := runWaitIndicator(context.Background(), &out, "k", time.Now(), poll, time.Hour, time.Millisecond, time.Millisecond)
	stop()
	if out.String() != "" {
		t.Errorf("a wait shorter than the delay drew %q", out.String())
	}
}

func TestStartWaitingSilentWhenNotATerminal(t *testing.T) {
	var errb lockedBuffer
	g := &globals{Addrs: []string{"127.0.0.1:1"}, Stderr: &errb}
	stop := startWaiting(context.Background(), g, "k")
	time.Sleep(2 * waitingDelay)
	stop()
	if errb.String() != "" {
		t.Errorf("drew on a non-terminal: %q", errb.String())
	}
}

func TestQueueOnceFollowsRedirect(t *testing.T) {
	tc := startCluster(t, 2)
	active, standby := tc.addrs[0], tc.addrs[1]
	cl, err := client.New([]string{active}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Acquire(context.Background(), "deploy", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Asked at the standby, answered by the active.
	q, err := queueOnce(ctx, []string{standby}, "deploy")
	if err != nil || !q.Held || q.Key != "deploy" {
		t.Fatalf("got %+v, %v", q, err)
	}
	if _, err := queueOnce(ctx, []string{freeLoopbackAddrs(t, 1)[0]}, "deploy"); err == nil {
		t.Errorf("no error from a closed port")
	}
	// A queue whose answer is longer than a bufio.Reader's buffer: 200
	// named waiters.
	for i := range 200 {
		w, err := client.New([]string{active}, client.Options{ConnsPerAddr: 1, Name: strings.Repeat("w", 30)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		wctx, wcancel := context.WithCancel(context.Background())
		defer wcancel()
		go w.Acquire(wctx, "deploy", time.Minute, 0)
		if i == 199 {
			waitQueueLen(t, cl, "deploy", 200)
		}
	}
	if q, err := queueOnce(ctx, []string{standby}, "deploy"); err != nil || len(q.Waiters) != 200 || q.Waiters[199].ID == "" {
		t.Fatalf("a long queue: %d waiters, %v", len(q.Waiters), err)
	}
}
