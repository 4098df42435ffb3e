package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olekukonko/tablewriter/pkg/twwidth"

	"github.com/lockd-io/lockd/cmd/internal/survey"
	"github.com/lockd-io/lockd/proto"
)

// go test ./cmd/lockctl -run Golden -update rewrites the golden files from
// what the code draws now; review the diff before committing it.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// golden compares got with testdata/golden/name, or rewrites it with
// -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with: go test ./cmd/lockctl -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what is drawn now (if the change is meant, run: go test ./cmd/lockctl -run %s -update)\n--- got\n%s\n--- want\n%s",
			path, t.Name(), got, want)
	}
}

// fixedWidths makes table widths independent of the locale the tests run
// in: a CJK locale would draw ambiguous-width symbols two columns wide.
func fixedWidths(t *testing.T) {
	t.Helper()
	twwidth.SetEastAsian(false)
}

const (
	tokA = 7360982537641984001
	tokB = 7360982537641983990
)

// sampleCluster is a three-node cluster seen from its active: the second
// node is catching up, the third is down, so the active (sync mode) has no
// standby in sync: it is degraded.
func sampleCluster() survey.View {
	a, b, c := "10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"
	peers := []proto.PeerStatus{
		{Addr: a, Role: "active", Reachable: true, Seq: 120, Token: tokA},
		{Addr: b, Role: "standby", Reachable: true, Seq: 117, Lag: 3, Token: tokB},
		{Addr: c, Role: "down"},
	}
	return survey.Build([]survey.Answer{
		{Asked: a, Status: proto.Status{Self: a, Role: "active", Active: a, Token: tokA, Seq: 120,
			Uptime: 26*time.Hour + 3*time.Minute, Replication: "sync", Degraded: true, Durability: "disk:batch", Peers: peers}},
		{Asked: b, Status: proto.Status{Self: b, Role: "standby", Active: a, Token: tokB, Seq: 117,
			Uptime: 3*time.Minute + 7*time.Second, Sticky: true, Replication: "sync", Durability: "memory", Peers: peers}},
		{Asked: c, Err: syscall.ECONNREFUSED},
	})
}

// sampleQueues are a lock held by a client without a name, a lock held
// and waited on by named lockctls, a semaphore of three places with two
// holders and a waiter, and a key only waited on.
func sampleQueues() []proto.Queue {
	return []proto.Queue{
		{Key: "backup", Held: true, Token: tokB, LeaseLeft: 12 * time.Second},
		{Key: "builds", Held: true, Token: tokB + 1, LeaseLeft: 58200 * time.Millisecond, Limit: 3,
			Holders: []proto.QueueHolder{
				{Token: tokB + 1, LeaseLeft: 58200 * time.Millisecond, ID: "ci@runner-1:811#9f3c2a7d1e5b6a70-1"},
				{Token: tokB + 2, LeaseLeft: 41 * time.Second, ID: "ci@runner-2:77#0c1d2e3f40516273-1"},
			}},
		{Key: "deploy", Held: true, Token: tokA, LeaseLeft: 29500 * time.Millisecond,
			Holders: []proto.QueueHolder{{Token: tokA, LeaseLeft: 29500 * time.Millisecond, ID: "alice@ci-1:4242#5e6f708192a3b4c5-1"}},
			Waiters: []proto.QueueWaiter{
				{Waited: 14200 * time.Millisecond, Addr: "10.0.0.9:51234", ID: "bob@ci-2:7#a3b4c5d6e7f80912-1"},
				{Waited: 400 * time.Millisecond, Addr: "10.0.0.7:40112"},
			}},
		{Key: "jobs/nightly", Waiters: []proto.QueueWaiter{{Waited: 2 * time.Second}}},
	}
}

func TestGoldenStatus(t *testing.T) {
	fixedWidths(t)
	for _, tc := range []struct {
		file  string
		style renderStyle
	}{
		{"status_color.golden", renderStyle{Table: true, Color: true, Width: 80}},
		{"status_table.golden", renderStyle{Table: true, Width: 80}},
		{"status_plain.golden", renderStyle{}},
		{"status_wide.golden", renderStyle{Wide: true}},
		{"status_ascii.golden", renderStyle{Table: true, Width: 80, ASCII: true}},
	} {
		var b bytes.Buffer
		if err := renderStatus(&b, sampleCluster(), tc.style); err != nil {
			t.Fatal(err)
		}
		if !tc.style.Color && bytes.Contains(b.Bytes(), []byte("\x1b[")) {
			t.Errorf("%s: escape code without colour:\n%q", tc.file, b.String())
		}
		if tc.style.Color && !bytes.Contains(b.Bytes(), []byte("\x1b[")) {
			t.Errorf("%s: no colour with colour forced on", tc.file)
		}
		golden(t, tc.file, b.Bytes())
	}
	var b bytes.Buffer
	if err := printJSON(&b, statusJSONOf(sampleCluster(), clusterProblems(sampleCluster(), defaultMaxLag), time.Time{})); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.json.golden", b.Bytes())
}

