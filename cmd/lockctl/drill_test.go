package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cmd/internal/drill"
	"github.com/lockd-io/lockd/cmd/internal/drill/drilltest"
	"github.com/lockd-io/lockd/cmd/internal/survey"
	"github.com/lockd-io/lockd/proto"
)

func TestCheckFencing(t *testing.T) {
	name := func(k int) string { return "k" + strconv.Itoa(k) }
	ok := []drill.Grant{{Key: 0, Token: 1}, {Key: 1, Token: 2}, {Key: 0, Token: 3}, {Key: 1, Token: 9}}
	if n, v := drill.CheckFencing(ok, name); n != 0 || v != nil {
		t.Errorf("increasing tokens: %d %v", n, v)
	}
	bad := []drill.Grant{{Key: 0, Token: 456}, {Key: 1, Token: 2}, {Key: 0, Token: 123}, {Key: 0, Token: 456}, {Key: 0, Token: 500}}
	n, v := drill.CheckFencing(bad, name)
	if n != 2 || len(v) != 2 || v[0].Key != "k0" || v[0].Token != 123 || v[0].After != 456 || v[1].Token != 456 {
		t.Errorf("violations: %d %+v", n, v)
	}
	var b bytes.Buffer
	rep := &drill.Report{ViolationCount: n, Violations: v, Grants: 5, ActionOK: true}
	judge(rep, drill.Plan{Action: drill.ActionNone, MaxGap: -1, MaxErrors: -1, MaxLost: -1})
	renderDrill(&b, rep, drill.Plan{Action: drill.ActionNone, Workers: 1, Keys: 2, Duration: time.Second}, false)
	if !strings.Contains(b.String(), "fencing:  VIOLATED key k0: 123 after 456") || !strings.Contains(b.String(), "result:   FAIL") {
		t.Errorf("report:\n%s", b.String())
	}
}

func TestJudgeBounds(t *testing.T) {
	p := drill.Plan{Action: drill.ActionHandoff, MaxGap: 100 * time.Millisecond, MaxErrors: 0, MaxLost: -1}
	r := &drill.Report{Grants: 10, Gap: 250 * time.Millisecond, Errors: 2, LostGrants: 3, ActionOK: true}
	judge(r, p)
	want := []string{"gap 250ms is over --max-gap 100ms", "2 errors are over --max-errors 0"}
	if strings.Join(r.Failures, "|") != strings.Join(want, "|") {
		t.Errorf("failures %q, want %q", r.Failures, want)
	}
	r = &drill.Report{Grants: 10, ActionOK: false, ActionDetail: "handoff refused: no standby"}
	judge(r, drill.Plan{Action: drill.ActionHandoff, MaxGap: -1, MaxErrors: -1, MaxLost: -1})
	if len(r.Failures) != 1 || !strings.Contains(r.Failures[0], "the action failed") {
		t.Errorf("failed action: %q", r.Failures)
	}
}

// --expect-failover fails a drill after which the active is the node
// that was active before, or that had no active to start with; a drill
// whose role moved passes it.
func TestJudgeExpectFailover(t *testing.T) {
	p := drill.Plan{Action: drill.ActionRun, MaxGap: -1, MaxErrors: -1, MaxLost: -1, ExpectFailover: true}
	for _, tc := range []struct {
		before, after string
		want          string
	}{
		{"10.0.0.1:7070", "10.0.0.1:7070", "--expect-failover: 10.0.0.1:7070 is still the active"},
		{"", "10.0.0.1:7070", "--expect-failover: no node was active"},
		{"10.0.0.1:7070", "10.0.0.2:7070", ""},
	} {
		r := &drill.Report{Grants: 10, ActionOK: true, TookOver: true, ActiveBefore: tc.before, ActiveAfter: tc.after}
		judge(r, p)
		got := strings.Join(r.Failures, "|")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%q -> %q: failures %q, want %q", tc.before, tc.after, got, tc.want)
		}
	}
	if got := actionEnv("127.0.0.1:7072"); strings.Join(got, " ") != "LOCKD_ACTIVE_ADDR=127.0.0.1:7072 LOCKD_ACTIVE_PORT=7072" {
		t.Errorf("actionEnv: %q", got)
	}
	if got := actionEnv(""); strings.Join(got, " ") != "LOCKD_ACTIVE_ADDR= LOCKD_ACTIVE_PORT=" {
		t.Errorf("actionEnv without an active: %q", got)
	}
}

