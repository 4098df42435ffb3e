package drill

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cmd/internal/drill/drilltest"
	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto/client"
)

func TestLongestGap(t *testing.T) {
	ms := time.Millisecond
	g := []Grant{{At: 1 * ms}, {At: 2 * ms}, {At: 50 * ms}, {At: 51 * ms}}
	gap, from, to := LongestGap(g, 60*ms)
	if gap != 48*ms || from != 2*ms || to != 50*ms {
		t.Errorf("got %s from %s to %s", gap, from, to)
	}
	// A cluster that never recovers: the gap lasts until the end.
	gap, from, to = LongestGap(g[:2], 60*ms)
	if gap != 58*ms || from != 2*ms || to != 60*ms {
		t.Errorf("no recovery: got %s from %s to %s", gap, from, to)
	}
	if gap, _, _ := LongestGap(nil, 60*ms); gap != 60*ms {
		t.Errorf("no grant at all: gap %s", gap)
	}
}

func TestSortNotHeld(t *testing.T) {
	ms := time.Millisecond
	spans := []Span{
		{From: 100 * ms, To: 101 * ms},   // before the action: lost
		{From: 990 * ms, To: 1200 * ms},  // sent before, answered after it began: in doubt
		{From: 1005 * ms, To: 1006 * ms}, // while it ran: in doubt
		{From: 1009 * ms, To: 1300 * ms}, // sent as it ended: in doubt
		{From: 1011 * ms, To: 1012 * ms}, // after it ended: lost
	}
	if lost, doubt := SortNotHeld(spans, true, time.Second, 1010*ms); lost != 2 || doubt != 3 {
		t.Errorf("lost %d, in doubt %d; want 2 and 3", lost, doubt)
	}
	if lost, doubt := SortNotHeld(spans, false, 0, 0); lost != 5 || doubt != 0 {
		t.Errorf("no action: lost %d, in doubt %d; want 5 and 0", lost, doubt)
	}
}

// A release sent just after a kill command exited may still reach the
// node before the signal stops it: in doubt, not lost.
func TestCommandEffectLandsLater(t *testing.T) {
	ms := time.Millisecond
	spans := []Span{{From: 1030 * ms, To: 2500 * ms}, {From: 1200 * ms, To: 2500 * ms}}
	run := Plan{Action: ActionRun}
	if lost, doubt := SortNotHeld(spans, true, time.Second, run.landed(1010*ms)); lost != 1 || doubt != 1 {
		t.Errorf("after a command: lost %d, in doubt %d; want 1 and 1", lost, doubt)
	}
	handoff := Plan{Action: ActionHandoff}
	if lost, doubt := SortNotHeld(spans, true, time.Second, handoff.landed(1010*ms)); lost != 2 || doubt != 0 {
		t.Errorf("after a handoff: lost %d, in doubt %d; want 2 and 0", lost, doubt)
	}
}

