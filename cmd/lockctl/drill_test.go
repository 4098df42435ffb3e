package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

func TestLongestGap(t *testing.T) {
	ms := time.Millisecond
	g := []drillGrant{{At: 1 * ms}, {At: 2 * ms}, {At: 50 * ms}, {At: 51 * ms}}
	gap, from, to := longestGap(g, 60*ms)
	if gap != 48*ms || from != 2*ms || to != 50*ms {
		t.Errorf("got %s from %s to %s", gap, from, to)
	}
	// A cluster that never recovers: the gap lasts until the end.
	gap, from, to = longestGap(g[:2], 60*ms)
	if gap != 58*ms || from != 2*ms || to != 60*ms {
		t.Errorf("no recovery: got %s from %s to %s", gap, from, to)
	}
	if gap, _, _ := longestGap(nil, 60*ms); gap != 60*ms {
		t.Errorf("no grant at all: gap %s", gap)
	}
}

func TestCheckFencing(t *testing.T) {
	name := func(k int) string { return "k" + strconv.Itoa(k) }
	ok := []drillGrant{{Key: 0, Token: 1}, {Key: 1, Token: 2}, {Key: 0, Token: 3}, {Key: 1, Token: 9}}
	if n, v := checkFencing(ok, name); n != 0 || v != nil {
		t.Errorf("increasing tokens: %d %v", n, v)
	}
	bad := []drillGrant{{Key: 0, Token: 456}, {Key: 1, Token: 2}, {Key: 0, Token: 123}, {Key: 0, Token: 456}, {Key: 0, Token: 500}}
	n, v := checkFencing(bad, name)
	if n != 2 || len(v) != 2 || v[0].Key != "k0" || v[0].Token != 123 || v[0].After != 456 || v[1].Token != 456 {
		t.Errorf("violations: %d %+v", n, v)
	}
	var b bytes.Buffer
	rep := &drillReport{ViolationCount: n, Violations: v, Grants: 5, ActionOK: true}
	rep.judge(drillPlan{Action: actionNone, MaxGap: -1, MaxErrors: -1, MaxLost: -1})
	renderDrill(&b, rep, drillPlan{Action: actionNone, Workers: 1, Keys: 2, Duration: time.Second}, false)
	if !strings.Contains(b.String(), "fencing:  VIOLATED key k0: 123 after 456") || !strings.Contains(b.String(), "result:   FAIL") {
		t.Errorf("report:\n%s", b.String())
	}
}

func TestJudgeBounds(t *testing.T) {
	p := drillPlan{Action: actionHandoff, MaxGap: 100 * time.Millisecond, MaxErrors: 0, MaxLost: -1}
	r := &drillReport{Grants: 10, Gap: 250 * time.Millisecond, Errors: 2, Lost: 3, ActionOK: true}
	r.judge(p)
	want := []string{"gap 250ms is over --max-gap 100ms", "2 errors are over --max-errors 0"}
	if strings.Join(r.Failures, "|") != strings.Join(want, "|") {
		t.Errorf("failures %q, want %q", r.Failures, want)
	}
	r = &drillReport{Grants: 10, ActionOK: false, ActionDetail: "handoff refused: no standby"}
	r.judge(drillPlan{Action: actionHandoff, MaxGap: -1, MaxErrors: -1, MaxLost: -1})
	if len(r.Failures) != 1 || !strings.Contains(r.Failures[0], "the action failed") {
		t.Errorf("failed action: %q", r.Failures)
	}
}

// fakeLocks is an in-memory lock service for drills: one holder per key,
// waiters poll, tokens grow. It can go down for a while.
type fakeLocks struct {
	mu      sync.Mutex
	next    uint64
	held    map[string]uint64
	down    bool
	handoff int
}

