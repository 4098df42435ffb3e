package drill

import "time"

// Failure is one reason a drill failed. Each kind is its own type and
// carries the values its reason quotes, raw: the command that ran the
// drill words them and escapes what nodes and keys said.
type Failure interface{ failure() }

// FencingViolated: a token was not larger than an earlier one of its key;
// the first such violation.
type FencingViolated struct{ FenceViolation }

// ActionFailed: the action did not go well; Detail is what it said.
type ActionFailed struct{ Detail string }

// NoTakeover: the action removed the active, and no new active granted a
// lock afterwards, whatever the bounds: the clients never moved.
type NoTakeover struct {
	Before string // the active the action removed
	After  string // the active after the drill, "" when none
	Cause  TakeoverCause
	// Errors and FirstError are what the clients saw instead
	// (CauseOnlyErrors).
	Errors     int
	FirstError string
}

// TakeoverCause says why no new active took over.
type TakeoverCause int

const (
	// CauseNoActive: no node is active after the drill.
	CauseNoActive TakeoverCause = iota + 1
	// CauseOnlyErrors: a node is active, but the clients got no lock
	// after the action, only errors.
	CauseOnlyErrors
	// CauseStayedWithOld: a node is active, but the clients got no lock
	// after the action, and no error either: their requests stayed with
	// the old active.
	CauseStayedWithOld
	// CauseOldEpoch: every grant after the action came from the old
	// active's epoch.
	CauseOldEpoch
)

// NoActiveBefore: the plan expects a failover, but no node was active
// when the drill started, so none could be seen.
type NoActiveBefore struct{}

// StillActive: the plan expects a failover, but Active, the active
// before the drill, is still the active after it.
type StillActive struct{ Active string }

// NoGrant: no lock was granted at all.
type NoGrant struct{}

// GapOver: the longest time without a grant exceeded the plan's bound.
type GapOver struct{ Gap, Max time.Duration }

// ErrorsOver: the clients saw more errors than the plan's bound.
type ErrorsOver struct{ Errors, Max int }

// LostOver: more grants and releases together were lost than the plan's
// bound.
type LostOver struct{ Grants, Releases, Max int }

// Lost is the grants and releases lost together, what the bound counts.
func (f LostOver) Lost() int { return f.Grants + f.Releases }

// LostUnproven: the plan bounds what was lost, but Keys keys could not be
// asked about at the end, so a loss there would go unseen.
type LostUnproven struct{ Keys, Max int }

func (FencingViolated) failure() {}
func (ActionFailed) failure()    {}
func (NoTakeover) failure()      {}
func (NoActiveBefore) failure()  {}
func (StillActive) failure()     {}
func (NoGrant) failure()         {}
func (GapOver) failure()         {}
func (ErrorsOver) failure()      {}
func (LostOver) failure()        {}
func (LostUnproven) failure()    {}

// Verdict checks the report against the plan's bounds and lists why the
// drill failed, in the order a person reads them: what the cluster did
// wrong first, the bounds last. It is empty when the drill passed. The
// report must know the active before and after the drill.
func (r *Report) Verdict(p Plan) []Failure {
	var out []Failure
	if r.ViolationCount > 0 {
		out = append(out, FencingViolated{r.Violations[0]})
	}
	if p.Action != ActionNone && !r.ActionOK {
		out = append(out, ActionFailed{r.ActionDetail})
	}
	if f, ok := r.noTakeover(p); ok {
		out = append(out, f)
	}
	if p.ExpectFailover {
		switch {
		case r.ActiveBefore == "":
			out = append(out, NoActiveBefore{})
		case r.ActiveAfter == r.ActiveBefore:
			out = append(out, StillActive{r.ActiveBefore})
		}
	}
	if r.Grants == 0 {
		out = append(out, NoGrant{})
	}
	if p.MaxGap >= 0 && r.Gap > p.MaxGap {
		out = append(out, GapOver{Gap: r.Gap, Max: p.MaxGap})
	}
	if p.MaxErrors >= 0 && r.Errors > p.MaxErrors {
		out = append(out, ErrorsOver{Errors: r.Errors, Max: p.MaxErrors})
	}
	if p.MaxLost >= 0 && r.Lost() > p.MaxLost {
		out = append(out, LostOver{Grants: r.LostGrants, Releases: len(r.LostReleases), Max: p.MaxLost})
	}
	if p.MaxLost >= 0 && r.Unchecked > 0 {
		out = append(out, LostUnproven{Keys: r.Unchecked, Max: p.MaxLost})
	}
	return out
}

// noTakeover is the failure of a drill whose action removed the active
// when no new active granted anything afterwards; ok is false when that
// did not happen.
func (r *Report) noTakeover(p Plan) (f NoTakeover, ok bool) {
	if !r.RemovedActive(p) || r.TookOver {
		return f, false
	}
	f = NoTakeover{Before: r.ActiveBefore, After: r.ActiveAfter}
	switch {
	case r.ActiveAfter == "":
		f.Cause = CauseNoActive
	case r.GrantsAfter == 0 && r.Errors > 0:
		f.Cause, f.Errors, f.FirstError = CauseOnlyErrors, r.Errors, r.FirstError
	case r.GrantsAfter == 0:
		f.Cause = CauseStayedWithOld
	default:
		f.Cause = CauseOldEpoch
	}
	return f, true
}
