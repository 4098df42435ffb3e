package cluster

// What a client is told holds: every request is answered, even across a
// shutdown, and an answer lost with its connection can be had again.

import (
	"bufio"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SIGINT of the active under load: every request a plain-protocol client
// sends it is answered (A, R, or M to the new active), none met with EOF,
// even those sent in the last moment before the handoff. Each worker is a
// raw connection that acquires and releases until it is redirected.
func TestShutdownAnswersEveryRequest(t *testing.T) {
	addrs := freeAddrs(t, 2)
	a := startNode(t, addrs[0], addrs)
	b := startNode(t, addrs[1], addrs)
	waitFor(t, "a active, b synced", func() bool { return a.roleIs(Active) && b.isSynced() })

	const workers = 32
	var sent, answered, moved, unanswered atomic.Int64
	var wg sync.WaitGroup
	var firstErr sync.Once
	for i := range workers {
		nc, err := net.Dial("tcp", addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			r := bufio.NewReader(nc)
			ask := func(line string) (string, bool) {
				sent.Add(1)
				if _, err := fmt.Fprintf(nc, "%s\n", line); err != nil {
					// The node closed first: the request never left,
					// which a client sees as a failed write.
					sent.Add(-1)
					return "", false
				}
				nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				ans, err := r.ReadString('\n')
				if err != nil {
					unanswered.Add(1)
					firstErr.Do(func() { t.Errorf("%q got no answer: %v", line, err) })
					return "", false
				}
				answered.Add(1)
				if strings.HasPrefix(ans, "M ") {
					moved.Add(1)
					return ans, false
				}
				return ans, true
			}
			key := fmt.Sprintf("job-%d", i)
			for {
				ans, ok := ask("A " + key + " 5 0")
				if !ok {
					return
				}
				f := strings.Fields(ans)
				if len(f) != 3 || f[0] != "A" {
					t.Errorf("acquire answered %q", ans)
					return
				}
				if _, ok := ask("R " + key + " " + f[2]); !ok {
					return
				}
			}
		}()
	}
	waitFor(t, "traffic", func() bool { return answered.Load() > 2000 })
	a.shutdown()
	wg.Wait()
	if !b.roleIs(Active) {
		t.Error("b is not active after the handoff")
	}
	t.Logf("%d requests, %d answered (%d with M), %d unanswered", sent.Load(), answered.Load(), moved.Load(), unanswered.Load())
	if unanswered.Load() > 0 {
		t.Fatalf("%d requests were not answered", unanswered.Load())
	}
	if moved.Load() != workers {
		t.Fatalf("%d workers were redirected, want all %d", moved.Load(), workers)
	}
}

// An acquire whose answer is lost with its connection is sent again with
// the same id: it gets the grant it was already given (same token), on
// the same node or, after a crash, on the node that took over, instead of
// queueing behind its own grant until the lease runs out.
func TestResentAcquireGetsItsGrant(t *testing.T) {
	playsFaults(t)
	addrs := freeAddrs(t, 2)
	a := startNode(t, addrs[0], addrs)
	b := startNode(t, addrs[1], addrs)
	waitFor(t, "a active, b in sync", func() bool { return a.roleIs(Active) && b.isSynced() })

	first := dialWire(t, addrs[0])
	first.send("A deploy 30 0 id=job-1")
	tok := first.expect(`A deploy (\d+)`)[1]
	first.nc.Close() // the answer "never arrived"

	again := dialWire(t, addrs[0])
	again.send("A deploy 30 0 id=job-1")
	again.expect(`A deploy ` + tok)
	// Another acquire queues behind it, as it should.
	again.send("A deploy 30 0.1 id=job-2")
	again.expect(`T deploy`)

	// A second grant, whose answer is lost too, and the active crashes.
	again.send("A backup 30 0 id=job-3")
	tok2 := again.expect(`A backup (\d+)`)[1]
	a.crash()
	waitFor(t, "b active", func() bool { return b.roleIs(Active) })
	onB := dialWire(t, addrs[1])
	onB.send("A backup 30 0 id=job-3", "A deploy 30 0 id=job-1")
	onB.expect(`A backup ` + tok2)
	onB.expect(`A deploy ` + tok)
	onB.send("R deploy "+tok, "R backup "+tok2)
	onB.expect(`R deploy ok`)
	onB.expect(`R backup ok`)
}

// After a failover a client may re-send, on one connection, a waiting
// acquire of a key before the acquire that already holds it (each call
// re-sends on its own). The held one is answered at once, not behind the
// waiter, which waits for it: the two would otherwise stall until the
// lease ran out, and the grant arrive after the next holder's.
func TestResentGrantNotStuckBehindAWaiter(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	first := dialWire(t, addr)
	first.send("A k 30 0 id=one")
	tok := first.expect(`A k (\d+)`)[1]
	first.nc.Close()

	c := dialWire(t, addr)
	c.send("A k 30 0 id=two", "A k 30 0 id=one")
	c.expect(`A k ` + tok)
	// The release hands the key to the waiter: its grant and the
	// release's answer, in either order (they differ in op).
	c.send("R k " + tok)
	got := c.expect(`[AR] k \S+`)[0] + " / " + c.expect(`[AR] k \S+`)[0]
	if !regexp.MustCompile(`^(R k ok / A k \d+|A k \d+ / R k ok)$`).MatchString(got) {
		t.Fatalf("after the release: %s", got)
	}
}
