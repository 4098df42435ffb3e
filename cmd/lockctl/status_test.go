package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cluster"
	"github.com/lockd-io/lockd/cmd/internal/survey"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// testCluster is a lockd cluster running in the test process.
type testCluster struct {
	addrs []string
	stops []func() // by node, in the order of addrs
}

// startCluster starts n nodes on free loopback ports with fast heartbeats
// and waits until the first is active and the others are caught-up
// standbys.
func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	tc := &testCluster{addrs: freeLoopbackAddrs(t, n)}
	var peers []string
	if n > 1 {
		peers = tc.addrs
	}
	for _, a := range tc.addrs {
		node, err := cluster.New(cluster.Config{
			Listen:         a,
			Peers:          peers,
			Heartbeat:      50 * time.Millisecond,
			FailureTimeout: time.Second,
			Logger:         testLogger(a),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := node.Listen(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			node.Run(ctx)
		}()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); <-done }) }
		tc.stops = append(tc.stops, stop)
		t.Cleanup(stop)
	}
	tc.waitSettled(t, tc.addrs[0])
	return tc
}

// testLogger shows the nodes' logs with go test -v, and nothing otherwise.
func testLogger(node string) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", node)
}

// waitSettled waits until active is active and every other live node is
// a standby that has applied the active's latest change. A change is made
// first (a lock taken and released), so that a standby that has not
// subscribed to the active's stream yet cannot pass for caught up.
func (tc *testCluster) waitSettled(t *testing.T, active string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	changed := false
	for {
		ok := false
		if st, err := client.Status(context.Background(), active); err == nil && st.Role == survey.RoleActive {
			if !changed {
				tc.touch(t, active)
				changed = true
				continue
			}
			ok = st.Seq > 0
			for _, a := range tc.addrs {
				if a == active {
					continue
				}
				sb, err := client.Status(context.Background(), a)
				if err != nil {
					continue // stopped by the test
				}
				if sb.Role != survey.RoleStandby || sb.Active != active || sb.Seq != st.Seq {
					ok = false
				}
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster did not settle with %s active", active)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// touch takes and releases a lock on active, a change for the standbys
// to replicate.
func (tc *testCluster) touch(t *testing.T, active string) {
	t.Helper()
	cl, err := client.New([]string{active}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := cl.Acquire(ctx, "settle", time.Second, 0)
	if err != nil {
		t.Fatalf("taking a lock on %s: %v", active, err)
	}
	if err := cl.Release(ctx, "settle", l.Token); err != nil {
		t.Fatalf("releasing a lock on %s: %v", active, err)
	}
}

func (tc *testCluster) addrList() string { return strings.Join(tc.addrs, ",") }

func freeLoopbackAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.Addr().String())
		defer l.Close()
	}
	return out
}

// fakeStatus answers status questions from a table; an address missing
// from it refuses the connection.
func fakeStatus(table map[string]proto.Status) survey.StatusFunc {
	return func(ctx context.Context, addr string) (proto.Status, error) {
		if st, ok := table[addr]; ok {
			return st, nil
		}
		return proto.Status{}, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
}

func threeNodes(active string) map[string]proto.Status {
	addrs := []string{"10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"}
	var peers []proto.PeerStatus
	for _, a := range addrs {
		role := survey.RoleStandby
		if a == active {
			role = survey.RoleActive
		}
		peers = append(peers, proto.PeerStatus{Addr: a, Role: role, Reachable: true, Token: 42})
	}
	table := make(map[string]proto.Status)
	for _, a := range addrs {
		role := survey.RoleStandby
		if a == active {
			role = survey.RoleActive
		}
		table[a] = proto.Status{Self: a, Role: role, Active: active, Token: 42, Uptime: time.Minute, Peers: peers}
	}
	return table
}

func TestBuildViewUnreachableAndSplitBrain(t *testing.T) {
	table := threeNodes("10.0.0.1:7070")
	delete(table, "10.0.0.3:7070")
	v := survey.Run(context.Background(), []string{"10.0.0.3:7070", "10.0.0.2:7070"}, fakeStatus(table))
	if v.Answered != 2 || v.Nodes[2].Reachable || v.Nodes[2].Addr != "10.0.0.3:7070" {
		t.Fatalf("view: %+v", v)
	}
	// Its peers still see it: its role comes from them.
	if v.Nodes[2].Role != survey.RoleStandby || !errors.Is(v.Nodes[2].Err, syscall.ECONNREFUSED) {
		t.Errorf("unreachable node: %+v", v.Nodes[2])
	}

	split := threeNodes("10.0.0.1:7070")
	st := split["10.0.0.3:7070"]
	st.Role, st.Active = survey.RoleActive, "10.0.0.3:7070"
	split["10.0.0.3:7070"] = st
	v = survey.Run(context.Background(), []string{"10.0.0.3:7070"}, fakeStatus(split))
	if len(v.Claims) != 2 || v.Active != "10.0.0.1:7070" {
		t.Errorf("split brain: claims %v, active %q (want the higher priority)", v.Claims, v.Active)
	}
	var b strings.Builder
	renderStatus(&b, v, renderStyle{Table: true})
	if !strings.Contains(b.String(), "2 nodes claim the active role") {
		t.Errorf("no split-brain warning:\n%s", b.String())
	}
}

// A node that took the connection and said nothing (frozen) is not
// shown active on its peers' word, which lags by their failure timeout:
// it is unresponsive, nobody is active, and the summary says why.
func TestBuildViewFrozenActive(t *testing.T) {
	table := threeNodes("10.0.0.1:7070")
	ask := func(ctx context.Context, addr string) (proto.Status, error) {
		if addr == "10.0.0.1:7070" {
			return proto.Status{}, fmt.Errorf("status %s: %w: it took the connection, but answered nothing in time", addr, client.ErrNoAnswer)
		}
		return fakeStatus(table)(ctx, addr)
	}
	v := survey.Run(context.Background(), []string{"10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"}, ask)
	if v.Active != "" || v.Silent != "10.0.0.1:7070" || len(v.Claims) != 0 {
		t.Fatalf("active %q, silent %q, claims %v", v.Active, v.Silent, v.Claims)
	}
	if n := v.Nodes[0]; n.Role != survey.RoleUnresponsive || n.Reachable {
		t.Errorf("the frozen node: %+v", n)
	}
	var b strings.Builder
	renderStatus(&b, v, renderStyle{Table: true})
	if !strings.Contains(b.String(), "the active 10.0.0.1:7070 does not answer") {
		t.Errorf("summary:\n%s", b.String())
	}
	js := statusJSONOf(v, clusterProblems(v, defaultMaxLag), time.Time{})
	if js.Active != nil || js.Healthy || js.Nodes[0].Role != survey.RoleUnresponsive {
		t.Errorf("JSON: active %v, healthy %v, role %q", js.Active, js.Healthy, js.Nodes[0].Role)
	}
}

func TestWaitActiveFake(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	ask := func(ctx context.Context, addr string) (proto.Status, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls < 3 {
			return proto.Status{Self: addr, Role: survey.RoleStandby, Active: "x:1"}, nil
		}
		return proto.Status{Self: addr, Role: survey.RoleActive}, nil
	}
	var out, errb strings.Builder
	g := &globals{Stdout: &out, Stderr: &errb, AddrList: "a:1"}
	if err := waitActive(context.Background(), g, ask, "a:1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "a:1 is active (waited ") {
		t.Errorf("output %q", out.String())
	}
	never := func(ctx context.Context, addr string) (proto.Status, error) {
		return proto.Status{Self: addr, Role: survey.RoleStandby, Active: "b:2"}, nil
	}
	err := waitActive(context.Background(), g, never, "a:1", 200*time.Millisecond)
	if exitCode(err) != exitFailed || !strings.Contains(err.Error(), "role=standby, active=b:2") {
		t.Errorf("timeout error: %v (code %d)", err, exitCode(err))
	}
}

func TestStatusCommand(t *testing.T) {
	tc := startCluster(t, 3)
	a, b, c := tc.addrs[0], tc.addrs[1], tc.addrs[2]

	// Asking one node is enough: the others are found through it.
	code, out, errOut := lockctl(t, "--addr", b, "status")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("escape codes in piped output:\n%q", out)
	}
	// The nodes' lines end at a blank line; the role changes follow.
	nodes, _, _ := strings.Cut(out, "\n\n")
	lines := strings.Split(strings.TrimSpace(nodes), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], a+" ") || !strings.Contains(lines[1], " active ") {
		t.Fatalf("status output:\n%s", out)
	}

	code, out, _ = lockctl(t, "--addr", c, "status", "--json")
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
	}
	if st.Active == nil || *st.Active != a || len(st.Nodes) != 3 {
		t.Fatalf("status --json: %s", out)
	}
	for i, n := range st.Nodes {
		if n.Addr != tc.addrs[i] || n.Priority == nil || *n.Priority != i+1 || !n.Reachable || n.Lag == nil || n.UptimeSeconds == nil {
			t.Errorf("node %d: %+v", i, n)
		}
	}

	// Colour forced on colours plain text when piped, without changing
	// its layout; -o table draws the person's view.
	// NO_COLOR does not override an explicit --color always.
	t.Setenv("NO_COLOR", "1")
	code, out, _ = lockctl(t, "--addr", a, "--color", "always", "status")
	if code != 0 || !strings.Contains(out, "\x1b[") || strings.Contains(out, "●") || strings.Contains(out, "nodes reachable") {
		t.Errorf("--color always: exit %d\n%s", code, out)
	}
	code, out, _ = lockctl(t, "--addr", a, "-o", "table", "status")
	if code != 0 || strings.Contains(out, "\x1b[") || !strings.Contains(out, "●  "+a) || !strings.Contains(out, "3 of 3 nodes reachable") {
		t.Errorf("-o table: exit %d\n%s", code, out)
	}

	// After a failover the next node is active, and the dead one shows
	// as unreachable without failing the command.
	tc.stops[0]()
	code, _, errOut = lockctl(t, "--addr", tc.addrList(), "status", "--wait-active", b, "--timeout", "10s")
	if code != 0 {
		t.Fatalf("--wait-active %s after the active stopped: exit %d: %s", b, code, errOut)
	}
	code, out, _ = lockctl(t, "--addr", tc.addrList(), "status", "--json")
	st = statusJSON{}
	json.Unmarshal([]byte(out), &st)
	if code != 0 || st.Active == nil || *st.Active != b || st.Nodes[0].Reachable || st.Nodes[0].Error == nil {
		t.Errorf("after failover: exit %d\n%s", code, out)
	}

	code, _, errOut = lockctl(t, "--addr", tc.addrList(), "status", "--wait-active", c, "--timeout", "300ms")
	if code != exitFailed || !strings.Contains(errOut, c+" did not become active within 300ms") {
		t.Errorf("--wait-active a standby: exit %d: %s", code, errOut)
	}
}

func TestStatusNoNodeExit4(t *testing.T) {
	addr := freeLoopbackAddrs(t, 1)[0]
	code, out, errOut := lockctl(t, "--addr", addr, "status")
	if code != exitUnavailable || out != "" || !strings.Contains(errOut, "cannot reach lockd at "+addr) || !strings.Contains(errOut, "lockd") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestStatusUsage(t *testing.T) {
	for _, args := range [][]string{
		{"status", "--watch", "--wait-active", "127.0.0.1:1"},
		{"status", "--interval", "2s"},
		{"status", "--timeout", "0s"},
		{"status", "--wait-active", "nope"},
		{"status", "extra"},
	} {
		if code, _, errOut := lockctl(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2: %s", args, code, errOut)
		}
	}
}

func TestStatusWatchPiped(t *testing.T) {
	tc := startCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out, errb strings.Builder
	code := run(ctx, []string{"lockctl", "--addr", tc.addrs[0], "status", "--watch", "--interval", "100ms"}, strings.NewReader(""), &syncWriter{w: &out}, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// Piped, every line carries the time of its
	// survey, and the header comes once.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "TIME ") || strings.Contains(out.String(), "\x1b[") {
		t.Fatalf("want a TIME header and timestamped lines, got:\n%s", out.String())
	}
	cols := strings.Index(lines[0], "NODE")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if _, err := time.Parse(time.RFC3339, f[0]); err != nil || f[1] != tc.addrs[0] || strings.Index(l, tc.addrs[0]) != cols {
			t.Errorf("line %q: want the time, then the node under NODE", l)
		}
	}
}

// syncWriter lets a test read what a command writes from another
// goroutine.
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// hostileCluster is three nodes whose addresses and roles must not reach
// a terminal raw: two claim the active role, lockctl cannot reach the
// third, which its peers call by a role of its own.
func hostileCluster() survey.View {
	a, b, c := "10.0.0.1:7070\u202e", "10.0.0.2:"+c1, sgr+":7070"
	peers := []proto.PeerStatus{
		{Addr: a, Role: survey.RoleActive, Reachable: true, Token: tokA},
		{Addr: b, Role: survey.RoleStandby, Reachable: true, Lag: 3, Token: tokB},
		{Addr: c, Role: "stand\u2066by", Reachable: true},
	}
	return survey.Build([]survey.Answer{
		{Asked: a, Status: proto.Status{Self: a, Role: survey.RoleActive, Active: a, Token: tokA, Uptime: time.Hour, Peers: peers}},
		{Asked: b, Status: proto.Status{Self: b, Role: survey.RoleActive, Active: b, Token: tokB, Uptime: time.Minute, Peers: peers}},
		{Asked: c, Err: syscall.ECONNREFUSED},
	})
}

func TestStatusNeverPrintsAHostileRune(t *testing.T) {
	fixedWidths(t)
	v := hostileCluster()
	words := []string{v.Nodes[0].Addr, v.Nodes[1].Addr, v.Nodes[2].Addr, v.Nodes[2].Role}
	for _, style := range []renderStyle{{}, {Table: true}, {Table: true, Color: true}} {
		var b bytes.Buffer
		if err := renderStatus(&b, v, style); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		assertNoHostileBytes(t, fmt.Sprintf("%+v", style), out, style.Color, words...)
		for _, want := range []string{`10.0.0.1:7070\u202e`, `10.0.0.2:nel\u0085csi\u009b`, `\x1b[31mred:7070`, `stand\u2066by`} {
			if !strings.Contains(out, want) {
				t.Errorf("%+v lacks %s:\n%s", style, want, out)
			}
		}
		if style.Table && !strings.Contains(out, `2 nodes claim the active role (10.0.0.1:7070\u202e, 10.0.0.2:nel\u0085csi\u009b)`) {
			t.Errorf("summary:\n%s", out)
		}
		if !style.Table {
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != 4 || !strings.HasPrefix(lines[1], "10.0.0.1:7070\\u202e ") {
				t.Errorf("plain:\n%s", out)
			}
		}
	}
	var b bytes.Buffer
	if err := printJSON(&b, statusJSONOf(v, clusterProblems(v, defaultMaxLag), time.Time{})); err != nil {
		t.Fatal(err)
	}
	assertNoHostileBytes(t, "JSON", b.String(), false)
	var got statusJSON
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if *got.Active != v.Active || got.Nodes[1].Addr != v.Nodes[1].Addr || got.Nodes[2].Role != v.Nodes[2].Role || got.Nodes[2].Addr != v.Nodes[2].Addr {
		t.Errorf("JSON does not read back exactly: %s", b.String())
	}
}

func TestWaitActiveEscapesWhatNodesSay(t *testing.T) {
	never := func(ctx context.Context, addr string) (proto.Status, error) {
		return proto.Status{Self: addr, Role: "stand\u202eby", Active: sgr + ":1"}, nil
	}
	var out, errb strings.Builder
	g := &globals{Stdout: &out, Stderr: &errb, AddrList: "a:1"}
	err := waitActive(context.Background(), g, never, "a:1"+c1, 50*time.Millisecond)
	var b bytes.Buffer
	reportError(&b, err)
	assertNoHostileBytes(t, "error", b.String(), false, c1, sgr)
	if !strings.Contains(b.String(), `lockctl: a:1nel\u0085csi\u009b did not become active within 50ms (last seen: role=stand\u202eby, active=\x1b[31mred:1)`) {
		t.Errorf("error %q", b.String())
	}
	active := func(ctx context.Context, addr string) (proto.Status, error) {
		return proto.Status{Self: addr, Role: survey.RoleActive}, nil
	}
	if err := waitActive(context.Background(), g, active, rlo+":1", time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), `deploy\u202e:1 is active (waited `) {
		t.Errorf("output %q", out.String())
	}
}

