package metrics_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lockd-io/lockd/cluster"
	"github.com/lockd-io/lockd/cluster/metrics"
	"github.com/lockd-io/lockd/engine"
)

// node is a running cluster.Node and the HTTP handler of its metrics.
type node struct {
	*cluster.Node
	http http.Handler
}

func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}

// start runs a node with cfg until the test ends, and waits until it
// serves.
func start(t *testing.T, cfg cluster.Config) *node {
	t.Helper()
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 50 * time.Millisecond
	}
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("node", cfg.Listen)
	n, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the node to serve", func() bool { return n.Health().Running })
	return &node{Node: n, http: metrics.Handler(n, metrics.NewRegistry(n, "test"))}
}

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

// get serves one GET of path.
func (n *node) get(path string) (int, string) {
	rec := httptest.NewRecorder()
	n.http.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

// scrape reads /metrics with the Prometheus text parser: it fails the
// test unless the exposition is valid.
func (n *node) scrape(t *testing.T) families {
	t.Helper()
	code, body := n.get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not valid Prometheus text: %v\n%s", err, body)
	}
	return fams
}

type families map[string]*dto.MetricFamily

// value is the value of the series name{labels} (a histogram's or
// summary's: its count), and whether it exists.
func (f families) value(name string, labels ...string) (float64, bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch fam.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		case dto.MetricType_SUMMARY:
			return float64(m.GetSummary().GetSampleCount()), true
		}
	}
	return 0, false
}

func (f families) want(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := f.value(name, labels...)
	if !ok {
		t.Errorf("%s%v: no such series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %g, want %g", name, labels, got, want)
	}
}

