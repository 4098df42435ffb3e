package lockd_test

// TestMemoryRSS measures what a lockd process costs the machine, in
// resident memory (VmRSS of /proc/PID/status), as docs/benchmarks.md
// reports it:
//
//   - 1M held keys, acquired by pipelining clients;
//   - 100k waiters on one key, over 100 connections; and the same as
//     the official clients queue them (with ids and bounded waits), all
//     100 connections pipelining at once;
//   - an idle connection, after one acquire and release;
//   - RSS after the million keys are released, over a minute.
//
// Each figure is taken on a fresh node, for every binary named in
// LOCKD_MEM_BINS (space-separated, NAME=PATH or PATH), one after the other
// in the same run so that old and new builds are compared on the same
// machine at the same moment:
//
//	LOCKD_MEM_BINS="old=/tmp/old/lockd new=bin/lockd" go test -run TestMemoryRSS -v -timeout 30m .
//
// or `make bench-mem MEM_OLD=/tmp/old/lockd`. Without LOCKD_MEM_BINS the
// test is skipped: it takes minutes and a few hundred MB. LOCKD_MEM_KEYS,
// LOCKD_MEM_WAITERS, LOCKD_MEM_IDLE, LOCKD_MEM_FALL (seconds watched
// after the release) and LOCKD_MEM_SETTLE (seconds the idle connections
// are left idle) scale it down for a quick look.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type memBin struct{ name, path string }