// drillStatus answers as the fake's one node: active, or handing off while
// it is down.
func drillStatus(ctx context.Context, f *drilltest.Locks, addr string) (proto.Status, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Down {
		return proto.Status{Self: addr, Role: "handoff"}, nil
	}
	return proto.Status{Self: addr, Role: survey.RoleActive}, nil
}

// runFakeDrill runs p against f, its action as lockctl drill runs it.
func runFakeDrill(f *drilltest.Locks, p drill.Plan) *drill.Report {
	p.Act = func(ctx context.Context) (bool, string) {
		return runAction(ctx, f, func(ctx context.Context, addr string) (proto.Status, error) { return drillStatus(ctx, f, addr) }, p, io.Discard, nil)
	}
	return drill.Run(context.Background(), f, p)
}

func TestRunDrillFake(t *testing.T) {
	f := &drilltest.Locks{Held: map[string]uint64{}, Outage: 200 * time.Millisecond}
	p := drill.Plan{Workers: 4, Keys: 3, Lease: time.Second, Duration: 600 * time.Millisecond,
		Action: drill.ActionHandoff, At: 200 * time.Millisecond, MaxGap: 5 * time.Millisecond, MaxErrors: -1, MaxLost: -1}
	rep := runFakeDrill(f, p)
	judge(rep, p)
	if f.Handoffs != 1 || !rep.ActionOK || rep.Grants == 0 || rep.Cycles != rep.Grants || rep.ViolationCount != 0 {
		t.Fatalf("report: %+v", rep)
	}
	// The 200ms outage is the longest gap: it covers it. (Not exactly: a
	// loaded machine may pause the workers for a while around it, and
	// under make test's load the last grant before it came some 60 ms
	// after the action began.)
	if rep.Gap < 190*time.Millisecond || rep.GapTo < rep.ActionAt+190*time.Millisecond || rep.GapFrom > rep.ActionAt+100*time.Millisecond {
		t.Errorf("gap %s from %s to %s", rep.Gap, rep.GapFrom, rep.GapTo)
	}
	if rep.Lost() != 0 || rep.Unchecked != 0 {
		t.Errorf("lost %d, unchecked %d: a handoff that forgets nothing loses nothing", rep.Lost(), rep.Unchecked)
	}
	if rep.Errors == 0 || rep.ErrorKinds["unavailable"] != rep.Errors {
		t.Errorf("errors during the outage: %d %v", rep.Errors, rep.ErrorKinds)
	}
	if len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "--max-gap 5ms") {
		t.Errorf("failures: %q", rep.Failures)
	}
	var b bytes.Buffer
	renderDrill(&b, rep, p, false)
	for _, want := range []string{"drill:    4 workers, 3 keys, 600ms, handoff at 200ms", "lost:     0\n", "action:   handed off to b:1 in ", "fencing:  ok", "result:   FAIL: gap "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Errorf("escape codes without colour")
	}
}

