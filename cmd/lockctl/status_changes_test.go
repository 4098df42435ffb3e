package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/olekukonko/tablewriter/pkg/twwidth"

	"github.com/lockd-io/lockd/cmd/internal/survey"
	"github.com/lockd-io/lockd/proto"
)

// changesNow is the instant the golden views are drawn at, in a zone of
// its own so that they do not depend on the machine's.
var changesNow = time.Date(2025, time.June, 14, 9, 30, 0, 0, time.FixedZone("CEST", 2*3600))

// sampleChanges are the moves of sampleCluster's role: the first start
// last year, a crash of the first node yesterday, a handoff back today.
func sampleChanges() []proto.RoleChange {
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	return []proto.RoleChange{
		{At: at("2024-12-30T22:15:04.250Z"), To: "10.0.0.1:7070", Reason: "no active node is reachable"},
		{At: at("2025-06-13T17:02:11.007Z"), From: "10.0.0.1:7070", To: "10.0.0.2:7070", Reason: "the active 10.0.0.1:7070 is unreachable"},
		{At: at("2025-06-14T07:29:58.120Z"), From: "10.0.0.2:7070", To: "10.0.0.1:7070", Reason: "handoff from 10.0.0.2:7070"},
	}
}

func sampleClusterWithChanges() survey.View {
	v := sampleCluster()
	v.Changes = sampleChanges()
	return v
}

