package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// testFT is the failure timeout of the tests' clients when they give
// none: short, so that holds may have the short leases (at least twice
// it, Client.MinHoldLease) that keep the tests quick.
const testFT = 150 * time.Millisecond

func newClient(t *testing.T, addr string, opts client.Options) *client.Client {
	t.Helper()
	if opts.FailureTimeout == 0 {
		opts.FailureTimeout = testFT
	}
	c, err := client.New([]string{addr}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitDone waits for h.Done, failing the test after d.
func waitDone(t *testing.T, h *client.Held, d time.Duration) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(d):
		t.Fatalf("Done still open after %s (expires %s)", d, h.Expires())
	}
}

// A hold keeps its lock past several leases, with one token, and its
// release frees the key at once and says why the hold ended.
func TestHoldRenewsUntilReleased(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{Name: "svc"})
	other := newClient(t, addr, client.Options{})
	ctx := context.Background()

	h, err := c.Hold(ctx, "jobs", 300*time.Millisecond, client.Name("worker-7"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Key() != "jobs" || h.Token() == 0 || h.Err() != nil {
		t.Fatalf("fresh hold: key %q token %d err %v", h.Key(), h.Token(), h.Err())
	}
	if left := time.Until(h.Expires()); left <= 0 || left > 300*time.Millisecond {
		t.Fatalf("expires in %s, want within the lease", left)
	}
	// Four leases on, it is still ours: another client cannot take it.
	if _, err := other.AcquireWith(ctx, "jobs", time.Second, 0, client.Wait(1200*time.Millisecond)); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("acquire of a held key: %v, want a timeout", err)
	}
	select {
	case <-h.Done():
		t.Fatalf("hold ended: %v", h.Err())
	default:
	}
	q, err := other.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Held || q.Token != h.Token() || len(q.Holders) != 1 || q.Holders[0].Name() != "worker-7" {
		t.Fatalf("queue %+v: want the hold's token, named worker-7", q)
	}

	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, h, 10*time.Millisecond)
	if !errors.Is(h.Err(), client.ErrReleased) || !errors.Is(context.Cause(h.Context()), client.ErrReleased) {
		t.Fatalf("after Release: Err %v, cause %v", h.Err(), context.Cause(h.Context()))
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	l, err := other.AcquireWith(ctx, "jobs", time.Second, 0, client.Wait(0))
	if err != nil {
		t.Fatalf("the key after Release: %v", err)
	}
	if l.Token <= h.Token() {
		t.Fatalf("token %d after the hold's %d", l.Token, h.Token())
	}
}

// A lock released behind the hold's back (by its token, from another
// client) is lost at the next renewal: Done closes, Err says not held.
func TestHoldLostWhenTheNodeSaysNotHeld(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{})
	other := newClient(t, addr, client.Options{})
	ctx := context.Background()
	h, err := c.Hold(ctx, "jobs", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	broken := time.Now()
	if err := other.Release(ctx, "jobs", h.Token()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, h, time.Second)
	if took := time.Since(broken); took > 150*time.Millisecond {
		t.Errorf("noticed after %s, want at the next renewal (every 100ms)", took)
	}
	err = h.Err()
	if !errors.Is(err, client.ErrLost) || !errors.Is(err, client.ErrNotHeld) || !strings.Contains(err.Error(), "no longer holds") {
		t.Fatalf("Err %v: want ErrLost, ErrNotHeld", err)
	}
	if err := h.Release(ctx); !errors.Is(err, client.ErrLost) {
		t.Fatalf("Release of a lost hold: %v, want its Err", err)
	}
}

