package drill

import (
	"reflect"
	"testing"
	"time"
)

// passing is a drill across a failover that went well: the active moved,
// the new one granted locks, nothing was lost.
func passing() (*Report, Plan) {
	p := Plan{Action: ActionRun, Command: "kill 1", MaxGap: -1, MaxErrors: -1, MaxLost: -1}
	r := &Report{ActiveBefore: "a:1", ActiveAfter: "b:2", ActionOK: true, ActionDetail: "command exited 0 after 1ms",
		Grants: 100, GrantsAfter: 40, TookOver: true, Takeover: 5 * time.Millisecond}
	return r, p
}

// Each failure comes when what it judges is over its bound, and not when
// it is at the bound; a drill without bounds fails on the cluster's
// misdeeds alone.
func TestVerdict(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		edit func(r *Report, p *Plan)
		want []Failure
	}{
		{"a failover that went well", func(r *Report, p *Plan) {}, nil},
		{"bounds met exactly", func(r *Report, p *Plan) {
			r.Gap, p.MaxGap = 300*ms, 300*ms
			r.Errors, p.MaxErrors = 2, 2
			r.LostGrants, r.LostReleases, p.MaxLost = 1, []StrandedHold{{Key: "k"}}, 2
		}, nil},
		{"losses without a bound", func(r *Report, p *Plan) { r.LostGrants, r.Unchecked, r.Errors, r.Gap = 3, 2, 9, time.Second }, nil},
		{"fencing", func(r *Report, p *Plan) {
			r.ViolationCount = 2
			r.Violations = []FenceViolation{{Key: "k1", Token: 5, After: 9}, {Key: "k2", Token: 6, After: 7}}
		}, []Failure{FencingViolated{FenceViolation{Key: "k1", Token: 5, After: 9}}}},
		{"the action failed", func(r *Report, p *Plan) {
			r.ActionOK, r.ActionDetail, r.TookOver = false, "command exit status 3 after 2ms", false
		}, []Failure{ActionFailed{"command exit status 3 after 2ms"}}},
		{"no action cannot fail", func(r *Report, p *Plan) { p.Action, r.ActionOK, r.ActiveAfter = ActionNone, false, "a:1" }, nil},
		{"no active after", func(r *Report, p *Plan) { r.ActiveAfter, r.TookOver = "", false },
			[]Failure{NoTakeover{Before: "a:1", Cause: CauseNoActive}}},
		{"only errors after", func(r *Report, p *Plan) {
			r.TookOver, r.GrantsAfter, r.Errors, r.FirstError = false, 0, 3, "acquire k: no lockd node available"
		}, []Failure{NoTakeover{Before: "a:1", After: "b:2", Cause: CauseOnlyErrors, Errors: 3, FirstError: "acquire k: no lockd node available"}}},
		{"stayed with the old active", func(r *Report, p *Plan) { r.TookOver, r.GrantsAfter = false, 0 },
			[]Failure{NoTakeover{Before: "a:1", After: "b:2", Cause: CauseStayedWithOld}}},
		{"old epoch only", func(r *Report, p *Plan) { r.TookOver = false },
			[]Failure{NoTakeover{Before: "a:1", After: "b:2", Cause: CauseOldEpoch}}},
		{"the active stayed, no takeover needed", func(r *Report, p *Plan) { r.ActiveAfter, r.TookOver = "a:1", false }, nil},
		{"expected a failover, none active before", func(r *Report, p *Plan) { p.ExpectFailover, r.ActiveBefore = true, "" },
			[]Failure{NoActiveBefore{}}},
		{"expected a failover, the active stayed", func(r *Report, p *Plan) { p.ExpectFailover, r.ActiveAfter = true, "a:1" },
			[]Failure{StillActive{"a:1"}}},
		{"expected a failover and got it", func(r *Report, p *Plan) { p.ExpectFailover = true }, nil},
		{"no grant", func(r *Report, p *Plan) { p.Action, r.Grants, r.GrantsAfter, r.TookOver = ActionNone, 0, 0, false },
			[]Failure{NoGrant{}}},
		{"gap", func(r *Report, p *Plan) { r.Gap, p.MaxGap = 301*ms, 300*ms },
			[]Failure{GapOver{Gap: 301 * ms, Max: 300 * ms}}},
		{"errors", func(r *Report, p *Plan) { r.Errors, p.MaxErrors = 1, 0 },
			[]Failure{ErrorsOver{Errors: 1, Max: 0}}},
		{"lost", func(r *Report, p *Plan) {
			r.LostGrants, r.LostReleases, p.MaxLost = 1, []StrandedHold{{Key: "k"}, {Key: "l"}}, 2
		}, []Failure{LostOver{Grants: 1, Releases: 2, Max: 2}}},
		{"lost unproven", func(r *Report, p *Plan) { r.Unchecked, p.MaxLost = 2, 0 },
			[]Failure{LostUnproven{Keys: 2, Max: 0}}},
		{"several, in order", func(r *Report, p *Plan) {
			r.Grants, r.GrantsAfter, r.TookOver, r.ActiveAfter = 0, 0, false, ""
			r.Gap, p.MaxGap = time.Second, 100*ms
			r.Errors, p.MaxErrors = 4, 1
		}, []Failure{NoTakeover{Before: "a:1", Cause: CauseNoActive}, NoGrant{},
			GapOver{Gap: time.Second, Max: 100 * ms}, ErrorsOver{Errors: 4, Max: 1}}},
	} {
		r, p := passing()
		tc.edit(r, &p)
		if got := r.Verdict(p); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: verdict %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestLostOverCountsGrantsAndReleases(t *testing.T) {
	if n := (LostOver{Grants: 2, Releases: 3}).Lost(); n != 5 {
		t.Errorf("lost %d, want 5", n)
	}
}