func TestGoldenQueues(t *testing.T) {
	fixedWidths(t)
	for _, tc := range []struct {
		file  string
		style renderStyle
	}{
		{"queues_color.golden", renderStyle{Table: true, Color: true, Width: 80}},
		{"queues_table.golden", renderStyle{Table: true, Width: 80}},
		{"queues_plain.golden", renderStyle{}},
		{"queues_wide.golden", renderStyle{Wide: true}},
	} {
		var b bytes.Buffer
		if err := renderQueues(&b, infos(sampleQueues()), 4, tc.style); err != nil {
			t.Fatal(err)
		}
		if !tc.style.Color && bytes.Contains(b.Bytes(), []byte("\x1b[")) {
			t.Errorf("%s: escape code without colour:\n%q", tc.file, b.String())
		}
		golden(t, tc.file, b.Bytes())
	}
	var b bytes.Buffer
	if err := printJSON(&b, queuesJSONOf(infos(sampleQueues()), 4)); err != nil {
		t.Fatal(err)
	}
	golden(t, "queues.json.golden", b.Bytes())
}

// An empty list draws nothing (the command says so on
// stderr, on a terminal only), so that `| wc -l` counts 0.
func TestQueuesEmpty(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"*", "no keys are held or waited on"},
		{"jobs/*", "no keys starting with \"jobs/\" are held or waited on"},
		{"deploy", "\"deploy\" is neither held nor waited on"},
	} {
		for _, style := range []renderStyle{{}, {Table: true, Color: true}} {
			var b bytes.Buffer
			if err := renderQueues(&b, nil, 0, style); err != nil {
				t.Fatal(err)
			}
			if b.Len() != 0 {
				t.Errorf("pattern %q: drew %q, want nothing", tc.pattern, b.String())
			}
		}
		if got := emptyQueues(tc.pattern); got != tc.want {
			t.Errorf("pattern %q: says %q, want %q", tc.pattern, got, tc.want)
		}
	}
	var b bytes.Buffer
	printJSON(&b, queuesJSONOf(nil, 0))
	if got := b.String(); got != "{\"keys\":[],\"total\":0}\n" {
		t.Errorf("empty JSON: %s", got)
	}
}

// Plain output is awk-safe: one word per header, the
// same number of fields on every line, field 1 the node or the key, no
// trailing spaces; --no-headers leaves the header out.
func TestPlainOutputIsAwkSafe(t *testing.T) {
	for _, tc := range []struct {
		name   string
		draw   func(b *bytes.Buffer, s renderStyle)
		fields int
		first  []string
	}{
		{"status", func(b *bytes.Buffer, s renderStyle) { renderStatus(b, sampleCluster(), s) }, 7,
			[]string{"NODE", "10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"}},
		{"queues", func(b *bytes.Buffer, s renderStyle) { renderQueues(b, infos(sampleQueues()), 4, s) }, 8,
			[]string{"KEY", "backup", "builds", "builds", "deploy", "deploy", "jobs/nightly"}},
	} {
		for _, noHeaders := range []bool{false, true} {
			var b bytes.Buffer
			tc.draw(&b, renderStyle{NoHeaders: noHeaders})
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			want := tc.first
			if noHeaders {
				want = want[1:]
			}
			if len(lines) != len(want) {
				t.Fatalf("%s (no headers %v): %d lines, want %d:\n%s", tc.name, noHeaders, len(lines), len(want), b.String())
			}
			for i, l := range lines {
				f := strings.Fields(l)
				if len(f) != tc.fields || f[0] != want[i] || strings.HasSuffix(l, " ") {
					t.Errorf("%s: line %q: %d fields, first %q; want %d fields, first %q, no trailing space", tc.name, l, len(f), f[0], tc.fields, want[i])
				}
			}
		}
	}
}