func TestStrandedHoldsAccounting(t *testing.T) {
	ms := time.Millisecond
	name := func(k int) string { return "k" + strconv.Itoa(k) }
	grants := []Grant{
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
	seen := []HolderSeen{
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
	lost, ghosts := StrandedHolds(grants, seen, 2*time.Second, name)
	wantLost := []StrandedHold{
		{Key: "k0", Token: 10, FreedAt: 101 * ms, SeenAt: 300 * ms, Stall: 999 * ms, Regranted: true},
		{Key: "k2", Token: 12, FreedAt: 150 * ms, SeenAt: 200 * ms, Stall: 1850 * ms},
	}
	wantGhosts := []StrandedHold{
		{Key: "k4", Token: 99, Ghost: true, FreedAt: 60 * ms, SeenAt: 310 * ms, Stall: 1940 * ms},
		{Key: "k6", Token: 97, Ghost: true, FreedAt: 1502 * ms, SeenAt: 1600 * ms, Stall: 198 * ms, Regranted: true},
	}
	if !slices.Equal(lost, wantLost) {
		t.Errorf("lost releases\n got %+v\nwant %+v", lost, wantLost)
	}
	if !slices.Equal(ghosts, wantGhosts) {
		t.Errorf("ghost grants\n got %+v\nwant %+v", ghosts, wantGhosts)
	}
	if lost, ghosts := StrandedHolds(grants, nil, 2*time.Second, name); lost != nil || ghosts != nil {
		t.Errorf("nothing seen, yet lost %+v, ghosts %+v", lost, ghosts)
	}
	r := Report{LostGrants: 1, LostReleases: wantLost}
	if h, ok := r.LongestStall(); !ok || h.Key != "k2" || h.Cause() != "lost release" || r.Lost() != 3 {
		t.Errorf("longest stall %+v %v, lost %d", h, ok, r.Lost())
	}
	// A ghost is no lost answer (no client was told of it), but its stall
	// counts.
	r.Ghosts = wantGhosts
	if h, ok := r.LongestStall(); !ok || h.Key != "k4" || h.Cause() != "ghost grant" || r.Lost() != 3 {
		t.Errorf("longest stall %+v %v, lost %d", h, ok, r.Lost())
	}
}

func TestHolderProbeSweep(t *testing.T) {
	f := &drilltest.Locks{Held: map[string]uint64{"k1": 7}}
	name := func(k int) string { return "k" + strconv.Itoa(k) }
	p := Plan{Workers: 4, Lease: time.Second}
	h := newHolderProbe(f, p, name, time.Now())
	if n := h.sweep(context.Background(), []int32{0, 1, 2}); n != 0 {
		t.Errorf("%d keys unchecked on a reachable node", n)
	}
	if len(h.seen) != 1 || h.seen[0].Key != 1 || !slices.Equal(h.seen[0].Holders, []uint64{7}) {
		t.Errorf("seen %+v, want k1 held by 7", h.seen)
	}
	f.Down = true
	if n := h.sweep(context.Background(), []int32{0, 1, 2}); n != 3 {
		t.Errorf("%d keys unchecked on a node that is down, want 3", n)
	}
}

func TestDrillErrorKinds(t *testing.T) {
	for err, want := range map[error]string{
		client.ErrUnavailable:                   "unavailable",
		client.ErrTimeout:                       "timeout",
		&client.ServerError{Msg: "limit"}:       "refused",
		errors.New("something else went wrong"): "other",
	} {
		if got := ErrorKind(err); got != want {
			t.Errorf("%v: %q, want %q", err, got, want)
		}
	}
}

func TestTakeoverMeasuresTheTimeWithoutAnActive(t *testing.T) {
	old, next := uint64(100)<<engine.CounterBits, uint64(200)<<engine.CounterBits
	ms := time.Millisecond
	grants := []Grant{
		{At: 10 * ms, Token: old + 1},
		{At: 20 * ms, Token: old + 2},
		{At: 35 * ms, Token: old + 3}, // the old active still grants after the action began
		{At: 47 * ms, Token: next + 1},
		{At: 50 * ms, Token: next + 2},
	}
	if d, ok := Takeover(grants, 30*ms); !ok || d != 12*ms {
		t.Errorf("takeover = %s, %v; want 12ms from the last old grant to the first new one", d, ok)
	}
	if _, ok := Takeover(grants[:3], 30*ms); ok {
		t.Error("takeover found without any grant from a new epoch")
	}
	// A report draws it from the last old grant.
	if from, d, ok := TakeoverSpan(grants, 30*ms); !ok || from != 35*ms || d != 12*ms {
		t.Errorf("takeover span = %s + %s, %v; want from 35ms, 12ms", from, d, ok)
	}
}

// handoffPlan is a short drill whose action is a handoff of f.
func handoffPlan(f *drilltest.Locks, maxGap time.Duration) Plan {
	return Plan{Workers: 4, Keys: 3, Lease: 400 * time.Millisecond, Duration: time.Second,
		Action: ActionHandoff, At: 200 * time.Millisecond, MaxGap: maxGap, MaxErrors: -1, MaxLost: 0,
		Act: func(ctx context.Context) (bool, string) {
			// As lockctl's handoff does, the action ends once the new
			// active answers.
			to, err := f.Handoff(ctx, "")
			for ctx.Err() == nil {
				f.Mu.Lock()
				down := f.Down
				f.Mu.Unlock()
				if !down {
					break
				}
				time.Sleep(time.Millisecond)
			}
			return err == nil, "handed off to " + to
		}}
}

func TestRunAcrossAnOutage(t *testing.T) {
	f := &drilltest.Locks{Held: map[string]uint64{}, Outage: 200 * time.Millisecond}
	p := handoffPlan(f, -1)
	p.Progress = new(Progress)
	rep := Run(context.Background(), f, p)
	if f.Handoffs != 1 || !rep.ActionOK || rep.ActionDetail != "handed off to b:1" || rep.Grants == 0 || rep.Cycles != rep.Grants || rep.ViolationCount != 0 {
		t.Fatalf("report: %+v", rep)
	}
	// The 200ms outage is the longest gap: it covers it. (Not exactly: a
	// loaded machine may pause the workers for a while around it: the
	// last grant before it may come up to 100 ms after the action began.)
	if rep.Gap < 190*time.Millisecond || rep.GapTo < rep.ActionAt+190*time.Millisecond || rep.GapFrom > rep.ActionAt+100*time.Millisecond {
		t.Errorf("gap %s from %s to %s", rep.Gap, rep.GapFrom, rep.GapTo)
	}
	if rep.Lost() != 0 || rep.Unchecked != 0 || len(rep.Ghosts) != 0 {
		t.Errorf("lost %d, unchecked %d, ghosts %d: a handoff that forgets nothing loses nothing", rep.Lost(), rep.Unchecked, len(rep.Ghosts))
	}
	if rep.Errors == 0 || rep.ErrorKinds["unavailable"] != rep.Errors || rep.FirstError != client.ErrUnavailable.Error() {
		t.Errorf("errors during the outage: %d %v, first %q", rep.Errors, rep.ErrorKinds, rep.FirstError)
	}
	if s := p.Progress.Snapshot(); s.Start.IsZero() || s.Grants != rep.Grants || s.Errors != rep.Errors || !s.Acted || s.Action != rep.ActionDetail {
		t.Errorf("progress %+v; report %d grants, %d errors, action %q", s, rep.Grants, rep.Errors, rep.ActionDetail)
	}
}

// Without an action the drill measures the workload alone: it goes well
// and nothing is taken over.
func TestRunWithoutAction(t *testing.T) {
	f := &drilltest.Locks{Held: map[string]uint64{}}
	p := Plan{Workers: 2, Keys: 2, Lease: time.Second, Duration: 100 * time.Millisecond, Action: ActionNone, At: 50 * time.Millisecond}
	rep := Run(context.Background(), f, p)
	if !rep.ActionOK || rep.ActionDetail != "none" || rep.TookOver || rep.Grants == 0 || rep.Errors != 0 || rep.RemovedActive(p) {
		t.Errorf("report: %+v", rep)
	}
}

// A release the old active answered ok and the new one never heard of
// leaves the key held by the released token until its lease ends: the
// drill finds it by asking who holds the key its acquires wait on.
func TestRunFindsALostRelease(t *testing.T) {
	f := &drilltest.Locks{ForgetLastRelease: true, Held: map[string]uint64{}, Leases: map[uint64]time.Duration{}, Expires: map[string]time.Time{}}
	p := handoffPlan(f, -1)
	rep := Run(context.Background(), f, p)
	if f.Forgot == 0 {
		t.Fatal("the fake forgot no release: the workers released nothing before the handoff")
	}
	if len(rep.LostReleases) != 1 || rep.LostReleases[0].Token != f.Forgot {
		t.Fatalf("lost releases %+v, want the one of token %d", rep.LostReleases, f.Forgot)
	}
	if rep.Lost() != rep.LostGrants+1 {
		t.Errorf("lost %d, lost grants %d", rep.Lost(), rep.LostGrants)
	}
	if h, ok := rep.LongestStall(); !ok || h.Cause() != "lost release" {
		t.Errorf("longest stall %+v %v", h, ok)
	}
}

// A grant whose answer was lost is a ghost, not a lost answer.
func TestRunFindsAGhostGrant(t *testing.T) {
	f := &drilltest.Locks{Ghost: true, Held: map[string]uint64{}, Leases: map[uint64]time.Duration{}, Expires: map[string]time.Time{}}
	rep := Run(context.Background(), f, handoffPlan(f, -1))
	if f.Forgot == 0 {
		t.Fatal("the fake made no ghost: the workers released nothing before the handoff")
	}
	if len(rep.Ghosts) != 1 || rep.Ghosts[0].Token != f.Forgot || len(rep.LostReleases) != 0 || rep.Lost() != 0 {
		t.Fatalf("ghosts %+v, lost releases %+v, lost %d; want the ghost %d only", rep.Ghosts, rep.LostReleases, rep.Lost(), f.Forgot)
	}
	if h, ok := rep.LongestStall(); !ok || h.Cause() != "ghost grant" {
		t.Errorf("longest stall %+v %v", h, ok)
	}
}

func TestCheckFencing(t *testing.T) {
	name := func(k int) string { return "k" + strconv.Itoa(k) }
	ok := []Grant{{Key: 0, Token: 1}, {Key: 1, Token: 2}, {Key: 0, Token: 3}, {Key: 1, Token: 9}}
	if n, v := CheckFencing(ok, name); n != 0 || v != nil {
		t.Errorf("increasing tokens: %d %v", n, v)
	}
	bad := []Grant{{Key: 0, Token: 456}, {Key: 1, Token: 2}, {Key: 0, Token: 123}, {Key: 0, Token: 456}, {Key: 0, Token: 500}}
	n, v := CheckFencing(bad, name)
	if n != 2 || len(v) != 2 || v[0].Key != "k0" || v[0].Token != 123 || v[0].After != 456 || v[1].Token != 456 {
		t.Errorf("violations: %d %+v", n, v)
	}
	var many []Grant
	for i := range MaxViolationsShown + 3 {
		many = append(many, Grant{Key: 0, Token: uint64(100 - i)})
	}
	if n, v := CheckFencing(many, name); n != MaxViolationsShown+2 || len(v) != MaxViolationsShown {
		t.Errorf("%d violations, %d shown; want %d, %d", n, len(v), MaxViolationsShown+2, MaxViolationsShown)
	}
}
