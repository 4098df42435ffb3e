package cluster

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// freeAddrs returns n distinct free 127.0.0.1 addresses.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

type testNode struct {
	*Node
	t    testing.TB
	stop context.CancelFunc
	done chan struct{}
}

func startNode(t *testing.T, listen string, peers []string) *testNode {
	t.Helper()
	return startNodeWith(t, listen, peers, nil)
}

// startNodeWith starts a node whose configuration set changes first.
func startNodeWith(t *testing.T, listen string, peers []string, set func(*Config)) *testNode {
	t.Helper()
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	cfg := Config{
		Listen:         listen,
		Peers:          peers,
		Heartbeat:      50 * time.Millisecond,
		FailureTimeout: time.Second,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("node", listen),
	}
	if set != nil {
		set(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tn := &testNode{Node: n, t: t, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(tn.done)
		n.Run(ctx)
	}()
	t.Cleanup(tn.shutdown)
	return tn
}

// shutdown stops the node gracefully and waits until it has.
func (tn *testNode) shutdown() {
	tn.stop()
	<-tn.done
	tn.forget()
}

func (tn *testNode) isSynced() bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.core.Synced()
}

// degraded reports whether the node, active in sync mode, counts no
// standby in sync: its answers do not wait for one.
func (tn *testNode) degraded() bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.core.Status(time.Now()).Degraded
}

func (tn *testNode) roleIs(r Role) bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.core.Role() == r
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statusAnswered counts the status requests the node answered.
func (tn *testNode) statusAnswered() (n uint64) {
	tn.applyMu.Lock()
	defer tn.applyMu.Unlock()
	for _, k := range tn.stats.requests[opIndex[proto.OpStatus]] {
		n += k
	}
	return n
}

// waitStatusAnswered waits until answered counts total status requests
// or more: more when a client of another test, whose dead address this
// node's port was a moment before, dials it and asks S too.
func waitStatusAnswered(t *testing.T, answered func() uint64, total uint64) {
	t.Helper()
	waitFor(t, "every status request answered", func() bool { return answered() >= total })
}

// wire is a raw protocol connection, like nc.
type wire struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialWire(t *testing.T, addr string) *wire {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &wire{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (w *wire) send(lines ...string) {
	w.t.Helper()
	if _, err := w.nc.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		w.t.Fatal(err)
	}
}

// expect reads the next line and matches it against pattern, returning
// the submatches.
func (w *wire) expect(pattern string) []string {
	w.t.Helper()
	w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := w.r.ReadString('\n')
	if err != nil {
		w.t.Fatalf("want a line matching %q: %v", pattern, err)
	}
	line = strings.TrimRight(line, "\n")
	m := regexp.MustCompile("^" + pattern + "$").FindStringSubmatch(line)
	if m == nil {
		w.t.Fatalf("got %q, want %q", line, pattern)
	}
	return m
}

// silent asserts that nothing arrives for d.
func (w *wire) silent(d time.Duration) {
	w.t.Helper()
	w.nc.SetReadDeadline(time.Now().Add(d))
	if line, err := w.r.ReadString('\n'); err == nil {
		w.t.Fatalf("want silence, got %q", line)
	}
	w.r = bufio.NewReader(w.nc)
}

func TestSameOpKeyAnsweredInSendOrder(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	holder := dialWire(t, addr)
	holder.send("A k 30 0")
	tok := holder.expect(`A k (\d+)`)[1]

	c := dialWire(t, addr)
	// The second acquire's wait ends first, but its T must not overtake
	// the first acquire's answer: a client matches same (op, key) answers
	// in send order.
	c.send("A k 30 5", "A k 30 0.05", "A other 30 0")
	c.expect(`A other \d+`)
	c.silent(200 * time.Millisecond)
	holder.send("R k " + tok)
	holder.expect(`R k ok`)
	c.expect(`A k \d+`)
	c.expect(`T k`)
}

func TestWaitingAcquireDoesNotDelayLaterAnswers(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	c := dialWire(t, addr)
	c.send("A k 30 0", "A k 30 0", "Q k", "S -", "R k 1")
	c.expect(`A k \d+`)
	c.expect(`Q k \d+ 30 1 0(\.\d+)?,127\.0\.0\.1:\d+`)
	c.expect(`S - self=.* role=active .*`)
	c.expect(`R k notheld`)
}

func TestOverlongLineClosesOnlyThatConnection(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	other := dialWire(t, addr)
	other.send("A k 30 0")
	other.expect(`A k \d+`)

	bad := dialWire(t, addr)
	bad.send("A " + strings.Repeat("x", 5000) + " 30 0")
	bad.expect(`E - \?: line longer than 4096 bytes; closing this connection`)
	bad.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bad.r.ReadString('\n'); err == nil {
		t.Fatal("connection still open after an over-long line")
	}
	other.send("Q k")
	other.expect(`Q k \d+ .*`)
}

func TestClosedWaiterLeavesQueue(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	h := dialWire(t, addr)
	h.send("A k 30 0")
	tok := h.expect(`A k (\d+)`)[1]
	gone := dialWire(t, addr)
	gone.send("A k 30 0")
	next := dialWire(t, addr)
	next.send("A k 30 0")
	waitFor(t, "two waiters", func() bool {
		h.send("Q k")
		return strings.Contains(h.expect(`Q k .*`)[0], " 2 ")
	})
	gone.nc.Close()
	waitFor(t, "the closed waiter to leave", func() bool {
		h.send("Q k")
		return strings.Contains(h.expect(`Q k .*`)[0], " 1 ")
	})
	h.send("R k " + tok)
	h.expect(`R k ok`)
	next.expect(`A k \d+`)
}

func TestClusterRolesFailoverAndHandoff(t *testing.T) {
	addrs := freeAddrs(t, 3)
	a := startNode(t, addrs[0], addrs)
	b := startNode(t, addrs[1], addrs)
	c := startNode(t, addrs[2], addrs)
	waitFor(t, "a active", func() bool { return a.roleIs(Active) })
	waitFor(t, "b, c following a", func() bool {
		return b.roleIs(Standby) && c.roleIs(Standby) && b.isSynced() && c.isSynced()
	})

	w := dialWire(t, addrs[1])
	w.send("A k 30 0")
	w.expect(fmt.Sprintf(`M k %s`, regexp.QuoteMeta(addrs[0])))

	wa := dialWire(t, addrs[0])
	wa.send("A k 30 0")
	tok := wa.expect(`A k (\d+)`)[1]
	waitFor(t, "b to replicate the grant", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.core.HighWater() > 0
	})

	// Graceful shutdown of the active: b takes over with the lock held.
	a.shutdown()
	waitFor(t, "b active", func() bool { return b.roleIs(Active) })
	wb := dialWire(t, addrs[1])
	wb.send("A k 30 0.1")
	wb.expect(`T k`)
	wb.send("R k " + tok)
	wb.expect(`R k ok`)
	wb.send("A k 30 0")
	tok2 := wb.expect(`A k (\d+)`)[1]
	if mustUint(t, tok2) <= mustUint(t, tok) {
		t.Fatalf("token after handoff %s not above %s", tok2, tok)
	}
	waitFor(t, "c following b", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.core.Active() == addrs[1]
	})
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPeerMessagesOnlyFromPeers(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	c := dialWire(t, addr)
	c.send("A t 30 0")
	tok := mustUint(t, c.expect(`A t (\d+)`)[1])
	// A forged heartbeat would otherwise push the token epoch to the
	// end of the u64 range, and the next token would wrap to 1.
	c.send("P evil standby 18446744073709551615 0 -", "Y evil 18446744073709551615")
	c.expect(`E evil P: evil is not a peer of this node .*`)
	c.expect(`E evil Y: evil is not a peer of this node .*`)
	c.send("A u 30 0")
	if next := mustUint(t, c.expect(`A u (\d+)`)[1]); next <= tok {
		t.Fatalf("token %d after %d", next, tok)
	}
}