// wire is a raw protocol connection, as nc makes.
type wire struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dial(t *testing.T, addr string) *wire {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &wire{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// ask sends line and returns the submatches of the answer against re.
func (w *wire) ask(line, re string) []string {
	w.t.Helper()
	if line != "" {
		if _, err := io.WriteString(w.nc, line+"\n"); err != nil {
			w.t.Fatal(err)
		}
	}
	if re == "" {
		return nil
	}
	w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := w.r.ReadString('\n')
	if err != nil {
		w.t.Fatalf("after %q: %v", line, err)
	}
	m := regexp.MustCompile("^" + re + "\n$").FindStringSubmatch(got)
	if m == nil {
		w.t.Fatalf("after %q: got %q, want %s", line, got, re)
	}
	return m
}

// TestExpositionAfterTraffic drives a single node through every outcome
// of an acquire and a release, then checks the exposition parses and
// counts what happened.
func TestExpositionAfterTraffic(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	n := start(t, cluster.Config{Listen: addr, Engine: engine.Config{MaxKeys: 2}})

	a, b, c := dial(t, addr), dial(t, addr), dial(t, addr)
	tok := a.ask("A k1 30 0", `A k1 (\d+)`)[1]
	b.ask("A k1 30 0.2", `T k1`) // waited 0.2 s: timeout
	b.ask("A k1 30 0", "")       // waits, until a releases
	waitFor(t, "b to wait", func() bool { return n.Metrics().Waiters == 1 })
	c.ask("A k1 30 0", "") // waits behind b, until its connection closes
	waitFor(t, "two waiters", func() bool { return n.Metrics().Waiters == 2 })
	time.Sleep(30 * time.Millisecond)               // so that b's wait is measurable
	a.ask("R k1 "+tok, "R k1 ok")                   // hands k1 to b
	tok = b.ask("", `A k1 (\d+)`)[1]                // waited >= 30 ms
	a.ask("R k1 1", "R k1 notheld")                 // wrong token
	a.ask("A k2 30 0", `A k2 \d+`)                  // the second key
	a.ask("A k3 30 0", `E k3 A: too many keys: .*`) // over --max-keys 2
	a.ask("A k1 0 0", `E k1 A: lease must be .*`)   // bad lease
	a.ask("Q k1", `Q k1 `+tok+` .*`)                // inspect
	a.ask("Z k1", `E k1 Z: unknown op .*`)          // no such op
	c.nc.Close()                                    // its waiter leaves: cancelled
	waitFor(t, "the waiter to leave", func() bool { return n.Metrics().Waiters == 0 })

	f := n.scrape(t)
	f.want(t, 3, "lockd_requests_total", "op", "acquire", "outcome", "granted")
	f.want(t, 1, "lockd_requests_total", "op", "acquire", "outcome", "timeout")
	f.want(t, 2, "lockd_requests_total", "op", "acquire", "outcome", "error")
	f.want(t, 1, "lockd_requests_total", "op", "acquire", "outcome", "cancelled")
	f.want(t, 1, "lockd_requests_total", "op", "release", "outcome", "ok")
	f.want(t, 1, "lockd_requests_total", "op", "release", "outcome", "notheld")
	f.want(t, 1, "lockd_requests_total", "op", "queue", "outcome", "ok")
	f.want(t, 1, "lockd_requests_total", "op", "invalid", "outcome", "error")
	f.want(t, 3, "lockd_grants_total")
	f.want(t, 1, "lockd_releases_total")
	f.want(t, 1, "lockd_timeouts_total")
	f.want(t, 2, "lockd_locks_held")
	f.want(t, 0, "lockd_waiters")
	f.want(t, 1, "lockd_limit_hits_total", "limit", "max_keys")
	f.want(t, 0, "lockd_limit_hits_total", "limit", "max_waiters")
	f.want(t, 1, "lockd_role", "role", "active")
	f.want(t, 0, "lockd_role", "role", "standby")
	f.want(t, 2, "lockd_connections_open")
	f.want(t, 0, "lockd_no_active_seconds")
	f.want(t, 1, "lockd_build_info", "version", "test")
	// Waits are counted for grants only: two at once, one after >= 30 ms.
	f.want(t, 3, "lockd_acquire_wait_seconds")
	w := f["lockd_acquire_wait_seconds"].GetMetric()[0].GetHistogram()
	if s := w.GetSampleSum(); s < 0.03 || s > 5 {
		t.Errorf("acquire wait sum %gs, want the one wait of >= 30 ms", s)
	}
	for _, bk := range w.GetBucket() {
		if bk.GetUpperBound() == 0.001 && bk.GetCumulativeCount() != 2 {
			t.Errorf("acquire waits <= 1ms: %d, want the 2 granted at once", bk.GetCumulativeCount())
		}
	}
	// One batch in 8 of a connection is timed, its first included: a's
	// first acquire. b's and c's first acquires waited: their time is in
	// the wait histogram instead.
	f.want(t, 1, "lockd_request_duration_seconds")
	epoch, _ := f.value("lockd_token_epoch")
	if now := float64(time.Now().UnixMilli()); epoch < now-60_000 || epoch > now+1000 {
		t.Errorf("lockd_token_epoch %g, want about now (%g) in Unix ms", epoch, now)
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if f[name] == nil {
			t.Errorf("%s missing: the Go and process collectors are registered", name)
		}
	}
	if code, body := n.get("/readyz"); code != 200 || body != "ready: active\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if code, body := n.get("/healthz"); code != 200 || body != "ok: serving as active\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
}

// TestClusterMetricsAndProbes runs two nodes: the standby syncs and is
// ready, the active reports its lag, a handoff moves the counters, the
// role gauges and what /readyz says.
func TestClusterMetricsAndProbes(t *testing.T) {
	addrs := freeAddrs(t, 2)
	a := start(t, cluster.Config{Listen: addrs[0], Peers: addrs})
	b := start(t, cluster.Config{Listen: addrs[1], Peers: addrs})
	ready := func(n *node, body string) func() bool {
		return func() bool { code, got := n.get("/readyz"); return code == 200 && got == body }
	}
	waitFor(t, "a active", ready(a, "ready: active\n"))
	waitFor(t, "b a caught-up standby", ready(b, "ready: standby, caught up with the active "+addrs[0]+" (0 records behind)\n"))

	w := dial(t, addrs[0])
	for _, k := range []string{"x", "y", "z"} {
		w.ask("A "+k+" 30 0", `A `+k+` \d+`)
	}
	waitFor(t, "b to hold the replicated locks", func() bool { return b.Metrics().HeldLocks == 3 })
	waitFor(t, "a to hear b's position", func() bool {
		p := a.Metrics().Peers
		return len(p) == 1 && p[0].HasLag && p[0].LagRecords == 0
	})
	f := a.scrape(t)
	f.want(t, 1, "lockd_peer_up", "peer", addrs[1])
	f.want(t, 0, "lockd_replication_lag_records", "standby", addrs[1])
	f.want(t, 0, "lockd_replication_lag_seconds", "standby", addrs[1])
	f.want(t, 1, "lockd_snapshot_duration_seconds")
	f.want(t, 3, "lockd_replication_seq")
	g := b.scrape(t)
	g.want(t, 1, "lockd_role", "role", "standby")
	g.want(t, 3, "lockd_locks_held")
	if _, ok := g.value("lockd_replication_lag_records"); ok {
		t.Error("a standby reports replication lag: only the active knows every standby's")
	}

	w.ask("H move", `H move ok `+regexp.QuoteMeta(addrs[1]))
	waitFor(t, "b active", ready(b, "ready: active\n"))
	waitFor(t, "a a caught-up standby of b", ready(a, "ready: standby, caught up with the active "+addrs[1]+" (0 records behind)\n"))
	f, g = a.scrape(t), b.scrape(t)
	f.want(t, 1, "lockd_handoffs_given_total", "reason", "command")
	f.want(t, 1, "lockd_role", "role", "standby")
	f.want(t, 0, "lockd_role", "role", "active")
	g.want(t, 1, "lockd_handoffs_taken_total")
	g.want(t, 1, "lockd_role", "role", "active")
	w.ask("A x 30 0", `M x `+regexp.QuoteMeta(addrs[1]))
	f = a.scrape(t)
	f.want(t, 1, "lockd_requests_total", "op", "acquire", "outcome", "moved")
	f.want(t, 1, "lockd_requests_total", "op", "handoff", "outcome", "ok")
}

// TestNotReadyWhileJoining: a node whose higher-priority peer accepts
// connections and never answers waits a failure timeout to hear it
// before it takes a role: alive, and not ready.
func TestNotReadyWhileJoining(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			nc, err := silent.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
		}
	}()
	addr := freeAddrs(t, 1)[0]
	n := start(t, cluster.Config{Listen: addr, Peers: []string{silent.Addr().String(), addr}, FailureTimeout: 5 * time.Second})
	if code, body := n.get("/readyz"); code != 503 || body != "not ready: joining: still learning who is active\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if code, _ := n.get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d, want 200: the node serves its role", code)
	}
	n.scrape(t).want(t, 1, "lockd_role", "role", "joining")
}

