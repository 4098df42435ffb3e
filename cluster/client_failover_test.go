package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// crash stops tn the way kill -9 would: no handoff, every socket closed
// at once.
func (tn *testNode) crash() {
	tn.play(faultCrash)
	tn.mu.Lock()
	tn.closing = true
	conns := make([]*conn, 0, len(tn.conns))
	for _, c := range tn.conns {
		conns = append(conns, c)
	}
	tn.mu.Unlock()
	tn.ln.Close()
	for _, c := range conns {
		c.out.closeSocket() // a reader inside its read holds the socket (rawIO.close)
	}
	tn.stop()
	<-tn.done
}

// workload runs acquire/release cycles from many goroutines through one
// client until stopped, counting cycles and errors per phase.
type workload struct {
	cycles atomic.Int64
	mu     sync.Mutex
	errs   []error
	stop   chan struct{}
	wg     sync.WaitGroup
	last   sync.Map // key -> last token granted
}

func runWorkload(t *testing.T, c *client.Client, workers, keys int) *workload {
	w := &workload{stop: make(chan struct{})}
	for i := 0; i < workers; i++ {
		w.wg.Add(1)
		go func(i int) {
			defer w.wg.Done()
			key := fmt.Sprintf("job-%d", i%keys)
			for {
				select {
				case <-w.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				lk, err := c.Acquire(ctx, key, 5*time.Second, 0)
				if err == nil {
					if prev, ok := w.last.Load(key); ok && lk.Token <= prev.(uint64) {
						err = fmt.Errorf("token %d for %s not above the previous %d", lk.Token, key, prev)
					}
					w.last.Store(key, lk.Token)
				}
				if err == nil {
					err = c.Release(ctx, key, lk.Token)
				}
				cancel()
				if err != nil {
					w.mu.Lock()
					w.errs = append(w.errs, err)
					w.mu.Unlock()
					continue
				}
				w.cycles.Add(1)
			}
		}(i)
	}
	return w
}

func (w *workload) take() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	errs := w.errs
	w.errs = nil
	return errs
}

// progress waits until n more cycles complete.
func (w *workload) progress(t *testing.T, what string, n int64) {
	t.Helper()
	start := w.cycles.Load()
	waitFor(t, what, func() bool { return w.cycles.Load() >= start+n })
}

func TestClientFollowsHandoffAndFailover(t *testing.T) {
	playsFaults(t)
	addrs := freeAddrs(t, 3)
	a := startNode(t, addrs[0], addrs)
	b := startNode(t, addrs[1], addrs)
	c := startNode(t, addrs[2], addrs)
	waitFor(t, "a active, b and c synced", func() bool {
		return a.roleIs(Active) && b.isSynced() && c.isSynced()
	})
	cl, err := client.New(addrs, client.Options{Redial: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	w := runWorkload(t, cl, 32, 8)
	defer func() {
		close(w.stop)
		w.wg.Wait()
	}()
	w.progress(t, "cycles on a", 200)

	// Graceful handoff (what Ctrl+C does): not one error reaches a caller.
	a.shutdown()
	waitFor(t, "b active", func() bool { return b.roleIs(Active) })
	w.progress(t, "cycles on b", 200)
	if cl.Active() != addrs[1] {
		t.Errorf("client believes %q is active, want %s", cl.Active(), addrs[1])
	}
	if errs := w.take(); len(errs) > 0 {
		t.Fatalf("%d errors reached callers across the handoff, first: %v", len(errs), errs[0])
	}

	// A crash: the client moves to c. Grants b made but had not yet
	// replicated can be lost, so a release may find its token no longer
	// holds the key; nothing else may go wrong.
	b.crash()
	waitFor(t, "c active", func() bool { return c.roleIs(Active) })
	w.progress(t, "cycles on c", 200)
	if cl.Active() != addrs[2] {
		t.Errorf("client believes %q is active, want %s", cl.Active(), addrs[2])
	}
	for _, err := range w.take() {
		if !errors.Is(err, client.ErrNotHeld) {
			t.Errorf("unexpected error across the failover: %v", err)
		}
	}
}