// drillAcrossAHandoff runs a short drill with a handoff against f, whose
// misbehaviour (a forgotten release, a ghost grant) must have happened
// before the handoff, or t fails saying what.
func drillAcrossAHandoff(t *testing.T, f *drilltest.Locks, nothing string) (drill.Plan, *drill.Report) {
	t.Helper()
	p := drill.Plan{Workers: 4, Keys: 3, Lease: 400 * time.Millisecond, Duration: time.Second,
		Action: drill.ActionHandoff, At: 200 * time.Millisecond, MaxGap: -1, MaxErrors: -1, MaxLost: 0}
	var rep *drill.Report
	// A machine busy enough to start the action late leaves no time for
	// the forgotten lease to end within the drill, which is what the
	// callers measure: such a run is run again, a bounded number of times.
	for attempt := 1; ; attempt++ {
		f.Mu.Lock()
		f.Held, f.Leases, f.Expires = map[string]uint64{}, map[uint64]time.Duration{}, map[string]time.Time{}
		f.Next, f.Handoffs, f.LastKey, f.LastToken, f.Forgot = 0, 0, "", 0, 0
		f.Mu.Unlock()
		rep = runFakeDrill(f, p)
		judge(rep, p)
		if rep.ActionAt <= p.At+100*time.Millisecond || attempt == 3 {
			break
		}
		t.Logf("attempt %d: the action started at %s, not %s: the machine is busy; again", attempt, rep.ActionAt, p.At)
	}
	if f.Forgot == 0 {
		t.Fatal(nothing + ": the workers released nothing before the handoff")
	}
	return p, rep
}