// TestProbesAfterStop: a node that stopped is neither alive nor ready.
func TestProbesAfterStop(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	n, err := cluster.New(cluster.Config{Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	h := metrics.Handler(n, metrics.NewRegistry(n, "test"))
	probe := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := probe("/healthz"); code != 503 || !strings.HasPrefix(body, "unhealthy: not serving") {
		t.Errorf("before Run, /healthz: %d %q", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	waitFor(t, "the node to serve", func() bool { return n.Health().Running })
	if code, _ := probe("/healthz"); code != 200 {
		t.Errorf("running, /healthz: %d", code)
	}
	cancel()
	<-done
	if code, body := probe("/readyz"); code != 503 || !strings.HasPrefix(body, "not ready: not serving") {
		t.Errorf("after stop, /readyz: %d %q", code, body)
	}
}

// TestWaitersOfOneConnection: acquires of one key pipelined on one
// connection are each matched with their own grant, in order.
func TestWaitersOfOneConnection(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	n := start(t, cluster.Config{Listen: addr})
	a, w := dial(t, addr), dial(t, addr)
	tok := a.ask("A h 30 0", `A h (\d+)`)[1]
	if _, err := io.WriteString(w.nc, "A h 30 0\nA h 30 0\nA h 30 0\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three waiters", func() bool { return n.Metrics().Waiters == 3 })
	a.ask("R h "+tok, "R h ok")
	tok = w.ask("", `A h (\d+)`)[1]
	for i := 0; i < 2; i++ {
		// A release hands h to the next waiter, answered first.
		next := w.ask("R h "+tok, `A h (\d+)`)[1]
		w.ask("", "R h ok")
		tok = next
	}
	w.ask("R h "+tok, "R h ok")
	w.nc.Close()
	waitFor(t, "w to close", func() bool { return n.Metrics().ConnsOpen == 1 })
	f := n.scrape(t)
	f.want(t, 4, "lockd_requests_total", "op", "acquire", "outcome", "granted")
	f.want(t, 4, "lockd_requests_total", "op", "release", "outcome", "ok")
	f.want(t, 4, "lockd_acquire_wait_seconds")
	if _, ok := f.value("lockd_requests_total", "op", "acquire", "outcome", "cancelled"); ok {
		t.Error("a waiter counted as cancelled: its grant was not matched to it")
	}
}

// countingSource counts the reads of a node's metrics.
type countingSource struct {
	metrics.Source
	reads atomic.Int64
}

func (c *countingSource) Metrics() cluster.Metrics {
	c.reads.Add(1)
	return c.Source.Metrics()
}

// Scrapes as fast as a client can send them read the node's metrics (and
// the runtime's, and take its mutex) at most once per interval of the
// paced handler lockd serves: the others get that rendering, valid.
func TestScrapesArePaced(t *testing.T) {
	const every = 200 * time.Millisecond
	n := start(t, cluster.Config{Listen: freeAddrs(t, 1)[0]})
	src := &countingSource{Source: n.Node}
	h := metrics.PacedHandler(src, metrics.NewRegistry(src, "test"), every)
	paced := &node{Node: n.Node, http: h}
	begin := time.Now()
	const scrapes = 500
	for range scrapes {
		paced.scrape(t).want(t, 1, "lockd_role", "role", "active")
	}
	took := time.Since(begin)
	// One rendering at the start of each interval the scrapes spanned.
	most := int64(took/every) + 1
	if got := src.reads.Load(); got > most {
		t.Fatalf("%d scrapes in %v read the metrics %d times; want at most %d, once per %v", scrapes, took, got, most, every)
	}
	// Values move on once an interval has passed.
	w := dial(t, n.Addr())
	w.ask("A k 30 0", `A k \d+`)
	waitFor(t, "the scrapes to show the lock held", func() bool {
		v, ok := paced.scrape(t).value("lockd_locks_held")
		return ok && v == 1
	})
}