// A node that reports hostile words of itself and of a peer: lockctl
// status prints them escaped, and --json exactly.
func TestStatusCommandHostileNode(t *testing.T) {
	role := "\x1b[2Jstandby\u202e"
	peer := "127.0.0.1:1" + rlo // not a port: the dial fails at once
	addr := startHostile(t, func(self string, req proto.Request) []byte {
		return proto.AppendStatus(nil, req.Key, proto.Status{Self: self, Role: role, Active: peer, Uptime: time.Second,
			Peers: []proto.PeerStatus{{Addr: self, Role: role, Reachable: true}, {Addr: peer, Role: survey.RoleActive, Reachable: true}}})
	})
	code, out, errOut := lockctl(t, "--addr", addr, "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	assertNoHostileBytes(t, "status", out, false, role, peer)
	if !strings.Contains(out, `\x1b[2Jstandby\u202e`) || !strings.Contains(out, `127.0.0.1:1deploy\u202e`) {
		t.Errorf("status:\n%s", out)
	}
	code, out, _ = lockctl(t, "--addr", addr, "status", "--json")
	var got statusJSON
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("--json: exit %d %v: %s", code, err, out)
	}
	assertNoHostileBytes(t, "--json", out, false)
	if got.Active == nil || *got.Active != peer || len(got.Nodes) != 2 || got.Nodes[0].Role != role || got.Nodes[1].Addr != peer {
		t.Errorf("--json: %s", out)
	}
}