func (f *fakeLocks) Acquire(ctx context.Context, key string, lease, wait time.Duration) (client.Lock, error) {
	for {
		f.mu.Lock()
		if f.down {
			f.mu.Unlock()
			return client.Lock{}, client.ErrUnavailable
		}
		if _, ok := f.held[key]; !ok {
			f.next++
			f.held[key] = f.next
			tok := f.next
			f.mu.Unlock()
			return client.Lock{Key: key, Token: tok, Lease: lease}, nil
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return client.Lock{}, ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

func (f *fakeLocks) Release(ctx context.Context, key string, token uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[key] != token {
		return client.ErrNotHeld
	}
	delete(f.held, key)
	return nil
}

func (f *fakeLocks) Handoff(ctx context.Context, to string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handoff++
	f.down = true
	go func() {
		time.Sleep(30 * time.Millisecond)
		f.mu.Lock()
		f.down = false
		f.mu.Unlock()
	}()
	return "b:1", nil
}

func TestRunDrillFake(t *testing.T) {
	f := &fakeLocks{held: map[string]uint64{}}
	ask := func(ctx context.Context, addr string) (proto.Status, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.down {
			return proto.Status{Self: addr, Role: "handoff"}, nil
		}
		return proto.Status{Self: addr, Role: roleActive}, nil
	}
	p := drillPlan{Workers: 4, Keys: 3, Lease: time.Second, Duration: 300 * time.Millisecond,
		Action: actionHandoff, At: 100 * time.Millisecond, MaxGap: 5 * time.Millisecond, MaxErrors: -1, MaxLost: -1}
	rep := runDrill(context.Background(), f, ask, p)
	rep.judge(p)
	if f.handoff != 1 || !rep.ActionOK || rep.Grants == 0 || rep.Cycles != rep.Grants || rep.ViolationCount != 0 {
		t.Fatalf("report: %+v", rep)
	}
	// The 30ms outage is the longest gap, and it starts at the action.
	if rep.Gap < 25*time.Millisecond || rep.GapFrom < 90*time.Millisecond || rep.GapFrom >= p.Duration {
		t.Errorf("gap %s from %s", rep.Gap, rep.GapFrom)
	}
	if rep.Errors == 0 || rep.ErrorKinds["unavailable"] != rep.Errors {
		t.Errorf("errors during the outage: %d %v", rep.Errors, rep.ErrorKinds)
	}
	if len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "--max-gap 5ms") {
		t.Errorf("failures: %q", rep.Failures)
	}
	var b bytes.Buffer
	renderDrill(&b, rep, p, false)
	for _, want := range []string{"drill:    4 workers, 3 keys, 300ms, handoff at 100ms", "action:   handed off to b:1 in ", "fencing:  ok", "result:   FAIL: gap "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Errorf("escape codes without colour")
	}
}

func TestDrillRunsCommand(t *testing.T) {
	f := &fakeLocks{held: map[string]uint64{}}
	var out bytes.Buffer
	p := drillPlan{Workers: 2, Keys: 2, Lease: time.Second, Duration: 200 * time.Millisecond,
		Action: actionRun, Command: "echo ran $LOCKD_ADDR; exit 3", At: 50 * time.Millisecond,
		MaxGap: -1, MaxErrors: -1, MaxLost: -1, Output: &out, Env: []string{"LOCKD_ADDR=x:1"}}
	rep := runDrill(context.Background(), f, nil, p)
	rep.judge(p)
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
	if code != 0 || !rep.Pass || !rep.Action.OK || rep.Action.Kind != actionHandoff || rep.Grants == 0 || !rep.Fencing.OK {
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

func TestDrillErrorKinds(t *testing.T) {
	for err, want := range map[error]string{
		client.ErrUnavailable:                   "unavailable",
		client.ErrTimeout:                       "timeout",
		&client.ServerError{Msg: "limit"}:       "refused",
		errors.New("something else went wrong"): "other",
	} {
		if got := drillErrorKind(err); got != want {
			t.Errorf("%v: %q, want %q", err, got, want)
		}
	}
}

func TestTakeoverMeasuresTheTimeWithoutAnActive(t *testing.T) {
	old, next := uint64(100)<<engine.CounterBits, uint64(200)<<engine.CounterBits
	ms := time.Millisecond
	grants := []drillGrant{
		{At: 10 * ms, Token: old + 1},
		{At: 20 * ms, Token: old + 2},
		{At: 35 * ms, Token: old + 3}, // the old active still grants after the action began
		{At: 47 * ms, Token: next + 1},
		{At: 50 * ms, Token: next + 2},
	}
	if d, ok := takeover(grants, 30*ms); !ok || d != 12*ms {
		t.Errorf("takeover = %s, %v; want 12ms from the last old grant to the first new one", d, ok)
	}
	if _, ok := takeover(grants[:3], 30*ms); ok {
		t.Error("takeover found without any grant from a new epoch")
	}
}

// The report of a drill escapes the addresses, keys and server words it
// quotes; its JSON keeps them exact.
func TestDrillReportEscapesWhatNodesSay(t *testing.T) {
	server := "no standby\u202e is caught up\x1b[2J"
	key := "drill-" + rlo
	rep := &drillReport{
		ActiveBefore: rlo + ":1", ActiveAfter: sgr + ":2",
		ActionOK: false, ActionDetail: "handoff refused: " + server,
		Grants: 3, Cycles: 3, Errors: 1, ErrorKinds: map[string]int{"refused": 1},
		FirstError: "lockd refused acquire " + key + ": " + server,
		Violations: []fenceViolation{{Key: key, Token: 1, After: 2}}, ViolationCount: 1,
	}
	p := drillPlan{Workers: 1, Keys: 1, Duration: time.Second, Action: actionRun, Command: "kill " + c1,
		MaxGap: -1, MaxErrors: -1, MaxLost: -1}
	rep.judge(p)
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
	if err := printJSON(&b, rep.json(p)); err != nil {
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
		return proto.Status{Self: addr, Role: roleActive}, nil
	}
	ok, detail := runAction(context.Background(), &fakeHandoffLocks{to: isolate + ":1"}, ask, drillPlan{Action: actionHandoff})
	if !ok || !strings.HasPrefix(detail, `handed off to \u2066yolped\u2069:1 in `) {
		t.Errorf("detail %q (ok %v)", detail, ok)
	}
}

// fakeHandoffLocks hands off at once to the address it is given.
type fakeHandoffLocks struct {
	fakeLocks
	to string
}

func (f *fakeHandoffLocks) Handoff(ctx context.Context, to string) (string, error) { return f.to, nil }

// Issue 14: a drill whose action removed the active fails when no new
// active granted anything afterwards, even with no bound set, and says
// why; an action that left the active in place does not.
func TestDrillFailsWhenNobodyTookOver(t *testing.T) {
	p := drillPlan{Workers: 8, Keys: 16, Duration: 6 * time.Second, Action: actionRun, Command: "kill -STOP 1",
		At: 2 * time.Second, MaxGap: -1, MaxErrors: -1, MaxLost: -1}
	base := drillReport{ActiveBefore: "a:1", ActiveAfter: "b:2", ActionOK: true, ActionAt: 2 * time.Second,
		Grants: 100, Cycles: 100, ErrorKinds: map[string]int{}}
	for _, tc := range []struct {
		name  string
		edit  func(r *drillReport)
		cause string // "" when the drill passes
	}{
		{"stuck on the old active", func(r *drillReport) {}, "b:2 is active now, but the clients got no lock after the action: their requests stayed with the old active"},
		{"errors only", func(r *drillReport) {
			r.Errors, r.FirstError, r.ErrorKinds["unavailable"] = 3, "acquire k: no lockd node available", 3
		}, "only 3 errors (first: acquire k: no lockd node available)"},
		{"no active at all", func(r *drillReport) { r.ActiveAfter = "" }, "no node is active now"},
		{"old epoch only", func(r *drillReport) { r.GrantsAfter = 40 }, "every grant after the action came from the old active's epoch"},
		{"taken over", func(r *drillReport) { r.GrantsAfter, r.TookOver, r.Takeover = 40, true, time.Second }, ""},
		{"active unchanged", func(r *drillReport) { r.ActiveAfter = "a:1" }, ""},
	} {
		r := base
		r.ErrorKinds = map[string]int{}
		tc.edit(&r)
		r.judge(p)
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
