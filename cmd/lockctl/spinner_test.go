package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olekukonko/tablewriter/pkg/twwidth"

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
	got := strings.Join(describePlace(proto.Queue{Held: true, LeaseLeft: 12 * time.Second, Waiters: q.Waiters}, 5100*time.Millisecond, nil), " · ")
	if got != "#2 of 3 in the queue · held, lease ends in 12.0s" {
		t.Errorf("describePlace: %q", got)
	}
	named := proto.Queue{Held: true, Token: 9, LeaseLeft: 12 * time.Second, Holders: []proto.QueueHolder{
		{Token: 9, LeaseLeft: 12 * time.Second, ID: "alice@ci-1:42#9f3c-1"}}}
	if got := strings.Join(describePlace(named, time.Second, nil), " · "); got != "held by alice@ci-1:42, lease ends in 12.0s" {
		t.Errorf("describePlace of a named holder: %q", got)
	}
	if got := strings.Join(describePlace(named, time.Second, map[uint64]bool{9: true}), " · "); got != "held by alice@ci-1:42, renewing" {
		t.Errorf("describePlace of a renewing holder: %q", got)
	}
	sem := proto.Queue{Held: true, Limit: 3, Waiters: q.Waiters, Holders: []proto.QueueHolder{
		{Token: 1, LeaseLeft: 40 * time.Second}, {Token: 2, LeaseLeft: 7 * time.Second}, {Token: 3, LeaseLeft: time.Minute}}}
	if got := strings.Join(describePlace(sem, 10*time.Second, nil), " · "); got != "#1 of 3 in the queue · 3/3 held, the first lease ends in 7.0s" {
		t.Errorf("describePlace of a semaphore: %q", got)
	}
	// The renewed lease of token 2 never ends: the first that does is 1's.
	if got := strings.Join(describePlace(sem, 10*time.Second, map[uint64]bool{2: true}), " · "); got != "#1 of 3 in the queue · 3/3 held, the first lease ends in 40.0s" {
		t.Errorf("describePlace of a semaphore, one renewing: %q", got)
	}
}

// A holder that renews is told from one whose lease runs down: after a
// poll that shows more lease left than the last one, less the time
// between them, the token counts as renewing, and stays so.
func TestLeaseWatchSeesRenewals(t *testing.T) {
	lw := make(leaseWatch)
	t0 := time.Unix(1000, 0)
	q := func(left time.Duration) proto.Queue {
		return proto.Queue{Held: true, Token: 7, LeaseLeft: left}
	}
	if r := lw.observe(q(28*time.Second), t0); r[7] {
		t.Errorf("renewing after one poll")
	}
	if r := lw.observe(q(27500*time.Millisecond), t0.Add(500*time.Millisecond)); r[7] {
		t.Errorf("a lease running down counts as renewing")
	}
	if r := lw.observe(q(29*time.Second), t0.Add(time.Second)); !r[7] {
		t.Errorf("a lease that grew does not count as renewing")
	}
	if r := lw.observe(q(28500*time.Millisecond), t0.Add(1500*time.Millisecond)); !r[7] {
		t.Errorf("forgot the renewal")
	}
	lw.observe(proto.Queue{}, t0.Add(2*time.Second))
	if len(lw) != 0 {
		t.Errorf("kept a holder that is gone: %v", lw)
	}
}

// On an 80-column terminal every frame fits in 79 columns, whatever the
// key and the queue: a frame that wraps leaves a line behind at every
// redraw.
func TestWaitIndicatorFits80Columns(t *testing.T) {
	place := []string{"#1 of 1 in the queue", "held by alice@build-server-17.example.com:48213, lease ends in 28.9s"}
	for _, key := range []string{"deploy", strings.Repeat("k", 255), strings.Repeat("鍵", 60), "deploy\u3164"} {
		for _, ascii := range []bool{false, true} {
			line := waitLine("⠧", key, place, "1.9s", ascii, 80)
			if w := twwidth.Width(line); w > 79 {
				t.Errorf("key %q: %d columns: %q", key, w, line)
			}
			if strings.ContainsRune(line, '\u3164') {
				t.Errorf("key %q drawn raw: %q", key, line)
			}
		}
	}
	if got := waitLine("⠧", "deploy", place[:1], "1.9s", false, 80); got != `⠧ waiting for "deploy" · #1 of 1 in the queue · 1.9s` {
		t.Errorf("a line that fits: %q", got)
	}
	// Too long with the holder's part: that part goes, the rest stays.
	if got := waitLine("⠧", "deploy", place, "1.9s", false, 80); got != `⠧ waiting for "deploy" · #1 of 1 in the queue · 1.9s` {
		t.Errorf("a line that does not fit: %q", got)
	}

	var out lockedBuffer
	poll := func(ctx context.Context) (proto.Queue, error) {
		return proto.Queue{Key: "deploy", Held: true, Token: 5, LeaseLeft: 28 * time.Second, Holders: []proto.QueueHolder{
			{Token: 5, LeaseLeft: 28 * time.Second, ID: "alice@build-server-17.example.com:48213#9f3c-1"}},
			Waiters: []proto.QueueWaiter{{Waited: time.Hour}}}, nil
	}
	stop := runWaitIndicator(context.Background(), &out, strings.Repeat("d", 40), time.Now(), poll, time.Millisecond, time.Millisecond, time.Millisecond, 80, nil)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(out.String(), "\r") < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	frames := strings.Split(out.String(), "\r\x1b[2K")
	if len(frames) < 20 {
		t.Fatalf("only %d frames drawn", len(frames))
	}
	for _, f := range frames {
		if w := twwidth.Width(f); w > 79 {
			t.Errorf("a frame of %d columns: %q", w, f)
		}
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
	stop := runWaitIndicator(context.Background(), &out, "deploy", start, poll, 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond, 80, nil)
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
	stop := runWaitIndicator(context.Background(), &out, "k", time.Now(), poll, time.Hour, time.Millisecond, time.Millisecond, 80, nil)
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