// The summary says the standbys are caught up only when there is an
// active they caught up with: with none, or with one that does not
// answer, "no active node · standbys caught up" read as a cluster that
// was fine.
func TestSummaryCaughtUpOnlyWithAnActive(t *testing.T) {
	standby := func(addr string) survey.Node {
		return survey.Node{Addr: addr, Role: survey.RoleStandby, Reachable: true, HasLag: true}
	}
	p := newPalette(io.Discard, false)
	for _, tc := range []struct {
		name   string
		v      survey.View
		caught bool
	}{
		{"no active", survey.View{Nodes: []survey.Node{standby("10.0.0.1:7070"), standby("10.0.0.2:7070")}}, false},
		{"a silent active", survey.View{Silent: "10.0.0.1:7070", Nodes: []survey.Node{
			{Addr: "10.0.0.1:7070", Role: survey.RoleUnresponsive}, standby("10.0.0.2:7070")}}, false},
		{"an active", survey.View{Active: "10.0.0.1:7070", Claims: []string{"10.0.0.1:7070"}, Nodes: []survey.Node{
			{Addr: "10.0.0.1:7070", Role: survey.RoleActive, Reachable: true}, standby("10.0.0.2:7070")}}, true},
	} {
		got := statusSummary(tc.v, p, renderStyle{})
		if strings.Contains(got, "caught up") != tc.caught {
			t.Errorf("%s: %q; want caught up said: %v", tc.name, got, tc.caught)
		}
	}
}