func drawStatus(t *testing.T, v survey.View, s renderStyle) string {
	t.Helper()
	var b bytes.Buffer
	if err := renderStatus(&b, v, s); err != nil {
		t.Fatal(err)
	}
	if err := renderChanges(&b, v.Changes, s, changesNow); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGoldenStatusChanges(t *testing.T) {
	fixedWidths(t)
	for _, tc := range []struct {
		file  string
		style renderStyle
	}{
		{"status_changes_table.golden", renderStyle{Table: true, Width: 80}},
		{"status_changes_plain.golden", renderStyle{}},
		{"status_changes_ascii.golden", renderStyle{Table: true, Width: 80, ASCII: true}},
	} {
		golden(t, tc.file, []byte(drawStatus(t, sampleClusterWithChanges(), tc.style)))
	}
	var b bytes.Buffer
	v := sampleClusterWithChanges()
	if err := printJSON(&b, statusJSONOf(v, clusterProblems(v, defaultMaxLag), time.Time{})); err != nil {
		t.Fatal(err)
	}
	golden(t, "status_changes.json.golden", b.Bytes())
}

// On a terminal: after the summary, a blank line and the heading, then
// one line per change, oldest first, indented: the local time (the date
// when not today, the year when not this year), FROM → TO, the reason,
// wrapped under itself on a terminal too narrow for it.
func TestStatusChangesOnATerminal(t *testing.T) {
	fixedWidths(t)
	out := drawStatus(t, sampleClusterWithChanges(), renderStyle{Table: true, Width: 100})
	_, section, ok := strings.Cut(out, "\n\n"+changesHeading+"\n")
	if !ok {
		t.Fatalf("no %q section after a blank line:\n%s", changesHeading, out)
	}
	want := []string{
		"  2024-12-31 00:15:04  -             → 10.0.0.1:7070  no active node is reachable",
		"  Jun 13 19:02:11      10.0.0.1:7070 → 10.0.0.2:7070  the active 10.0.0.1:7070 is unreachable",
		"  09:29:58             10.0.0.2:7070 → 10.0.0.1:7070  handoff from 10.0.0.2:7070",
	}
	if got := strings.Split(strings.TrimSuffix(section, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("section:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ascii := drawStatus(t, sampleClusterWithChanges(), renderStyle{Table: true, Width: 100, ASCII: true}); !strings.Contains(ascii, "  09:29:58             10.0.0.2:7070 -> 10.0.0.1:7070  handoff") {
		t.Errorf("ASCII only:\n%s", ascii)
	}
	if at80 := drawStatus(t, sampleClusterWithChanges(), renderStyle{Table: true, Width: 80}); !strings.Contains(at80,
		"  Jun 13 19:02:11      10.0.0.1:7070 → 10.0.0.2:7070  the active 10.0.0.1:7070\n"+
			"                                                      is unreachable\n") {
		t.Errorf("at 80 columns:\n%s", at80)
	}

	// A narrow terminal: addresses are cut as the table's are, the
	// reason wrapped under itself; no line of the section is wider than
	// the terminal (but for a word longer than a line, kept whole).
	long := sampleClusterWithChanges()
	for i := range long.Changes {
		long.Changes[i].From = "lockd-" + string(rune('1'+i)) + ".eu-west-1.compute.internal:7070"
		long.Changes[i].To = "lockd-" + string(rune('2'+i)) + ".eu-west-1.compute.internal:7070"
		long.Changes[i].Reason = "a reason of several words that does not fit on one line"
	}
	narrow := drawStatus(t, long, renderStyle{Table: true, Width: 60})
	_, section, _ = strings.Cut(narrow, changesHeading)
	for _, l := range strings.Split(strings.TrimSuffix(section, "\n"), "\n") {
		if twwidth.Width(l) > 60 {
			t.Errorf("a line %d wide at 60 columns:\n%s", twwidth.Width(l), narrow)
		}
	}
	if !strings.Contains(section, "…") || !strings.Contains(section, "  on one line\n") {
		t.Errorf("at 60 columns:\n%s", narrow)
	}
	// -o wide cuts nothing.
	if wide := drawStatus(t, long, renderStyle{Table: true, Wide: true}); strings.Contains(wide, "…") ||
		!strings.Contains(wide, "  09:29:58             lockd-3.eu-west-1.compute.internal:7070 → lockd-4.eu-west-1.compute.internal:7070  a reason of several words that does not fit on one line\n") {
		t.Errorf("wide:\n%s", wide)
	}
}

// Piped: the nodes' lines as before, then a blank line, the heading, and
// one line per change in one shape a script can split: the UTC time to
// the millisecond, FROM, ->, TO, then the reason's words.
func TestStatusChangesPiped(t *testing.T) {
	out := drawStatus(t, sampleClusterWithChanges(), renderStyle{})
	nodes, section, ok := strings.Cut(out, "\n\n")
	if !ok || len(strings.Split(nodes, "\n")) != 4 {
		t.Fatalf("the nodes' lines do not end at a blank line:\n%s", out)
	}
	lines := strings.Split(strings.TrimSuffix(section, "\n"), "\n")
	if len(lines) != 4 || lines[0] != changesHeading {
		t.Fatalf("section:\n%s", section)
	}
	want := []struct{ at, from, to, reason string }{
		{"2024-12-30T22:15:04.250Z", "-", "10.0.0.1:7070", "no active node is reachable"},
		{"2025-06-13T17:02:11.007Z", "10.0.0.1:7070", "10.0.0.2:7070", "the active 10.0.0.1:7070 is unreachable"},
		{"2025-06-14T07:29:58.120Z", "10.0.0.2:7070", "10.0.0.1:7070", "handoff from 10.0.0.2:7070"},
	}
	for i, l := range lines[1:] {
		f := strings.Fields(l)
		w := want[i]
		if len(f) < 5 || f[0] != w.at || f[1] != w.from || f[2] != "->" || f[3] != w.to || strings.Join(f[4:], " ") != w.reason || strings.HasSuffix(l, " ") {
			t.Errorf("line %q, want %v", l, w)
		}
	}
	if strings.ContainsAny(out, "→\x1b") {
		t.Errorf("piped output draws for a terminal:\n%s", out)
	}
	// None remembered: no section, not even an empty one.
	if out := drawStatus(t, sampleCluster(), renderStyle{}); strings.Contains(out, changesHeading) || strings.Contains(out, "\n\n") {
		t.Errorf("without changes:\n%s", out)
	}
	if out := drawStatus(t, sampleCluster(), renderStyle{Table: true}); strings.Contains(out, changesHeading) {
		t.Errorf("without changes, on a terminal:\n%s", out)
	}
}

// --json: every change, oldest first, its time in UTC to the
// millisecond, from null when the node took the role from none; an
// empty list when none is remembered.
func TestStatusChangesJSON(t *testing.T) {
	v := sampleClusterWithChanges()
	var b bytes.Buffer
	if err := printJSON(&b, statusJSONOf(v, nil, time.Time{})); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Changes []map[string]any `json:"changes"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"at": "2024-12-30T22:15:04.250Z", "from": nil, "to": "10.0.0.1:7070", "reason": "no active node is reachable"},
		{"at": "2025-06-13T17:02:11.007Z", "from": "10.0.0.1:7070", "to": "10.0.0.2:7070", "reason": "the active 10.0.0.1:7070 is unreachable"},
		{"at": "2025-06-14T07:29:58.120Z", "from": "10.0.0.2:7070", "to": "10.0.0.1:7070", "reason": "handoff from 10.0.0.2:7070"},
	}
	if len(got.Changes) != len(want) {
		t.Fatalf("changes: %s", b.String())
	}
	for i := range want {
		for k, w := range want[i] {
			if got.Changes[i][k] != w {
				t.Errorf("change %d: %s is %v, want %v", i, k, got.Changes[i][k], w)
			}
		}
	}
	b.Reset()
	printJSON(&b, statusJSONOf(sampleCluster(), nil, time.Time{}))
	if !strings.HasSuffix(b.String(), `,"changes":[]}`+"\n") {
		t.Errorf("without changes: %s", b.String())
	}
}

// What nodes say of a change reaches the terminal escaped, and the JSON
// exactly.
func TestStatusChangesNeverPrintAHostileRune(t *testing.T) {
	fixedWidths(t)
	v := sampleCluster()
	from, to, reason := "10.0.0.1:7070\u202e", sgr+":7070", "handoff\x1b[2J from "+c1
	v.Changes = []proto.RoleChange{{At: changesNow, From: from, To: to, Reason: reason}}
	for _, s := range []renderStyle{{}, {Table: true, Width: 80}, {Table: true, Color: true}} {
		out := drawStatus(t, v, s)
		assertNoHostileBytes(t, "changes", out, s.Color, from, to, reason)
		if !strings.Contains(out, `10.0.0.1:7070\u202e`) || !strings.Contains(out, `\x1b[31mred:7070`) || !strings.Contains(out, `handoff\x1b[2J from`) {
			t.Errorf("%+v:\n%s", s, out)
		}
	}
	var b bytes.Buffer
	printJSON(&b, statusJSONOf(v, nil, time.Time{}))
	assertNoHostileBytes(t, "JSON", b.String(), false)
	var got statusJSON
	if err := json.Unmarshal(b.Bytes(), &got); err != nil || len(got.Changes) != 1 ||
		*got.Changes[0].From != from || got.Changes[0].To != to || got.Changes[0].Reason != reason {
		t.Errorf("JSON does not read back exactly: %s", b.String())
	}
}

// A piped --watch writes each change once, as it turns up, not with
// every survey.
func TestChangesSeenWritesEachOnce(t *testing.T) {
	seen := changesSeen{}
	cs := sampleChanges()
	if got := seen.fresh(cs[:2]); len(got) != 2 {
		t.Fatalf("first survey: %d changes, want 2", len(got))
	}
	if got := seen.fresh(cs[:2]); len(got) != 0 {
		t.Errorf("the same again: %d changes, want none", len(got))
	}
	if got := seen.fresh(cs); len(got) != 1 || got[0].Reason != cs[2].Reason {
		t.Errorf("one more: %v", got)
	}
	lines := watchChangeLines("2025-06-14T07:30:00Z", cs[2:], renderStyle{})
	if lines != "2025-06-14T07:30:00Z  role change  2025-06-14T07:29:58.120Z  10.0.0.2:7070 -> 10.0.0.1:7070  handoff from 10.0.0.2:7070\n" {
		t.Errorf("watch line %q", lines)
	}
}

// Against real nodes: the first node took the role at the start, so
// status says so under the nodes, and a piped --watch says it once
// however many surveys it makes.
func TestStatusCommandShowsRoleChanges(t *testing.T) {
	tc := startCluster(t, 2)
	a := tc.addrs[0]
	code, out, errOut := lockctl(t, "--addr", tc.addrList(), "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexpMatch(`\n\n`+changesHeading+`\n\S+Z  - -> `+a+`  no active node is reachable\n\z`, out) {
		t.Errorf("status:\n%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var watch, errb strings.Builder
	if code := run(ctx, []string{"lockctl", "--addr", a, "status", "--watch", "--interval", "100ms"}, strings.NewReader(""), &syncWriter{w: &watch}, &errb); code != 0 {
		t.Fatalf("--watch: exit %d: %s", code, errb.String())
	}
	if n := strings.Count(watch.String(), "  role change  "); n != 1 || strings.Count(watch.String(), "  "+a+"  1  ") < 3 {
		t.Errorf("--watch: %d role change lines, want 1 over several surveys:\n%s", n, watch.String())
	}
}