func TestMemoryRSS(t *testing.T) {
	spec := os.Getenv("LOCKD_MEM_BINS")
	if spec == "" {
		t.Skip("LOCKD_MEM_BINS not set: it names the lockd binaries to measure (NAME=PATH ...)")
	}
	var bins []memBin
	for _, f := range strings.Fields(spec) {
		name, path, ok := strings.Cut(f, "=")
		if !ok {
			name, path = f, f
		}
		if path == "." || path == "built" {
			path = filepath.Join(binDir, "lockd")
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		bins = append(bins, memBin{name, abs})
	}
	keys := envInt(t, "LOCKD_MEM_KEYS", 1_000_000)
	waiters := envInt(t, "LOCKD_MEM_WAITERS", 100_000)
	idle := envInt(t, "LOCKD_MEM_IDLE", 5000)
	fall := time.Duration(envInt(t, "LOCKD_MEM_FALL", 60)) * time.Second
	settle := time.Duration(envInt(t, "LOCKD_MEM_SETTLE", 12)) * time.Second

	type result struct {
		base, held, heldPeak, released, waiters, clientWaiters, idleBefore, idleAfter int64
		freshBefore, freshAfter                                                       int64
		fallAt                                                                        time.Duration
		fallSeries                                                                    []int64
	}
	res := make([]result, len(bins))
	for i, b := range bins {
		r := &res[i]
		t.Logf("== %s (%s)", b.name, b.path)

		// Held keys, then their release.
		nd := startMemNode(t, b.path)
		r.base = nd.rss(t)
		tokens := nd.acquireAll(t, keys)
		r.held, r.heldPeak = nd.rss(t), nd.hwm(t)
		t.Logf("%s: %d held keys: RSS %s (peak %s), %.0f B/key over the idle node's %s", b.name, keys, mb(r.held), mb(r.heldPeak), float64(r.held-r.base)/float64(keys), mb(r.base))
		nd.releaseAll(t, tokens)
		start := time.Now()
		r.released = nd.rss(t)
		// Fallen back: within 25% of the rise above the idle node.
		target := r.base + (r.held-r.base)/4
		r.fallAt = -1
		for {
			rss := nd.rss(t)
			r.fallSeries = append(r.fallSeries, rss)
			if rss <= target && r.fallAt < 0 {
				r.fallAt = time.Since(start)
			}
			if time.Since(start) >= fall {
				break
			}
			time.Sleep(5 * time.Second)
		}
		var series []string
		for _, v := range r.fallSeries {
			series = append(series, mb(v))
		}
		when := "not in time"
		if r.fallAt >= 0 {
			when = "after " + r.fallAt.Round(time.Second).String()
		}
		t.Logf("%s: released: RSS %s, then every 5 s: %s; back under %s %s", b.name, mb(r.released), strings.Join(series, " "), mb(target), when)
		nd.stop(t)

		// Waiters on one key.
		nd = startMemNode(t, b.path)
		r.waiters = nd.queueWaiters(t, waiters, 100, false)
		t.Logf("%s: %d waiters on one key, 100 connections at once: RSS %s", b.name, waiters, mb(r.waiters))
		nd.stop(t)

		// Waiters as clients queue them.
		nd = startMemNode(t, b.path)
		r.clientWaiters = nd.queueWaiters(t, waiters, 100, true)
		t.Logf("%s: %d waiters with ids and 600 s waits, 100 connections at once: RSS %s", b.name, waiters, mb(r.clientWaiters))
		nd.stop(t)

		// Idle connections.
		nd = startMemNode(t, b.path)
		r.idleBefore, r.idleAfter = nd.idleConns(t, idle, settle)
		t.Logf("%s: %d idle connections: RSS %s -> %s, %.2f KB each", b.name, idle, mb(r.idleBefore), mb(r.idleAfter), float64(r.idleAfter-r.idleBefore)/1024/float64(idle))
		nd.stop(t)

		// Idle connections that never sent anything.
		nd = startMemNode(t, b.path)
		r.freshBefore, r.freshAfter = nd.freshConns(t, idle)
		t.Logf("%s: %d connections that never sent a request: RSS %s -> %s, %.2f KB each", b.name, idle, mb(r.freshBefore), mb(r.freshAfter), float64(r.freshAfter-r.freshBefore)/1024/float64(idle))
		nd.stop(t)
	}

	var out bytes.Buffer
	fmt.Fprintf(&out, "\n| measure |")
	for _, b := range bins {
		fmt.Fprintf(&out, " %s |", b.name)
	}
	if len(bins) == 2 {
		fmt.Fprintf(&out, " %s/%s |", bins[1].name, bins[0].name)
	}
	fmt.Fprintf(&out, "\n|---|")
	for range bins {
		fmt.Fprintf(&out, "---|")
	}
	if len(bins) == 2 {
		fmt.Fprintf(&out, "---|")
	}
	// A measure of -1 is "not in time", and has no ratio.
	row := func(name string, f func(r result) float64, unit string) {
		fmt.Fprintf(&out, "\n| %s |", name)
		for _, r := range res {
			if f(r) < 0 {
				fmt.Fprintf(&out, " not in time |")
				continue
			}
			fmt.Fprintf(&out, " %.1f %s |", f(r), unit)
		}
		if len(res) == 2 && f(res[0]) > 0 && f(res[1]) >= 0 {
			fmt.Fprintf(&out, " %.2f |", f(res[1])/f(res[0]))
		} else if len(res) == 2 {
			fmt.Fprintf(&out, " |")
		}
	}
	row(fmt.Sprintf("RSS, %d held keys", keys), func(r result) float64 { return float64(r.held) / (1 << 20) }, "MB")
	row("peak RSS (VmHWM), held keys", func(r result) float64 { return float64(r.heldPeak) / (1 << 20) }, "MB")
	row("per held key, over the idle node", func(r result) float64 { return float64(r.held-r.base) / float64(keys) }, "B")
	row(fmt.Sprintf("RSS, %d waiters on one key, 100 connections at once", waiters), func(r result) float64 { return float64(r.waiters) / (1 << 20) }, "MB")
	row(fmt.Sprintf("RSS, %d waiters with ids and 600 s waits, 100 connections at once", waiters), func(r result) float64 { return float64(r.clientWaiters) / (1 << 20) }, "MB")
	row("per idle connection, after an acquire and a release", func(r result) float64 { return float64(r.idleAfter-r.idleBefore) / 1024 / float64(idle) }, "KB")
	row("per idle connection, never used", func(r result) float64 { return float64(r.freshAfter-r.freshBefore) / 1024 / float64(idle) }, "KB")
	row("RSS just after releasing every key", func(r result) float64 { return float64(r.released) / (1 << 20) }, "MB")
	row(fmt.Sprintf("RSS %v after releasing", fall), func(r result) float64 { return float64(r.fallSeries[len(r.fallSeries)-1]) / (1 << 20) }, "MB")
	row("time until within 25% of the rise, watched every 5 s", func(r result) float64 {
		if r.fallAt < 0 {
			return -1
		}
		return r.fallAt.Seconds()
	}, "s")
	t.Log(out.String())
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}

func mb(b int64) string { return fmt.Sprintf("%.1fMB", float64(b)/(1<<20)) }

// memNode is one lockd process under measure.
type memNode struct {
	cmd     *exec.Cmd
	addr    string
	metrics string // the metrics listener, with LOCKD_MEM_DETAIL set
	done    chan struct{}
}

// startMemNode starts path on a free loopback port with limits raised for
// the measures, and waits until it answers.
func startMemNode(t *testing.T, path string) *memNode {
	t.Helper()
	for tries := 0; tries < 10; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		args := []string{"--listen", addr, "--log-level", logLevel(),
			"--max-keys", "2000000", "--max-waiters", "1000000", "--max-total-waiters", "2000000",
			"--max-conns", "100000", "--max-conns-per-ip", "0", "--max-conn-output", "64MiB", "--max-output", "1GiB"}
		metrics := ""
		if os.Getenv("LOCKD_MEM_DETAIL") != "" {
			ml, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			metrics = ml.Addr().String()
			ml.Close()
			args = append(args, "--metrics-listen", metrics)
		}
		cmd := exec.Command(path, args...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		nd := &memNode{cmd: cmd, addr: addr, metrics: metrics, done: make(chan struct{})}
		go func() { cmd.Wait(); close(nd.done) }()
		t.Cleanup(func() { nd.stop(t) })
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-nd.done:
				// Port taken meanwhile, most likely: another one.
				deadline = time.Time{}
				continue
			default:
			}
			if ans, err := askOnce(os.Getenv, addr, "S -"); err == nil && strings.HasPrefix(ans, "S - ") && strings.Contains(ans, "role=active") {
				return nd
			}
			time.Sleep(20 * time.Millisecond)
		}
		nd.stop(t)
	}
	t.Fatalf("%s did not start", path)
	return nil
}