func TestMalformedAcquireWaitsItsTurn(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	h := dialWire(t, addr)
	h.send("A k 30 0")
	tok := h.expect(`A k (\d+)`)[1]
	c := dialWire(t, addr)
	// The refusal of the second acquire is matched by (A, k): it must
	// come after the answer to the first, which waits.
	c.send("A k 30 0", "A k 0 10")
	c.silent(100 * time.Millisecond)
	h.send("R k " + tok)
	c.expect(`A k \d+`)
	c.expect(`E k A: lease must be greater than 0 seconds`)
}

// A client may send a large batch while it reads the answers (a script
// piping a file into nc): the server keeps up however large the batch.
func TestLargeBatchPiped(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const n = 150_000
	pad := strings.Repeat("x", 40)
	var batch strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&batch, "A key-%d-%s 60 0\n", i, pad)
	}
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	werr := make(chan error, 1)
	go func() {
		_, err := nc.Write([]byte(batch.String()))
		werr <- err
	}()
	r := bufio.NewReader(nc)
	for i := 0; i < n; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if !strings.HasPrefix(line, "A key-") {
			t.Fatalf("answer %d: %q", i, line)
		}
	}
	if err := <-werr; err != nil {
		t.Fatalf("writing the batch: %v", err)
	}
}

// A client that sends and never reads stops being read once its unread
// answers pass readPauseAt: the node holds a bounded amount for it, and
// serves everyone else meanwhile.
func TestClientThatNeverReadsIsPaused(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	tn := startNode(t, addr, nil)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go func() {
		line := []byte("S -\n")
		var buf []byte
		for range 4096 {
			buf = append(buf, line...)
		}
		for {
			if _, err := nc.Write(buf); err != nil {
				return
			}
		}
	}()
	// Wait for the node to stop reading it: its queue stops growing.
	deadline := time.Now().Add(20 * time.Second)
	var last int64 = -1
	for {
		q := tn.output.bytes.Load()
		if q > readPauseAt && q == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node kept reading a client that does not read: %d bytes queued", q)
		}
		last = q
		time.Sleep(200 * time.Millisecond)
	}
	if q := tn.output.bytes.Load(); q > readPauseAt+2<<20 {
		t.Fatalf("%d bytes queued for one client, want about %d", q, readPauseAt)
	}
	h := dialWire(t, addr)
	h.send("A other 30 0")
	h.expect(`A other \d+`)
}