// Status --check is a health check: exit 1, with each
// problem named, when a node is down, a standby lags, the active is
// degraded, or there is no single active; the same problems are in the
// JSON.
func TestStatusCheckProblems(t *testing.T) {
	v := sampleCluster()
	degraded := "10.0.0.1:7070 is degraded: no standby is in sync with it, so a crash of it may lose what it answered last"
	got := clusterProblems(v, defaultMaxLag)
	if len(got) != 2 || got[0] != degraded || got[1] != "10.0.0.3:7070 is down" {
		t.Errorf("problems %q, want the degraded active and the down node", got)
	}
	if got := clusterProblems(v, 2); len(got) != 3 || got[1] != "10.0.0.2:7070 is 3 changes behind the active (more than 2)" {
		t.Errorf("with --max-lag 2: %q", got)
	}
	if got := clusterProblems(hostileCluster(), defaultMaxLag); len(got) < 1 || !strings.HasPrefix(got[0], `2 nodes claim the active role (10.0.0.1:7070\u202e, `) {
		t.Errorf("split brain: %q", got)
	}
	var none survey.View
	none.Nodes = []survey.Node{{Addr: "a:1", Role: survey.RoleStandby, Reachable: true}}
	if got := clusterProblems(none, defaultMaxLag); len(got) != 1 || got[0] != "no node is active" {
		t.Errorf("no active: %q", got)
	}
}