// A table for a person fits the terminal's
// width (80 columns when it is unknown), cutting long keys and addresses
// with an ellipsis, and draws ASCII only when the terminal cannot show
// more; wide cuts nothing.
func TestTablesFitTheWidth(t *testing.T) {
	fixedWidths(t)
	long := sampleCluster()
	for i := range long.Nodes {
		long.Nodes[i].Addr = "lockd-" + strconv.Itoa(i+1) + ".eu-west-1.compute.internal:7070"
		long.Nodes[i].Sticky = true
	}
	if len(long.Claims) > 0 {
		long.Claims[0] = long.Nodes[0].Addr
	}
	queues := append(hostileQueues(), proto.Queue{Key: strings.Repeat("k", 200), Held: true, Token: tokA,
		Waiters: []proto.QueueWaiter{{Waited: time.Second, Addr: "[2001:db8:85a3::8a2e:370:7334]:51234"}}})
	for _, width := range []int{80} {
		for _, ascii := range []bool{false, true} {
			s := renderStyle{Table: true, Width: width, ASCII: ascii}
			for name, draw := range map[string]func(*bytes.Buffer){
				"status": func(b *bytes.Buffer) { renderStatus(b, long, s) },
				"queues": func(b *bytes.Buffer) { renderQueues(b, infos(queues), len(queues), s) },
			} {
				var b bytes.Buffer
				draw(&b)
				// Every line: the table's, and the summary under it, whose
				// words are wrapped at spaces rather than by the terminal.
				lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
				for _, l := range lines {
					if twwidth.Width(l) > width {
						t.Errorf("%s at %d columns: line %d wide:\n%s", name, width, twwidth.Width(l), l)
					}
					if ascii && strings.ContainsAny(l, "●·…") {
						t.Errorf("%s with ASCII only: %q", name, l)
					}
				}
				if !strings.Contains(b.String(), s.ellipsis()) {
					t.Errorf("%s at %d columns: nothing cut:\n%s", name, width, b.String())
				}
			}
		}
	}
	var b bytes.Buffer
	renderStatus(&b, long, renderStyle{Table: true, Wide: true})
	if !strings.Contains(b.String(), "lockd-1.eu-west-1.compute.internal:7070") || strings.Contains(b.String(), "…") {
		t.Errorf("wide cuts nothing:\n%s", b.String())
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                            "0.0s",
		400 * time.Millisecond:                  "0.4s",
		29500 * time.Millisecond:                "29.5s",
		4*time.Minute + 5*time.Second:           "4m05s",
		2*time.Hour + 13*time.Minute:            "2h13m",
		3*24*time.Hour + 4*time.Hour + 1e9:      "3d04h",
		59*time.Minute + 59999*time.Millisecond: "59m59s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		840 * time.Microsecond:   "840µs",
		12345 * time.Microsecond: "12.3ms",
		1250 * time.Millisecond:  "1.25s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestNetworkCauseInView(t *testing.T) {
	v := sampleCluster()
	j := statusJSONOf(v, nil, time.Time{})
	down := j.Nodes[2]
	if down.Reachable || down.Error == nil || *down.Error != syscall.ECONNREFUSED.Error() {
		t.Errorf("down node: %+v", down)
	}
	if !errors.Is(v.Nodes[2].Err, syscall.ECONNREFUSED) {
		t.Errorf("the cause is kept: %v", v.Nodes[2].Err)
	}
}

// A cell cut to fit keeps both ends, which tell rows apart: the pid of a
// holder's name (USER@HOST:PID), the end of a node's host and its port.
func TestCutsKeepBothEnds(t *testing.T) {
	fixedWidths(t)
	v := sampleCluster()
	for i := range v.Nodes {
		v.Nodes[i].Addr = "10.200.100." + strconv.Itoa(i+1) + ":17071"
	}
	if len(v.Claims) > 0 {
		v.Claims[0] = v.Nodes[0].Addr
	}
	var b bytes.Buffer
	renderStatus(&b, v, renderStyle{Table: true, Width: 74})
	for i := range v.Nodes {
		tail := strconv.Itoa(i+1) + ":17071"
		if !regexpMatch(`(?m)^.{3}10\.[^ ]*…[^ ]*`+regexp.QuoteMeta(tail)+` `, b.String()) {
			t.Errorf("status at 74 columns: node %d is not cut to its start, …, and %q:\n%s", i+1, tail, b.String())
		}
	}

	q := []proto.Queue{{Key: "jobs/nightly-build-eu-west-1-42", Held: true, Token: tokA, LeaseLeft: 30 * time.Second,
		Holders: []proto.QueueHolder{{Token: tokA, LeaseLeft: 30 * time.Second, ID: "root@build-vm-eu-west-1:31234#0c1d2e3f40516273-1"}},
		Waiters: []proto.QueueWaiter{{Waited: time.Second, Addr: "10.200.100.7:51234"}}}}
	b.Reset()
	renderQueues(&b, infos(q), 1, renderStyle{Table: true, Width: 64})
	for _, want := range []string{`roo[^ ]*…[^ ]*:31234 `, `job[^ ]*…[^ ]*-42 `} {
		if !regexpMatch(want, b.String()) {
			t.Errorf("queues at 64 columns: no cell matches %s:\n%s", want, b.String())
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")[:2] {
		if w := twwidth.Width(l); w > 64 {
			t.Errorf("queues at 64 columns: line %d wide: %s", w, l)
		}
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