func (nd *memNode) stop(t *testing.T) {
	select {
	case <-nd.done:
		return
	default:
	}
	nd.cmd.Process.Kill()
	<-nd.done
}

// status reads a field (VmRSS, VmHWM) of /proc/PID/status, in bytes.
func (nd *memNode) status(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", nd.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/PID/status", field)
	return 0
}

func (nd *memNode) rss(t *testing.T) int64 {
	t.Helper()
	rss := nd.status(t, "VmRSS")
	if nd.metrics != "" {
		nd.detail(t, rss)
	}
	return rss
}

// detail logs the Go runtime's view of the node's memory beside its RSS
// (LOCKD_MEM_DETAIL: it costs the node a metrics listener).
func (nd *memNode) detail(t *testing.T, rss int64) {
	t.Helper()
	resp, err := http.Get("http://" + nd.metrics + "/metrics")
	if err != nil {
		t.Logf("metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, m := range []string{"heap_inuse", "heap_alloc", "heap_idle", "heap_released", "stack_inuse", "next_gc", "sys", "mspan_inuse", "other_sys", "gc_sys"} {
			if rest, ok := strings.CutPrefix(line, "go_memstats_"+m+"_bytes "); ok {
				v, _ := strconv.ParseFloat(rest, 64)
				parts = append(parts, m+"="+mb(int64(v)))
			}
		}
		if rest, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			parts = append(parts, "goroutines="+rest)
		}
	}
	t.Logf("  RSS %s: %s", mb(rss), strings.Join(parts, " "))
}
func (nd *memNode) hwm(t *testing.T) int64 { return nd.status(t, "VmHWM") }

