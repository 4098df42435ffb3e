package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	r := &drillReport{Grants: 10, Gap: 250 * time.Millisecond, Errors: 2, LostGrants: 3, ActionOK: true}
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

// --expect-failover fails a drill after which the active is the node
// that was active before, or that had no active to start with; a drill
// whose role moved passes it.
func TestJudgeExpectFailover(t *testing.T) {
	p := drillPlan{Action: actionRun, MaxGap: -1, MaxErrors: -1, MaxLost: -1, ExpectFailover: true}
	for _, tc := range []struct {
		before, after string
		want          string
	}{
		{"10.0.0.1:7070", "10.0.0.1:7070", "--expect-failover: 10.0.0.1:7070 is still the active"},
		{"", "10.0.0.1:7070", "--expect-failover: no node was active"},
		{"10.0.0.1:7070", "10.0.0.2:7070", ""},
	} {
		r := &drillReport{Grants: 10, ActionOK: true, TookOver: true, ActiveBefore: tc.before, ActiveAfter: tc.after}
		r.judge(p)
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

// fakeLocks is an in-memory lock service for drills: one holder per key,
// waiters poll, tokens grow. It can go down for a while, and, with
// forgetLastRelease, its handoff loses the last release it answered, as a
// crash of an asynchronous active may: the key is held again by the
// released token until that grant's lease ends.
type fakeLocks struct {
	mu      sync.Mutex
	next    uint64
	held    map[string]uint64
	down    bool
	handoff int

	forgetLastRelease bool
	ghost             bool                     // handoff grants the last released key to nobody
	leases            map[uint64]time.Duration // lease of each grant
	expires           map[string]time.Time     // when a forgotten holder's lease ends
	lastKey           string                   // the last release answered ok
	lastToken         uint64
	forgot            uint64        // the token handoff re-held, or granted to nobody
	outage            time.Duration // how long a handoff takes; 30ms unless set
}

// holder is the token holding key, if any, once a forgotten holder's
// lease ended. f.mu is held.
func (f *fakeLocks) holder(key string) (uint64, bool) {
	if end, ok := f.expires[key]; ok && !time.Now().Before(end) {
		delete(f.expires, key)
		delete(f.held, key)
	}
	tok, ok := f.held[key]
	return tok, ok
}

func (f *fakeLocks) Acquire(ctx context.Context, key string, lease, wait time.Duration) (client.Lock, error) {
	for {
		f.mu.Lock()
		if f.down {
			f.mu.Unlock()
			return client.Lock{}, client.ErrUnavailable
		}
		if _, ok := f.holder(key); !ok {
			f.next++
			f.held[key] = f.next
			if f.leases != nil {
				f.leases[f.next] = lease
			}
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
	if tok, ok := f.holder(key); !ok || tok != token {
		return client.ErrNotHeld
	}
	delete(f.held, key)
	f.lastKey, f.lastToken = key, token
	return nil
}

func (f *fakeLocks) Queue(ctx context.Context, key string) (proto.Queue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return proto.Queue{}, client.ErrUnavailable
	}
	tok, ok := f.holder(key)
	if !ok {
		return proto.Queue{Key: key}, nil
	}
	return proto.Queue{Key: key, Held: true, Token: tok, Holders: []proto.QueueHolder{{Token: tok}}}, nil
}

func (f *fakeLocks) Handoff(ctx context.Context, to string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handoff++
	if f.forgetLastRelease && f.lastToken != 0 {
		// The release is forgotten, and with it whatever grant of the
		// key followed: replication is in order.
		f.held[f.lastKey] = f.lastToken
		f.expires[f.lastKey] = time.Now().Add(f.leases[f.lastToken])
		f.forgot = f.lastToken
	}
	if f.ghost && f.lastToken != 0 {
		// A grant whose answer went with the old active: the key is
		// held, by a token no client was given.
		f.next++
		f.held[f.lastKey] = f.next
		f.expires[f.lastKey] = time.Now().Add(f.leases[f.lastToken])
		f.forgot = f.next
	}
	f.down = true
	outage := cmp.Or(f.outage, 30*time.Millisecond)
	go func() {
		time.Sleep(outage)
		f.mu.Lock()
		f.down = false
		f.mu.Unlock()
	}()
	return "b:1", nil
}

func TestRunDrillFake(t *testing.T) {
	f := &fakeLocks{held: map[string]uint64{}, outage: 200 * time.Millisecond}
	p := drillPlan{Workers: 4, Keys: 3, Lease: time.Second, Duration: 600 * time.Millisecond,
		Action: actionHandoff, At: 200 * time.Millisecond, MaxGap: 5 * time.Millisecond, MaxErrors: -1, MaxLost: -1}
	rep := runDrill(context.Background(), f, f.status, p)
	rep.judge(p)
	if f.handoff != 1 || !rep.ActionOK || rep.Grants == 0 || rep.Cycles != rep.Grants || rep.ViolationCount != 0 {
		t.Fatalf("report: %+v", rep)
	}
	// The 200ms outage is the longest gap: it covers it. (Not exactly: a
	// loaded machine may pause the workers for a while around it.)
	if rep.Gap < 190*time.Millisecond || rep.GapTo < rep.ActionAt+190*time.Millisecond || rep.GapFrom > rep.ActionAt+10*time.Millisecond {
		t.Errorf("gap %s from %s to %s", rep.Gap, rep.GapFrom, rep.GapTo)
	}
	if rep.lost() != 0 || rep.Unchecked != 0 {
		t.Errorf("lost %d, unchecked %d: a handoff that forgets nothing loses nothing", rep.lost(), rep.Unchecked)
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

// status answers as the fake's one node: active, or handing off while
// it is down.
func (f *fakeLocks) status(ctx context.Context, addr string) (proto.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return proto.Status{Self: addr, Role: "handoff"}, nil
	}
	return proto.Status{Self: addr, Role: roleActive}, nil
}

// drillAcrossAHandoff runs a short drill with a handoff against f, whose
// misbehaviour (a forgotten release, a ghost grant) must have happened
// before the handoff, or t fails saying what.
func drillAcrossAHandoff(t *testing.T, f *fakeLocks, nothing string) (drillPlan, *drillReport) {
	t.Helper()
	f.held, f.leases, f.expires = map[string]uint64{}, map[uint64]time.Duration{}, map[string]time.Time{}
	p := drillPlan{Workers: 4, Keys: 3, Lease: 400 * time.Millisecond, Duration: time.Second,
		Action: actionHandoff, At: 200 * time.Millisecond, MaxGap: -1, MaxErrors: -1, MaxLost: 0}
	rep := runDrill(context.Background(), f, f.status, p)
	rep.judge(p)
	if f.forgot == 0 {
		t.Fatal(nothing + ": the workers released nothing before the handoff")
	}
	return p, rep
}

// Issue 9: a release the old active answered ok and the new one never
// heard of leaves the key held by the released token until its lease
// ends. The drill finds it by asking who holds the key its acquires wait
// on, counts it as lost, and reports the stall.
func TestRunDrillFindsALostRelease(t *testing.T) {
	f := &fakeLocks{forgetLastRelease: true}
	p, rep := drillAcrossAHandoff(t, f, "the fake forgot no release")
	if len(rep.LostReleases) != 1 {
		t.Fatalf("lost releases %+v, want the one of token %d", rep.LostReleases, f.forgot)
	}
	l := rep.LostReleases[0]
	// The key stayed held for the lease from the handoff (a moment after
	// the release), then went to a waiter. (The release may be answered
	// a little after the drill noted the action's start: the fake hands
	// off when the action reaches it.)
	if l.Token != f.forgot || !l.Regranted || l.Stall < p.Lease-50*time.Millisecond || l.Stall > p.Duration ||
		l.FreedAt > l.SeenAt || l.SeenAt < rep.ActionAt {
		t.Errorf("lost release %+v (action at %s), want token %d held for about %s", l, rep.ActionAt, f.forgot, p.Lease)
	}
	// The grant of the key that followed the forgotten release, if one
	// came before the handoff, was lost with it.
	if rep.lost() != rep.LostGrants+1 || rep.LostGrants > 1 {
		t.Errorf("lost %d, lost grants %d", rep.lost(), rep.LostGrants)
	}
	want := fmt.Sprintf("lost %d (%s, 1 release) is over --max-lost 0", rep.lost(), countOf(rep.LostGrants, "grant", "grants"))
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
	f := &fakeLocks{ghost: true}
	p, rep := drillAcrossAHandoff(t, f, "the fake made no ghost")
	if len(rep.Ghosts) != 1 || len(rep.LostReleases) != 0 || rep.lost() != 0 || len(rep.Failures) != 0 {
		t.Fatalf("ghosts %+v, lost releases %+v, lost %d, failures %q; want the ghost %d only", rep.Ghosts, rep.LostReleases, rep.lost(), rep.Failures, f.forgot)
	}
	g := rep.Ghosts[0]
	if g.Token != f.forgot || !g.Regranted || g.Stall < p.Lease-50*time.Millisecond || g.Stall > p.Duration || g.SeenAt < rep.ActionAt {
		t.Errorf("ghost %+v (action at %s), want token %d held for about %s", g, rep.ActionAt, f.forgot, p.Lease)
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
func TestSortNotHeld(t *testing.T) {
	ms := time.Millisecond
	spans := []drillSpan{
		{From: 100 * ms, To: 101 * ms},   // before the action: lost
		{From: 990 * ms, To: 1200 * ms},  // sent before, answered after it began: in doubt
		{From: 1005 * ms, To: 1006 * ms}, // while it ran: in doubt
		{From: 1009 * ms, To: 1300 * ms}, // sent as it ended: in doubt
		{From: 1011 * ms, To: 1012 * ms}, // after it ended: lost
	}
	if lost, doubt := sortNotHeld(spans, true, time.Second, 1010*ms); lost != 2 || doubt != 3 {
		t.Errorf("lost %d, in doubt %d; want 2 and 3", lost, doubt)
	}
	if lost, doubt := sortNotHeld(spans, false, 0, 0); lost != 5 || doubt != 0 {
		t.Errorf("no action: lost %d, in doubt %d; want 5 and 0", lost, doubt)
	}
}

// The accounting of keys held by a token no worker held, case by case:
// a token named as holder by a question sent after its release was
// answered ok is a lost release; one no worker ever received is a ghost
// grant once a later grant of its key shows it ended unreceived, or it was
// seen long enough before the end. Each is counted once, and its stall
// runs from when the key was freed to its next grant after it was seen.
func TestStrandedHoldsAccounting(t *testing.T) {
	ms := time.Millisecond
	name := func(k int) string { return "k" + strconv.Itoa(k) }
	grants := []drillGrant{
		{Key: 4, Token: 30, At: 50 * ms, Released: true, ReleasedAt: 60 * ms},
		{Key: 0, Token: 10, At: 100 * ms, Released: true, ReleasedAt: 101 * ms},
		{Key: 1, Token: 11, At: 100 * ms, Released: true, ReleasedAt: 500 * ms},
		{Key: 3, Token: 13, At: 120 * ms}, // its release said notheld: a lost grant, not a release
		{Key: 2, Token: 12, At: 140 * ms, Released: true, ReleasedAt: 150 * ms},
		{Key: 1, Token: 21, At: 600 * ms, Released: true, ReleasedAt: 601 * ms},
		{Key: 0, Token: 20, At: 1100 * ms, Released: true, ReleasedAt: 1101 * ms},
		{Key: 0, Token: 22, At: 1200 * ms, Released: true, ReleasedAt: 1201 * ms},
		{Key: 5, Token: 40, At: 1500 * ms, Released: true, ReleasedAt: 1501 * ms},
		{Key: 6, Token: 50, At: 1500 * ms, Released: true, ReleasedAt: 1502 * ms},
		{Key: 6, Token: 51, At: 1700 * ms, Released: true, ReleasedAt: 1701 * ms},
	}
	seen := []holderSeen{
		{At: 400 * ms, Key: 2, Holders: []uint64{12}}, // again, later: counted once, seen first at 200ms
		{At: 300 * ms, Key: 0, Holders: []uint64{10}},
		{At: 300 * ms, Key: 1, Holders: []uint64{11}}, // asked before its release was answered: held then
		{At: 200 * ms, Key: 2, Holders: []uint64{12}},
		{At: 300 * ms, Key: 3, Holders: []uint64{13}},
		{At: 310 * ms, Key: 4, Holders: []uint64{99}},  // never received, long before the end: a ghost
		{At: 320 * ms, Key: 1, Holders: []uint64{10}},  // a token of another key
		{At: 1600 * ms, Key: 5, Holders: []uint64{98}}, // never received so far, but its answer may be on the way
		{At: 1600 * ms, Key: 6, Holders: []uint64{97}}, // never received, and the key went on to 51: a ghost
	}
	lost, ghosts := strandedHolds(grants, seen, 2*time.Second, name)
	wantLost := []strandedHold{
		{Key: "k0", Token: 10, FreedAt: 101 * ms, SeenAt: 300 * ms, Stall: 999 * ms, Regranted: true},
		{Key: "k2", Token: 12, FreedAt: 150 * ms, SeenAt: 200 * ms, Stall: 1850 * ms},
	}
	wantGhosts := []strandedHold{
		{Key: "k4", Token: 99, Ghost: true, FreedAt: 60 * ms, SeenAt: 310 * ms, Stall: 1940 * ms},
		{Key: "k6", Token: 97, Ghost: true, FreedAt: 1502 * ms, SeenAt: 1600 * ms, Stall: 198 * ms, Regranted: true},
	}
	if !slices.Equal(lost, wantLost) {
		t.Errorf("lost releases\n got %+v\nwant %+v", lost, wantLost)
	}
	if !slices.Equal(ghosts, wantGhosts) {
		t.Errorf("ghost grants\n got %+v\nwant %+v", ghosts, wantGhosts)
	}
	if lost, ghosts := strandedHolds(grants, nil, 2*time.Second, name); lost != nil || ghosts != nil {
		t.Errorf("nothing seen, yet lost %+v, ghosts %+v", lost, ghosts)
	}
	r := drillReport{LostGrants: 1, LostReleases: wantLost}
	if h, ok := r.longestStall(); !ok || h.Key != "k2" || h.cause() != "lost release" || r.lost() != 3 {
		t.Errorf("longest stall %+v %v, lost %d", h, ok, r.lost())
	}
	// A ghost is no lost answer (no client was told of it), but its stall
	// counts.
	r.Ghosts = wantGhosts
	if h, ok := r.longestStall(); !ok || h.Key != "k4" || h.cause() != "ghost grant" || r.lost() != 3 {
		t.Errorf("longest stall %+v %v, lost %d", h, ok, r.lost())
	}
}

// The report of lost grants and releases, in text and JSON, and the
// verdict of --max-lost.
func TestDrillReportsWhatWasLost(t *testing.T) {
	ms := time.Millisecond
	p := drillPlan{Workers: 8, Keys: 16, Duration: 6 * time.Second, Action: actionRun, Command: "kill -9 1",
		At: 2 * time.Second, MaxGap: -1, MaxErrors: -1, MaxLost: 0}
	base := drillReport{ActiveBefore: "a:1", ActiveAfter: "b:2", ActionOK: true, ActionAt: 2 * time.Second,
		Grants: 100, Cycles: 99, GrantsAfter: 40, TookOver: true, Takeover: 5 * ms, ErrorKinds: map[string]int{}}
	for _, tc := range []struct {
		name     string
		edit     func(r *drillReport)
		lines    []string // in the text report
		failure  string   // "" when the drill passes
		stallMs  float64  // 0: null
		stallKey string
	}{
		{"nothing lost", func(r *drillReport) {}, []string{"lost:     0 (limit 0)\n"}, "", 0, ""},
		{"a grant", func(r *drillReport) { r.LostGrants = 1 },
			[]string{"lost:     1: 1 grant (release said notheld) (limit 0)\n"},
			"lost 1 (1 grant, 0 releases) is over --max-lost 0", 0, ""},
		{"grants and releases", func(r *drillReport) {
			r.LostGrants = 1
			r.LostReleases = []strandedHold{
				{Key: "k2", Token: 5, FreedAt: 2001 * ms, SeenAt: 2300 * ms, Stall: 4870 * ms, Regranted: true},
				{Key: "k5", Token: 6, FreedAt: 2002 * ms, SeenAt: 6001 * ms, Stall: 3998 * ms},
			}
		}, []string{
			"lost:     3: 1 grant (release said notheld), 2 releases (answered ok, then still held on the active) (limit 0)\n",
			"stall:    4.87s on key k2 by a lost release: released at 2.001s, granted again at 6.871s\n",
		}, "lost 3 (1 grant, 2 releases) is over --max-lost 0", 4870, "k2"},
		{"held at the end", func(r *drillReport) {
			r.LostReleases = []strandedHold{{Key: "k5", Token: 6, FreedAt: 2002 * ms, SeenAt: 6001 * ms, Stall: 3998 * ms}}
		}, []string{
			"lost:     1: 1 release (answered ok, then still held on the active) (limit 0)\n",
			"stall:    3.998s on key k5 by a lost release: released at 2.002s, still held at the drill's end\n",
		}, "lost 1 (0 grants, 1 release) is over --max-lost 0", 3998, "k5"},
		{"a ghost and releases in doubt", func(r *drillReport) {
			r.InDoubt = 4
			r.Ghosts = []strandedHold{{Key: "k7", Token: 9, Ghost: true, FreedAt: 2003 * ms, SeenAt: 2300 * ms, Stall: 3997 * ms}}
		}, []string{
			"lost:     0 (limit 0)\n",
			"in doubt: 4 releases in flight during the action came back notheld: applied by the old active and answered too late, or their grants were lost (not counted as lost)\n",
			"ghosts:   1 key held by a grant no worker received: its answer was lost, and the acquire sent again waited behind it\n",
			"stall:    3.997s on key k7 by a ghost grant: freed at 2.003s, still held at the drill's end\n",
		}, "", 3997, "k7"},
		{"keys not checked", func(r *drillReport) { r.Unchecked = 2 },
			[]string{"lost:     0; 2 keys could not be asked about at the end (limit 0)\n"},
			"2 keys could not be asked about at the end, so --max-lost 0 is not proven: see that the cluster has an active (lockctl status) and run the drill again", 0, ""},
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
		if err := printJSON(&b, r.json(p)); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		wantJSON := map[string]any{"lost": float64(r.lost()), "lost_grants": float64(r.LostGrants),
			"lost_releases": float64(len(r.LostReleases)), "in_doubt": float64(r.InDoubt), "ghosts": float64(len(r.Ghosts)),
			"unchecked_keys": float64(r.Unchecked), "stall_ms": nil, "stall_key": nil, "stall_cause": nil}
		if h, ok := r.longestStall(); ok {
			wantJSON["stall_ms"], wantJSON["stall_key"], wantJSON["stall_cause"] = tc.stallMs, tc.stallKey, h.cause()
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
	r.judge(drillPlan{Action: actionRun, MaxGap: -1, MaxErrors: -1, MaxLost: -1})
	if len(r.Failures) != 0 {
		t.Errorf("no bound, yet failures %q", r.Failures)
	}
}

// The last look asks about each key once; a key it cannot ask about is
// counted, so a drill bound by --max-lost does not pass on no evidence.
func TestHolderProbeSweep(t *testing.T) {
	f := &fakeLocks{held: map[string]uint64{"k1": 7}}
	name := func(k int) string { return "k" + strconv.Itoa(k) }
	p := drillPlan{Workers: 4, Lease: time.Second}
	h := newHolderProbe(f, p, name, time.Now())
	if n := h.sweep(context.Background(), []int32{0, 1, 2}); n != 0 {
		t.Errorf("%d keys unchecked on a reachable node", n)
	}
	if len(h.seen) != 1 || h.seen[0].Key != 1 || !slices.Equal(h.seen[0].Holders, []uint64{7}) {
		t.Errorf("seen %+v, want k1 held by 7", h.seen)
	}
	f.down = true
	if n := h.sweep(context.Background(), []int32{0, 1, 2}); n != 3 {
		t.Errorf("%d keys unchecked on a node that is down, want 3", n)
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