func TestStatusCheckCommand(t *testing.T) {
	tc := startCluster(t, 3)
	tc.waitSettled(t, tc.addrs[0])
	code, out, errOut := lockctl(t, "--addr", tc.addrList(), "status", "--check")
	if code != 0 || errOut != "" || !strings.Contains(out, " active ") {
		t.Fatalf("healthy cluster: exit %d\n%s%s", code, out, errOut)
	}
	tc.stops[2]()
	code, out, errOut = lockctl(t, "--addr", tc.addrList(), "status", "--check")
	if code != exitFailed || !strings.HasPrefix(errOut, "lockctl: status --check: "+tc.addrs[2]) || !strings.Contains(out, tc.addrs[2]) {
		t.Errorf("a node down: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = lockctl(t, "--addr", tc.addrList(), "status", "--check", "--json")
	var st statusJSON
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &st); code != exitFailed || err != nil || st.Healthy || len(st.Problems) != 1 {
		t.Errorf("--json: exit %d, %v\n%s", code, err, out)
	}
	// -w is not --watch any more: etcdctl's users read it as --write-out.
	if code, _, errOut := lockctl(t, "--addr", tc.addrList(), "status", "-w"); code != exitUsage {
		t.Errorf("status -w: exit %d, %s", code, errOut)
	}
}
