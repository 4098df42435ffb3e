package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olekukonko/tablewriter/pkg/twwidth"

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
// node is catching up, the third is down.
func sampleCluster() clusterView {
	a, b, c := "10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"
	peers := []proto.PeerStatus{
		{Addr: a, Role: "active", Reachable: true, Seq: 120, Token: tokA},
		{Addr: b, Role: "standby", Reachable: true, Seq: 117, Lag: 3, Token: tokB},
		{Addr: c, Role: "down"},
	}
	return buildView([]nodeAnswer{
		{Asked: a, Status: proto.Status{Self: a, Role: "active", Active: a, Token: tokA, Seq: 120,
			Uptime: 26*time.Hour + 3*time.Minute, Peers: peers}},
		{Asked: b, Status: proto.Status{Self: b, Role: "standby", Active: a, Token: tokB, Seq: 117,
			Uptime: 3*time.Minute + 7*time.Second, Sticky: true, Peers: peers}},
		{Asked: c, Err: syscall.ECONNREFUSED},
	})
}

func sampleQueues() []proto.Queue {
	return []proto.Queue{
		{Key: "backup", Held: true, Token: tokB, LeaseLeft: 12 * time.Second},
		{Key: "deploy", Held: true, Token: tokA, LeaseLeft: 29500 * time.Millisecond, Waiters: []proto.QueueWaiter{
			{Waited: 14200 * time.Millisecond, Addr: "10.0.0.9:51234"},
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
		{"status_color.golden", renderStyle{Table: true, Color: true}},
		{"status_table.golden", renderStyle{Table: true}},
		{"status_plain.golden", renderStyle{}},
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
	if err := printJSON(&b, statusJSONOf(sampleCluster())); err != nil {
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
		{"queues_color.golden", renderStyle{Table: true, Color: true}},
		{"queues_plain.golden", renderStyle{}},
	} {
		var b bytes.Buffer
		if err := renderQueues(&b, sampleQueues(), 3, "*", tc.style); err != nil {
			t.Fatal(err)
		}
		if !tc.style.Color && bytes.Contains(b.Bytes(), []byte("\x1b[")) {
			t.Errorf("%s: escape code without colour:\n%q", tc.file, b.String())
		}
		golden(t, tc.file, b.Bytes())
	}
	var b bytes.Buffer
	if err := printJSON(&b, queuesJSONOf(sampleQueues(), 3)); err != nil {
		t.Fatal(err)
	}
	golden(t, "queues.json.golden", b.Bytes())
}

func TestQueuesEmpty(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"*", "no keys are held or waited on\n"},
		{"jobs/*", "no keys starting with \"jobs/\" are held or waited on\n"},
		{"deploy", "\"deploy\" is neither held nor waited on\n"},
	} {
		var b bytes.Buffer
		if err := renderQueues(&b, nil, 0, tc.pattern, renderStyle{Table: true, Color: true}); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("pattern %q: got %q, want %q", tc.pattern, b.String(), tc.want)
		}
	}
	var b bytes.Buffer
	printJSON(&b, queuesJSONOf(nil, 0))
	if got := b.String(); got != "{\"keys\":[],\"total\":0}\n" {
		t.Errorf("empty JSON: %s", got)
	}
}

func TestPlainStatusColumns(t *testing.T) {
	var b bytes.Buffer
	renderStatus(&b, sampleCluster(), renderStyle{})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 nodes, got:\n%s", b.String())
	}
	if !strings.HasPrefix(lines[1], "* ") || strings.HasPrefix(lines[2], "*") || strings.HasPrefix(lines[3], "*") {
		t.Errorf("only the active's line starts with *:\n%s", b.String())
	}
	for _, l := range lines {
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing space in %q", l)
		}
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
	j := statusJSONOf(v)
	down := j.Nodes[2]
	if down.Reachable || down.Error == nil || *down.Error != syscall.ECONNREFUSED.Error() {
		t.Errorf("down node: %+v", down)
	}
	if !errors.Is(v.Nodes[2].Err, syscall.ECONNREFUSED) {
		t.Errorf("the cause is kept: %v", v.Nodes[2].Err)
	}
}