func (nd *memNode) dial(t *testing.T, size int) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", nd.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReaderSize(c, size)
}

// memConns is how many connections pipeline the held keys' acquires and
// releases, and memWindow how many requests each has in flight.
const (
	memConns  = 4
	memWindow = 2048
)

// pipeline sends req(i) for i in [lo, hi) on one connection, memWindow
// at a time, and hands each answer to check with its i.
func (nd *memNode) pipeline(t *testing.T, lo, hi int, req func(b []byte, i int) []byte, check func(i int, answer string) error) error {
	c, r := nd.dial(t, 64<<10)
	defer c.Close()
	var b []byte
	for i := lo; i < hi; i += memWindow {
		end := min(i+memWindow, hi)
		b = b[:0]
		for j := i; j < end; j++ {
			b = req(b, j)
		}
		c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := c.Write(b); err != nil {
			return err
		}
		for j := i; j < end; j++ {
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if err := check(j, strings.TrimSuffix(line, "\n")); err != nil {
				return err
			}
		}
	}
	return nil
}

// spread runs fn over [0, n) split among memConns goroutines.
func spread(t *testing.T, n int, fn func(lo, hi int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, memConns)
	for k := range memConns {
		lo, hi := n*k/memConns, n*(k+1)/memConns
		wg.Go(func() {
			if err := fn(lo, hi); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func memKey(b []byte, i int) []byte {
	b = append(b, "key-"...)
	return strconv.AppendInt(b, int64(i), 10)
}

// acquireAll acquires n keys, each with an hour's lease, and returns
// their tokens.
func (nd *memNode) acquireAll(t *testing.T, n int) []uint64 {
	tokens := make([]uint64, n)
	spread(t, n, func(lo, hi int) error {
		return nd.pipeline(t, lo, hi, func(b []byte, i int) []byte {
			b = append(b, "A "...)
			b = memKey(b, i)
			return append(b, " 3600 0\n"...)
		}, func(i int, ans string) error {
			f := strings.Fields(ans)
			if len(f) != 3 || f[0] != "A" || f[1] != string(memKey(nil, i)) {
				return fmt.Errorf("acquire %d: %q", i, ans)
			}
			tok, err := strconv.ParseUint(f[2], 10, 64)
			tokens[i] = tok
			return err
		})
	})
	return tokens
}

// releaseAll releases the keys acquireAll acquired.
func (nd *memNode) releaseAll(t *testing.T, tokens []uint64) {
	spread(t, len(tokens), func(lo, hi int) error {
		return nd.pipeline(t, lo, hi, func(b []byte, i int) []byte {
			b = append(b, "R "...)
			b = memKey(b, i)
			b = append(b, ' ')
			b = strconv.AppendUint(b, tokens[i], 10)
			return append(b, '\n')
		}, func(i int, ans string) error {
			if ans != "R "+string(memKey(nil, i))+" ok" {
				return fmt.Errorf("release %d: %q", i, ans)
			}
			return nil
		})
	})
}

// queueWaiters queues n acquires of one held key, pipelined on conns
// connections at once (every batch written before any answer is read),
// and returns the node's RSS 2 s after the last is queued. The acquires
// are bare (A hot 3600 0), or, withIDs, as the official clients send
// them: each with an id and a wait of 600 s.
func (nd *memNode) queueWaiters(t *testing.T, n, conns int, withIDs bool) int64 {
	c, r := nd.dial(t, 64<<10)
	defer c.Close()
	if _, err := c.Write([]byte("A hot 3600 0\n")); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "A hot ") {
		t.Fatalf("acquire hot: %q %v", line, err)
	}
	type wconn struct {
		c net.Conn
		r *bufio.Reader
	}
	ws := make([]wconn, conns)
	for k := range conns {
		wc, wr := nd.dial(t, 4096)
		defer wc.Close()
		ws[k] = wconn{wc, wr}
	}
	// Each connection's S is answered once its acquires before it are
	// applied (waiting acquires delay no later answer): no polling, and
	// no Q listing the queue while it grows.
	for k, w := range ws {
		var b []byte
		for j := range n*(k+1)/conns - n*k/conns {
			if withIDs {
				b = fmt.Appendf(b, "A hot 3600 600 id=w%d-%d\n", k, j)
			} else {
				b = append(b, "A hot 3600 0\n"...)
			}
		}
		b = append(b, "S -\n"...)
		w.c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := w.c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range ws {
		if line, err := w.r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "S - ") {
			t.Fatalf("status after the acquires: %q %v", line, err)
		}
	}
	time.Sleep(2 * time.Second)
	rss := nd.rss(t)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("Q hot\n")); err != nil {
		t.Fatal(err)
	}
	// Q hot TOKEN LEASELEFT NWAITERS ...
	line, err := r.ReadString('\n')
	if f := strings.Fields(line); err != nil || len(f) < 5 || f[4] != strconv.Itoa(n) {
		t.Fatalf("waiters not all queued: %q %v", line, err)
	}
	return rss
}

// idleConns opens n connections, each acquiring and releasing a key of
// its own once, and returns the node's RSS before and after, once every
// connection has had its answers.
func (nd *memNode) idleConns(t *testing.T, n int, settle time.Duration) (before, after int64) {
	// Warm the node up first with the same work on one connection, so
	// that what follows is what connections cost, not first use.
	c, r := nd.dial(t, 256)
	for i := range 100 {
		cycle(t, c, r, "warm-"+strconv.Itoa(i))
	}
	c.Close()
	before = nd.rss(t)
	for i := range n {
		c, r := nd.dial(t, 256)
		defer c.Close()
		cycle(t, c, r, "idle-"+strconv.Itoa(i))
	}
	// An idle connection is one that has been idle a while: lockd moves
	// a reader idle for 5 s to a new goroutine with a small stack. Watch
	// RSS for a while after the last connection's answers.
	after = nd.rss(t)
	for end := time.Now().Add(settle); time.Now().Before(end); {
		time.Sleep(time.Second)
		after = nd.rss(t)
	}
	return before, after
}

// freshConns opens n connections that send nothing, and returns the
// node's RSS before and after, once it holds still (the node has taken
// them all).
func (nd *memNode) freshConns(t *testing.T, n int) (before, after int64) {
	before = nd.rss(t)
	for range n {
		c, _ := nd.dial(t, 16)
		defer c.Close()
	}
	after = nd.rss(t)
	for still := 0; still < 5; {
		time.Sleep(200 * time.Millisecond)
		now := nd.rss(t)
		if now == after {
			still++
		} else {
			still = 0
		}
		after = now
	}
	return before, after
}

func cycle(t *testing.T, c net.Conn, r *bufio.Reader, key string) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("A " + key + " 30 0\n")); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 3 || f[0] != "A" {
		t.Fatalf("acquire %s: %q %v", key, line, err)
	}
	if _, err := c.Write([]byte("R " + key + " " + f[2] + "\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || !strings.HasSuffix(line, " ok\n") {
		t.Fatalf("release %s: %q %v", key, line, err)
	}
}

// logLevel is the measured nodes' log level: LOCKD_MEM_LOG, or error.
func logLevel() string {
	if l := os.Getenv("LOCKD_MEM_LOG"); l != "" {
		return l
	}
	return "error"
}