// A release the old active answered ok and the new one never
// heard of leaves the key held by the released token until its lease
// ends. The drill finds it by asking who holds the key its acquires wait
// on, counts it as lost, and reports the stall.
func TestRunDrillFindsALostRelease(t *testing.T) {
	f := &drilltest.Locks{ForgetLastRelease: true}
	p, rep := drillAcrossAHandoff(t, f, "the fake forgot no release")
	if len(rep.LostReleases) != 1 {
		t.Fatalf("lost releases %+v, want the one of token %d", rep.LostReleases, f.Forgot)
	}
	l := rep.LostReleases[0]
	// The key stayed held for the lease from the handoff (a moment after
	// the release), then went to a waiter. (The release may be answered
	// a little after the drill noted the action's start: the fake hands
	// off when the action reaches it.)
	if l.Token != f.Forgot || !l.Regranted || l.Stall < p.Lease-50*time.Millisecond || l.Stall > p.Duration ||
		l.FreedAt > l.SeenAt || l.SeenAt < rep.ActionAt {
		t.Errorf("lost release %+v (action at %s), want token %d held for about %s", l, rep.ActionAt, f.Forgot, p.Lease)
	}
	// The grant of the key that followed the forgotten release, if one
	// came before the handoff, was lost with it.
	if rep.Lost() != rep.LostGrants+1 || rep.LostGrants > 1 {
		t.Errorf("lost %d, lost grants %d", rep.Lost(), rep.LostGrants)
	}
	want := fmt.Sprintf("lost %d (%s, 1 release) is over --max-lost 0", rep.Lost(), countOf(rep.LostGrants, "grant", "grants"))
	if len(rep.Failures) != 1 || rep.Failures[0] != want {
		t.Errorf("failures %q, want %q", rep.Failures, want)
	}
	var b bytes.Buffer
	renderDrill(&b, rep, p, false)
	for _, want := range []string{"1 release (answered ok, then still held on the active) (limit 0)\n",
		"stall:    " + shortDuration(l.Stall) + " on key " + l.Key + " by a lost release: released at "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// A grant whose answer was lost holds its key until its lease ends: the
// drill names it a ghost and reports its stall, but it is no lost answer.
func TestRunDrillFindsAGhostGrant(t *testing.T) {
	f := &drilltest.Locks{Ghost: true}
	p, rep := drillAcrossAHandoff(t, f, "the fake made no ghost")
	if len(rep.Ghosts) != 1 || len(rep.LostReleases) != 0 || rep.Lost() != 0 || len(rep.Failures) != 0 {
		t.Fatalf("ghosts %+v, lost releases %+v, lost %d, failures %q; want the ghost %d only", rep.Ghosts, rep.LostReleases, rep.Lost(), rep.Failures, f.Forgot)
	}
	g := rep.Ghosts[0]
	if g.Token != f.Forgot || !g.Regranted || g.Stall < p.Lease-50*time.Millisecond || g.Stall > p.Duration || g.SeenAt < rep.ActionAt {
		t.Errorf("ghost %+v (action at %s), want token %d held for about %s", g, rep.ActionAt, f.Forgot, p.Lease)
	}
	var b bytes.Buffer
	renderDrill(&b, rep, p, false)
	for _, want := range []string{"lost:     0 (limit 0)\n", "ghosts:   1 key held by a grant no worker received: ",
		"stall:    " + shortDuration(g.Stall) + " on key " + g.Key + " by a ghost grant: freed at "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// A release answered notheld is a lost grant unless it was in flight
// while the action ran: then the old active may have applied it and gone
// before answering, and no client can tell that from a lost grant.
// The accounting of keys held by a token no worker held, case by case:
// a token named as holder by a question sent after its release was
// answered ok is a lost release; one no worker ever received is a ghost
// grant once a later grant of its key shows it ended unreceived, or it was
// seen long enough before the end. Each is counted once, and its stall
// runs from when the key was freed to its next grant after it was seen.
// The report of lost grants and releases, in text and JSON, and the
// verdict of --max-lost.
func TestDrillReportsWhatWasLost(t *testing.T) {
	ms := time.Millisecond
	p := drill.Plan{Workers: 8, Keys: 16, Duration: 6 * time.Second, Action: drill.ActionRun, Command: "kill -9 1",
		At: 2 * time.Second, MaxGap: -1, MaxErrors: -1, MaxLost: 0}
	base := drill.Report{ActiveBefore: "a:1", ActiveAfter: "b:2", ActionOK: true, ActionAt: 2 * time.Second,
		Grants: 100, Cycles: 99, GrantsAfter: 40, TookOver: true, Takeover: 5 * ms, ErrorKinds: map[string]int{}}
	for _, tc := range []struct {
		name     string
		edit     func(r *drill.Report)
		lines    []string // in the text report
		failure  string   // "" when the drill passes
		stallMs  float64  // 0: null
		stallKey string
	}{
		{"nothing lost", func(r *drill.Report) {}, []string{"lost:     0 (limit 0)\n"}, "", 0, ""},
		{"a grant", func(r *drill.Report) { r.LostGrants = 1 },
			[]string{"lost:     1: 1 grant (release said notheld) (limit 0)\n"},
			"lost 1 (1 grant, 0 releases) is over --max-lost 0", 0, ""},
		{"grants and releases", func(r *drill.Report) {
			r.LostGrants = 1
			r.LostReleases = []drill.StrandedHold{
				{Key: "k2", Token: 5, FreedAt: 2001 * ms, SeenAt: 2300 * ms, Stall: 4870 * ms, Regranted: true},
				{Key: "k5", Token: 6, FreedAt: 2002 * ms, SeenAt: 6001 * ms, Stall: 3998 * ms},
			}
		}, []string{
			"lost:     3: 1 grant (release said notheld), 2 releases (answered ok, then still held on the active) (limit 0)\n",
			"stall:    4.87s on key k2 by a lost release: released at 2.001s, granted again at 6.871s\n",
		}, "lost 3 (1 grant, 2 releases) is over --max-lost 0", 4870, "k2"},
		{"held at the end", func(r *drill.Report) {
			r.LostReleases = []drill.StrandedHold{{Key: "k5", Token: 6, FreedAt: 2002 * ms, SeenAt: 6001 * ms, Stall: 3998 * ms}}
		}, []string{
			"lost:     1: 1 release (answered ok, then still held on the active) (limit 0)\n",
			"stall:    3.998s on key k5 by a lost release: released at 2.002s, still held at the drill's end\n",
		}, "lost 1 (0 grants, 1 release) is over --max-lost 0", 3998, "k5"},
		{"a ghost and releases in doubt", func(r *drill.Report) {
			r.InDoubt = 4
			r.Ghosts = []drill.StrandedHold{{Key: "k7", Token: 9, Ghost: true, FreedAt: 2003 * ms, SeenAt: 2300 * ms, Stall: 3997 * ms}}
		}, []string{
			"lost:     0 (limit 0)\n",
			"in doubt: 4 releases in flight during the action came back notheld: applied by the old active and answered too late, or their grants were lost (not counted as lost)\n",
			"ghosts:   1 key held by a grant no worker received: its answer was lost, and the acquire sent again waited behind it\n",
			"stall:    3.997s on key k7 by a ghost grant: freed at 2.003s, still held at the drill's end\n",
		}, "", 3997, "k7"},
		{"keys not checked", func(r *drill.Report) { r.Unchecked = 2 },
			[]string{"lost:     0; 2 keys could not be asked about at the end (limit 0)\n"},
			"2 keys could not be asked about at the end, so --max-lost 0 is not proven: see that the cluster has an active (lockctl status) and run the drill again", 0, ""},
	} {
		r := base
		r.ErrorKinds = map[string]int{}
		tc.edit(&r)
		judge(&r, p)
		var b bytes.Buffer
		if err := renderDrill(&b, &r, p, false); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range tc.lines {
			if !strings.Contains(out, want) {
				t.Errorf("%s: report lacks %q:\n%s", tc.name, want, out)
			}
		}
		if tc.stallKey == "" && strings.Contains(out, "stall:") {
			t.Errorf("%s: a stall line without a lost release:\n%s", tc.name, out)
		}
		if tc.failure == "" && len(r.Failures) != 0 || tc.failure != "" && (len(r.Failures) != 1 || r.Failures[0] != tc.failure) {
			t.Errorf("%s: failures %q, want %q", tc.name, r.Failures, tc.failure)
		}
		b.Reset()
		if err := printJSON(&b, drillJSONOf(&r, p)); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		wantJSON := map[string]any{"lost": float64(r.Lost()), "lost_grants": float64(r.LostGrants),
			"lost_releases": float64(len(r.LostReleases)), "in_doubt": float64(r.InDoubt), "ghosts": float64(len(r.Ghosts)),
			"unchecked_keys": float64(r.Unchecked), "stall_ms": nil, "stall_key": nil, "stall_cause": nil}
		if h, ok := r.LongestStall(); ok {
			wantJSON["stall_ms"], wantJSON["stall_key"], wantJSON["stall_cause"] = tc.stallMs, tc.stallKey, h.Cause()
		}
		for k, v := range wantJSON {
			if got[k] != v {
				t.Errorf("%s: JSON %s is %v, want %v", tc.name, k, got[k], v)
			}
		}
	}
	// Without --max-lost, losses are reported and pass.
	r := base
	r.LostGrants, r.Unchecked = 2, 1
	judge(&r, drill.Plan{Action: drill.ActionRun, MaxGap: -1, MaxErrors: -1, MaxLost: -1})
	if len(r.Failures) != 0 {
		t.Errorf("no bound, yet failures %q", r.Failures)
	}
}

// The last look asks about each key once; a key it cannot ask about is
// counted, so a drill bound by --max-lost does not pass on no evidence.
func TestDrillRunsCommand(t *testing.T) {
	f := &drilltest.Locks{Held: map[string]uint64{}}
	var out bytes.Buffer
	p := drill.Plan{Workers: 2, Keys: 2, Lease: time.Second, Duration: 200 * time.Millisecond,
		Action: drill.ActionRun, Command: "echo ran $LOCKD_ADDR; exit 3", At: 50 * time.Millisecond,
		MaxGap: -1, MaxErrors: -1, MaxLost: -1}
	p.Act = func(ctx context.Context) (bool, string) {
		return runAction(ctx, f, nil, p, &out, []string{"LOCKD_ADDR=x:1"})
	}
	rep := drill.Run(context.Background(), f, p)
	judge(rep, p)
	if rep.ActionOK || !strings.Contains(rep.ActionDetail, "exit status 3") || out.String() != "ran x:1\n" {
		t.Errorf("action: ok=%v %q, output %q", rep.ActionOK, rep.ActionDetail, out.String())
	}
	if len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "the action failed") {
		t.Errorf("failures %q", rep.Failures)
	}
}

func TestDrillCommand(t *testing.T) {
	tc := startCluster(t, 2)
	args := []string{"--addr", tc.addrList(), "drill", "--workers", "4", "--keys", "8", "--duration", "1s", "--at", "300ms"}

	// A drill with no bounds passes when the cluster keeps fencing.
	code, out, errOut := lockctl(t, append(args, "--json")...)
	var rep drillJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("exit %d, %v: %s %s", code, err, out, errOut)
	}
	if code != 0 || !rep.Pass || !rep.Action.OK || rep.Action.Kind != drill.ActionHandoff || rep.Grants == 0 || !rep.Fencing.OK {
		t.Errorf("handoff drill: exit %d: %s %s", code, out, errOut)
	}
	if rep.ActiveBefore == nil || *rep.ActiveBefore != tc.addrs[0] || rep.ActiveAfter == nil {
		t.Errorf("active before/after: %s", out)
	}

	// An impossible bound fails it, and the report says why.
	tc.waitSettled(t, *rep.ActiveAfter)
	code, out, _ = lockctl(t, append(args, "--max-gap", "1ns")...)
	if code != exitFailed || !strings.Contains(out, "result:   FAIL: gap ") || !strings.Contains(out, "is over --max-gap 1ns") {
		t.Errorf("--max-gap 1ns: exit %d:\n%s", code, out)
	}

	for _, bad := range [][]string{
		{"--at", "2s"},
		{"--action", "explode"},
		{"--run", "true", "--action", "handoff"},
		{"--workers", "0"},
		{"--max-errors", "-1"},
	} {
		a := append([]string{"--addr", tc.addrList(), "drill", "--duration", "1s"}, bad...)
		if code, _, errOut := lockctl(t, a...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2: %s", bad, code, errOut)
		}
	}
}

// The report of a drill escapes the addresses, keys and server words it
// quotes; its JSON keeps them exact.
func TestDrillReportEscapesWhatNodesSay(t *testing.T) {
	server := "no standby\u202e is caught up\x1b[2J"
	key := "drill-" + rlo
	rep := &drill.Report{
		ActiveBefore: rlo + ":1", ActiveAfter: sgr + ":2",
		ActionOK: false, ActionDetail: "handoff refused: " + server,
		Grants: 3, Cycles: 3, Errors: 1, ErrorKinds: map[string]int{"refused": 1},
		FirstError: "lockd refused acquire " + key + ": " + server,
		Violations: []drill.FenceViolation{{Key: key, Token: 1, After: 2}}, ViolationCount: 1,
	}
	p := drill.Plan{Workers: 1, Keys: 1, Duration: time.Second, Action: drill.ActionRun, Command: "kill " + c1,
		MaxGap: -1, MaxErrors: -1, MaxLost: -1}
	judge(rep, p)
	for _, color := range []bool{false, true} {
		var b bytes.Buffer
		if err := renderDrill(&b, rep, p, color); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		assertNoHostileBytes(t, "drill", out, color, server, key, c1, rep.ActiveBefore, rep.ActiveAfter)
		for _, want := range []string{
			`command at 0s: kill nel\u0085csi\u009b`,
			`deploy\u202e:1 -> \x1b[31mred:2`,
			`no standby\u202e is caught up\x1b[2J`,
			`VIOLATED key drill-deploy\u202e: 1 after 2`,
			`fencing violated: key drill-deploy\u202e got token 1 after 2; the action failed: handoff refused: no standby\u202e`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %s:\n%s", want, out)
			}
		}
	}
	var b bytes.Buffer
	if err := printJSON(&b, drillJSONOf(rep, p)); err != nil {
		t.Fatal(err)
	}
	assertNoHostileBytes(t, "JSON", b.String(), false)
	var got drillJSON
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if *got.ActiveBefore != rep.ActiveBefore || *got.ActiveAfter != rep.ActiveAfter || got.Action.Detail != rep.ActionDetail ||
		*got.Action.Command != p.Command || got.Fencing.Violations[0].Key != key || *got.FirstError != rep.FirstError {
		t.Errorf("JSON does not read back exactly: %s", b.String())
	}
}

func TestDrillHandoffDetailEscapesTheNewActive(t *testing.T) {
	ask := func(ctx context.Context, addr string) (proto.Status, error) {
		return proto.Status{Self: addr, Role: survey.RoleActive}, nil
	}
	ok, detail := runAction(context.Background(), &fakeHandoffLocks{to: isolate + ":1"}, ask, drill.Plan{Action: drill.ActionHandoff}, io.Discard, nil)
	if !ok || !strings.HasPrefix(detail, `handed off to \u2066yolped\u2069:1 in `) {
		t.Errorf("detail %q (ok %v)", detail, ok)
	}
}

// fakeHandoffLocks hands off at once to the address it is given.
type fakeHandoffLocks struct {
	drilltest.Locks
	to string
}

func (f *fakeHandoffLocks) Handoff(ctx context.Context, to string) (string, error) { return f.to, nil }

// A drill whose action removed the active fails when no new
// active granted anything afterwards, even with no bound set, and says
// why; an action that left the active in place does not.
func TestDrillFailsWhenNobodyTookOver(t *testing.T) {
	p := drill.Plan{Workers: 8, Keys: 16, Duration: 6 * time.Second, Action: drill.ActionRun, Command: "kill -STOP 1",
		At: 2 * time.Second, MaxGap: -1, MaxErrors: -1, MaxLost: -1}
	base := drill.Report{ActiveBefore: "a:1", ActiveAfter: "b:2", ActionOK: true, ActionAt: 2 * time.Second,
		Grants: 100, Cycles: 100, ErrorKinds: map[string]int{}}
	for _, tc := range []struct {
		name  string
		edit  func(r *drill.Report)
		cause string // "" when the drill passes
	}{
		{"stuck on the old active", func(r *drill.Report) {}, "b:2 is active now, but the clients got no lock after the action: their requests stayed with the old active"},
		{"errors only", func(r *drill.Report) {
			r.Errors, r.FirstError, r.ErrorKinds["unavailable"] = 3, "acquire k: no lockd node available", 3
		}, "only 3 errors (first: acquire k: no lockd node available)"},
		{"no active at all", func(r *drill.Report) { r.ActiveAfter = "" }, "no node is active now"},
		{"old epoch only", func(r *drill.Report) { r.GrantsAfter = 40 }, "every grant after the action came from the old active's epoch"},
		{"taken over", func(r *drill.Report) { r.GrantsAfter, r.TookOver, r.Takeover = 40, true, time.Second }, ""},
		{"active unchanged", func(r *drill.Report) { r.ActiveAfter = "a:1" }, ""},
	} {
		r := base
		r.ErrorKinds = map[string]int{}
		tc.edit(&r)
		judge(&r, p)
		var b bytes.Buffer
		if err := renderDrill(&b, &r, p, false); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if tc.cause == "" {
			if len(r.Failures) != 0 || !strings.Contains(out, "result:   PASS") {
				t.Errorf("%s: failures %q\n%s", tc.name, r.Failures, out)
			}
			continue
		}
		if len(r.Failures) != 1 || !strings.HasPrefix(r.Failures[0], "no new active granted a lock after the action removed the active a:1: ") ||
			!strings.Contains(r.Failures[0], tc.cause) {
			t.Errorf("%s: failures %q, want the cause %q", tc.name, r.Failures, tc.cause)
		}
		if !strings.Contains(out, "takeover: none: no new active granted a lock after the action removed the active") || !strings.Contains(out, "result:   FAIL: no new active") {
			t.Errorf("%s: report\n%s", tc.name, out)
		}
	}
}
