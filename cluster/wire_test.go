package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// requests is what tn's metrics count of op's requests answered with
// outcome.
func (tn *testNode) requests(op, outcome string) uint64 {
	for _, r := range tn.Metrics().Requests {
		if r.Op == op && r.Outcome == outcome {
			return r.N
		}
	}
	return 0
}

func newTestClient(t *testing.T, addrs []string, name string) *client.Client {
	t.Helper()
	c, err := client.New(addrs, client.Options{Redial: 50 * time.Millisecond, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A try-lock of a held key is answered at once, also while other
// goroutines of the same client wait on that key on the same connection.
func TestTryLockAnsweredBesideWaitsOfTheSameClient(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	ctx := context.Background()
	holder := newTestClient(t, []string{addr}, "holder")
	lk, err := holder.Acquire(ctx, "k", 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, []string{addr}, "c")
	waits := make(chan error, 2)
	for range 2 {
		go func() {
			l, err := c.Acquire(ctx, "k", 30*time.Second, 5*time.Second)
			if err == nil {
				err = c.Release(ctx, "k", l.Token)
			}
			waits <- err
		}()
	}
	waitFor(t, "two waiters", func() bool {
		q, err := holder.Queue(ctx, "k")
		return err == nil && q.Waiting == 2
	})
	start := time.Now()
	_, err = c.TryAcquire(ctx, "k", 30*time.Second)
	took := time.Since(start)
	if !errors.Is(err, client.ErrHeld) {
		t.Fatalf("try-lock of a held key: %v, want ErrHeld", err)
	}
	if took > 50*time.Millisecond {
		t.Errorf("try-lock answered after %s beside the waits, want within 50ms", took)
	}
	// A refusal beside the waits is not held back either.
	start = time.Now()
	_, err = c.AcquireWith(ctx, "k", 30*time.Second, time.Second, client.Limit(2))
	if !errors.Is(err, client.ErrLimitMismatch) || time.Since(start) > 50*time.Millisecond {
		t.Errorf("limit mismatch beside the waits: %v after %s", err, time.Since(start))
	}
	if err := holder.Release(ctx, "k", lk.Token); err != nil {
		t.Fatal(err)
	}
	// Both waits are served in turn: no answer of the try or the refusal
	// went to them.
	for range 2 {
		if err := <-waits; err != nil {
			t.Errorf("waiter: %v", err)
		}
	}
}

// A waiter whose caller gives up leaves the queue at once (X), and the
// key, once released, is granted to nobody on its behalf.
func TestInterruptedWaiterLeavesTheQueueAtOnce(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	ctx := context.Background()
	holder := newTestClient(t, []string{addr}, "holder")
	lk, err := holder.Acquire(ctx, "k", 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, []string{addr}, "c")
	const n = 20
	done := make(chan error, n)
	for range n {
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err := c.Acquire(wctx, "k", 30*time.Second, 0)
			done <- err
		}()
	}
	for range n {
		if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("interrupted acquire: %v", err)
		}
	}
	waitFor(t, "the queue to empty", func() bool {
		q, err := holder.Queue(ctx, "k")
		return err == nil && q.Waiting == 0
	})
	if err := holder.Release(ctx, "k", lk.Token); err != nil {
		t.Fatal(err)
	}
	q, err := holder.Queue(ctx, "k")
	if err != nil || q.Held {
		t.Fatalf("after the release: %+v, %v: a withdrawn waiter was granted", q, err)
	}
}

// A watch sees the grant, a waiter joining, the release that grants the
// waiter, and the expiry, each as a state, in order.
func TestWatchOnTheWire(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	tn := startNode(t, addr, nil)
	w := dialWire(t, addr)
	w.send("L k")
	w.expect("L k - - 0")
	a := dialWire(t, addr)
	a.send("A k 30 0 ref=1")
	tok := a.expect(`A k (\d+) ref=1`)[1]
	// (A watch line shows the state when it is written: a millisecond of
	// the lease may be gone by then.)
	w.expect(`L k ` + tok + ` (30|29\.9\d*) 0`)
	b := dialWire(t, addr)
	b.send("A k 0.3 0 id=b#1 ref=x")
	w.expect(`L k ` + tok + ` [\d.]+ 1 [\d.]+,127\.0\.0\.1:\d+ wid=1,b#1`)
	a.send("R k " + tok)
	a.expect("R k ok")
	tok2 := b.expect(`A k (\d+) ref=x`)[1]
	w.expect(`L k ` + tok2 + ` [\d.]+ 0 id=` + tok2 + `,b#1`)
	// The lease of 0.3s runs out.
	w.expect(`L k - - 0`)
	a.send("A k 30 0")
	tok3 := a.expect(`A k (\d+)`)[1]
	w.expect(`L k ` + tok3 + ` (30|29\.9\d*) 0`)
	// A renewal sends nothing: the next line is U's answer. After it, no
	// L line follows.
	a.send("N k " + tok3 + " 30")
	a.expect("N k ok")
	w.send("U k")
	w.expect("U k ok")
	a.send("R k " + tok3)
	a.expect("R k ok")
	w.send("Q k")
	w.expect(`Q k - - 0`)
	b.send("A k 30 0 id=b#2", "X k b#2", "X k b#2")
	b.expect(`A k \d+`)
	b.expect("X k none")
	b.expect("X k none")
	// Every answer counted, under the outcome it said.
	for _, c := range []struct {
		op, outcome string
		want        uint64
	}{{"watch", "ok", 1}, {"unwatch", "ok", 1}, {"withdraw", "ok", 2}, {"acquire", "granted", 4}, {"release", "ok", 2}, {"renew", "ok", 1}, {"queue", "ok", 1}} {
		if got := tn.requests(c.op, c.outcome); got != c.want {
			t.Errorf("%s %s counted %d times, want %d", c.op, c.outcome, got, c.want)
		}
	}
}

func TestWatchBounds(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	// The bounds of a connection and of the node; an address's are
	// TestWatchesPerAddressAreBounded's (they apply with a cap per IP).
	startNodeWith(t, addr, nil, func(c *Config) {
		c.MaxWatches, c.MaxTotalWatches = 2, 3
		c.Limits = Limits{MaxConnsPerIP: -1}
	})
	w := dialWire(t, addr)
	w.send("L a", "L a", "L b", "L c")
	w.expect("L a - - 0")
	w.expect("L a - - 0")
	w.expect("L b - - 0")
	w.expect("E c L: this connection already watches 2 keys; .*")
	v := dialWire(t, addr)
	v.send("L d", "L e")
	v.expect("L d - - 0")
	v.expect("E e L: this node already serves 3 watches; .*")
	// A closed connection's watches are freed.
	w.nc.Close()
	waitFor(t, "the watches of a closed connection freed", func() bool {
		v.send("L e")
		line := v.expect(`(L e - - 0|E e L: .*)`)[1]
		return line == "L e - - 0"
	})
}

// waiterIDs reads the names of key's waiters, in queue order.
func waiterIDs(t *testing.T, c *client.Client, key string) []string {
	t.Helper()
	q, err := c.Queue(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range q.Waiters {
		ids = append(ids, w.Name())
	}
	return ids
}

// The queue order of three waiters, and their waits, survive a kill -9
// of the active and a graceful handoff: each re-sent acquire takes its
// own place back.
func TestQueueOrderSurvivesFailoverAndHandoff(t *testing.T) {
	playsFaults(t)
	addrs := freeAddrs(t, 3)
	a := startNode(t, addrs[0], addrs)
	b := startNode(t, addrs[1], addrs)
	c := startNode(t, addrs[2], addrs)
	waitFor(t, "a active, b and c synced", func() bool {
		return a.roleIs(Active) && b.isSynced() && c.isSynced()
	})
	ctx := context.Background()
	holder := newTestClient(t, addrs, "holder")
	lk, err := holder.Acquire(ctx, "k", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"w1", "w2", "w3"}
	results := make(chan error, len(want))
	for i, name := range want {
		cl := newTestClient(t, addrs, name)
		go func() {
			l, err := cl.Acquire(ctx, "k", time.Minute, 0)
			if err == nil {
				err = cl.Release(ctx, "k", l.Token)
			}
			results <- err
		}()
		waitFor(t, fmt.Sprintf("%d waiters", i+1), func() bool { return len(waiterIDs(t, holder, "k")) == i+1 })
	}
	if got := waiterIDs(t, holder, "k"); !slices.Equal(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
	// The standbys know the three places (J records go out as the
	// waiters join, and are not waited for: a crash within a moment of a
	// join may lose that one's place).
	for _, n := range []*testNode{b, c} {
		waitFor(t, "the standby told of the waiters", func() bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			return n.core.Status(n.now()).Waiters == 3
		})
	}
	a.crash()
	waitFor(t, "b active", func() bool { return b.roleIs(Active) })
	waitFor(t, "the waiters back on b", func() bool {
		q, err := holder.Queue(ctx, "k")
		if err != nil || q.Waiting != 3 {
			return false
		}
		for _, w := range q.Waiters {
			if w.Addr == "" {
				return false // a ghost not claimed yet
			}
		}
		return true
	})
	if got := waiterIDs(t, holder, "k"); !slices.Equal(got, want) {
		t.Fatalf("queue after kill -9 of the active %v, want %v", got, want)
	}
	waitFor(t, "c synced with b, and told of the waiters", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.core.Synced() && c.core.Active() == addrs[1] && c.core.Status(c.now()).Waiters == 3
	})
	b.shutdown() // SIGINT: hands the role to c
	waitFor(t, "c active", func() bool { return c.roleIs(Active) })
	waitFor(t, "the waiters back on c", func() bool {
		q, err := holder.Queue(ctx, "k")
		if err != nil || q.Waiting != 3 {
			return false
		}
		for _, w := range q.Waiters {
			if w.Addr == "" {
				return false
			}
		}
		return true
	})
	if got := waiterIDs(t, holder, "k"); !slices.Equal(got, want) {
		t.Fatalf("queue after the handoff %v, want %v", got, want)
	}
	if err := holder.Release(ctx, "k", lk.Token); err != nil {
		t.Fatal(err)
	}
	for range want {
		if err := <-results; err != nil {
			t.Errorf("waiter: %v", err)
		}
	}
}

// A malformed acquire that carries a readable ref is refused with it, at
// once, beside an older acquire of the key waiting on the connection.
func TestMalformedAcquireRefusedWithItsRef(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	a := dialWire(t, addr)
	a.send("A k 30 0")
	a.expect(`A k \d+`)
	b := dialWire(t, addr)
	b.send("A k 30 0 ref=1", "A k 30 10 limit=0 ref=2")
	b.expect(`E k A: ref=2 limit "0": want a whole number .*`)
	// Without a ref it is ordered among the acquires without one: none
	// waits here, so it comes at once too.
	b.send("A k 30 10 limit=0")
	b.expect(`E k A: limit "0": want a whole number .*`)
}