// MaxHold ends a hold whose holder never lets go, and the key is free
// when Done closes.
func TestHoldMaxHold(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{FailureTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	start := time.Now()
	h, err := c.Hold(ctx, "jobs", 200*time.Millisecond, client.MaxHold(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, h, 2*time.Second)
	took := time.Since(start)
	if !errors.Is(h.Err(), client.ErrMaxHold) {
		t.Fatalf("Err %v, want ErrMaxHold", h.Err())
	}
	if took < 450*time.Millisecond || took > 700*time.Millisecond {
		t.Errorf("done after %s, want about MaxHold, 500ms", took)
	}
	if _, err := c.AcquireWith(ctx, "jobs", time.Second, 0, client.Wait(100*time.Millisecond)); err != nil {
		t.Fatalf("the key after MaxHold: %v", err)
	}
}

// Closing the client ends its holds.
func TestHoldEndsWithClose(t *testing.T) {
	addr := startNode(t)
	c, err := client.New([]string{addr}, client.Options{FailureTimeout: testFT})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Hold(context.Background(), "jobs", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitDone(t, h, time.Second)
	if !errors.Is(h.Err(), client.ErrClosed) {
		t.Fatalf("Err %v, want ErrClosed", h.Err())
	}
}

// Wait bounds a hold's acquire; Wait(0) does not wait; a hold without
// Wait waits until its ctx ends.
func TestHoldWaits(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{})
	ctx := context.Background()
	h, err := c.Hold(ctx, "jobs", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	start := time.Now()
	if _, err := c.Hold(ctx, "jobs", time.Second, client.Wait(0)); !errors.Is(err, client.ErrHeld) || !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("Wait(0) on a held key: %v", err)
	}
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("Wait(0) took %s", took)
	}
	if _, err := c.Hold(ctx, "jobs", time.Second, client.Wait(100*time.Millisecond)); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("Wait(100ms) on a held key: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if _, err := c.Hold(cctx, "jobs", time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no Wait, ctx ended: %v", err)
	}
}

// A grant that came after a wait longer than a third of the lease is
// confirmed by a renewal, so the fresh hold has a lease ahead of it.
func TestHoldConfirmsALateGrant(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{})
	ctx := context.Background()
	first, err := c.Acquire(ctx, "jobs", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(400 * time.Millisecond)
		c.Release(ctx, "jobs", first.Token)
	}()
	asked := time.Now()
	h, err := c.Hold(ctx, "jobs", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	if !h.Expires().After(asked.Add(400 * time.Millisecond)) {
		t.Fatalf("expires %s after asking, want a lease from the confirming renewal", h.Expires().Sub(asked))
	}
}

// Option errors say what was wrong in the library's terms.
func TestHoldOptionErrors(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		opt  client.AcquireOption
		want string
	}{
		{client.Limit(0), "limit 0 is out of range"},
		{client.Limit(-3), "limit -3 is out of range"},
		{client.MaxHold(-time.Second), "MaxHold -1s is negative"},
	} {
		_, err := c.Hold(ctx, "jobs", time.Second, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("Hold: %v, want %q, matching ErrInvalidArgument", err, tc.want)
		}
		_, err = c.AcquireWith(ctx, "jobs", time.Second, 0, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AcquireWith: %v, want %q", err, tc.want)
		}
	}
}

// A full semaphore's timeout says its places are taken, a lock's that
// another client holds it; neither names a command-line flag, and Queue
// says a lock's limit is 1, as Lock does.
func TestTimeoutWordsAndQueueLimit(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{})
	ctx := context.Background()
	l, err := c.Acquire(ctx, "lock", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireWith(ctx, "sem", time.Minute, 0, client.Limit(1)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		opts []client.AcquireOption
		want string
	}{
		{"lock", []client.AcquireOption{client.Wait(50 * time.Millisecond)}, "another client holds the key"},
		{"sem", []client.AcquireOption{client.Limit(1), client.Wait(50 * time.Millisecond)}, "another client holds the key"},
		{"lock", []client.AcquireOption{client.Wait(0)}, "held by others; nothing was queued"},
	} {
		_, err := c.AcquireWith(ctx, tc.key, time.Minute, 0, tc.opts...)
		if !errors.Is(err, client.ErrTimeout) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "--") {
			t.Errorf("%s: %v, want %q and no flag", tc.key, err, tc.want)
		}
	}
	for range 2 {
		if _, err := c.AcquireWith(ctx, "three", time.Minute, 0, client.Limit(2)); err != nil {
			t.Fatal(err)
		}
	}
	for _, wait := range []time.Duration{0, 50 * time.Millisecond} {
		_, err = c.AcquireWith(ctx, "three", time.Minute, 0, client.Limit(2), client.Wait(wait))
		if !errors.Is(err, client.ErrTimeout) || !strings.Contains(err.Error(), "all 2 places of the semaphore are taken") {
			t.Errorf("full semaphore, Wait(%s): %v", wait, err)
		}
	}
	q, err := c.Queue(ctx, "lock")
	if err != nil || q.Limit != 1 || q.Token != l.Token || l.Limit != 1 {
		t.Errorf("queue of a lock: %+v %v, lock %+v: want limit 1 in both", q, err, l)
	}
}
