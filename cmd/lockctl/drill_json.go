package main

import (
	"github.com/lockd-io/lockd/cmd/internal/drill"
)

// drillJSON is the --json shape of drill; it is part of lockctl's
// contract with scripts.
type drillJSON struct {
	Workers         int              `json:"workers"`
	Keys            int              `json:"keys"`
	LeaseSeconds    float64          `json:"lease_seconds"`
	DurationSeconds float64          `json:"duration_seconds"`
	Action          drillActionJSON  `json:"action"`
	ActiveBefore    *string          `json:"active_before"`
	ActiveAfter     *string          `json:"active_after"`
	Cycles          int              `json:"cycles"`
	Grants          int              `json:"grants"`
	Errors          int              `json:"errors"`
	ErrorKinds      map[string]int   `json:"error_kinds"`
	FirstError      *string          `json:"first_error"`
	Lost            int              `json:"lost"`
	LostGrants      int              `json:"lost_grants"`
	LostReleases    int              `json:"lost_releases"`
	InDoubt         int              `json:"in_doubt"`
	Ghosts          int              `json:"ghosts"`
	UncheckedKeys   int              `json:"unchecked_keys"`
	StallMs         *float64         `json:"stall_ms"`
	StallKey        *string          `json:"stall_key"`
	StallCause      *string          `json:"stall_cause"`
	GapMs           float64          `json:"gap_ms"`
	TakeoverMs      *float64         `json:"takeover_ms"`
	GapFromSeconds  float64          `json:"gap_from_seconds"`
	GapToSeconds    float64          `json:"gap_to_seconds"`
	Fencing         drillFencingJSON `json:"fencing"`
	Pass            bool             `json:"pass"`
	Failures        []string         `json:"failures"`
}

type drillActionJSON struct {
	Kind      string  `json:"kind"`
	Command   *string `json:"command"`
	AtSeconds float64 `json:"at_seconds"`
	OK        bool    `json:"ok"`
	Detail    string  `json:"detail"`
}

type drillFencingJSON struct {
	OK         bool                 `json:"ok"`
	Violations []drillViolationJSON `json:"violations"`
}

type drillViolationJSON struct {
	Key            string  `json:"key"`
	Token          uint64  `json:"token,string"`
	AtSeconds      float64 `json:"at_seconds"`
	After          uint64  `json:"after,string"`
	AfterAtSeconds float64 `json:"after_at_seconds"`
}

// nullIfEmpty is s for JSON, null when empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func drillJSONOf(r *drill.Report, p drill.Plan) drillJSON {
	out := drillJSON{
		Workers: p.Workers, Keys: p.Keys,
		LeaseSeconds: seconds(p.Lease), DurationSeconds: seconds(p.Duration),
		Action: drillActionJSON{Kind: p.Action, Command: nullIfEmpty(p.Command),
			AtSeconds: seconds(r.ActionAt), OK: r.ActionOK, Detail: r.ActionDetail},
		ActiveBefore: nullIfEmpty(r.ActiveBefore), ActiveAfter: nullIfEmpty(r.ActiveAfter),
		Cycles: r.Cycles, Grants: r.Grants, Errors: r.Errors, ErrorKinds: r.ErrorKinds,
		FirstError: nullIfEmpty(oneLine(r.FirstError)),
		Lost:       r.Lost(), LostGrants: r.LostGrants, LostReleases: len(r.LostReleases), InDoubt: r.InDoubt, Ghosts: len(r.Ghosts), UncheckedKeys: r.Unchecked,
		GapMs: millis(r.Gap), GapFromSeconds: seconds(r.GapFrom), GapToSeconds: seconds(r.GapTo),
		Fencing:  drillFencingJSON{OK: r.ViolationCount == 0, Violations: []drillViolationJSON{}},
		Pass:     len(r.Failures) == 0,
		Failures: []string{},
	}
	if r.TookOver {
		ms := millis(r.Takeover)
		out.TakeoverMs = &ms
	}
	if h, ok := r.LongestStall(); ok {
		ms, cause := millis(h.Stall), h.Cause()
		out.StallMs, out.StallKey, out.StallCause = &ms, &h.Key, &cause
	}
	if p.Action == drill.ActionNone {
		out.Action.AtSeconds = 0
	}
	for _, v := range r.Violations {
		out.Fencing.Violations = append(out.Fencing.Violations, drillViolationJSON{Key: v.Key, Token: v.Token,
			AtSeconds: seconds(v.At), After: v.After, AfterAtSeconds: seconds(v.AfterAt)})
	}
	out.Failures = append(out.Failures, r.Failures...)
	return out
}
