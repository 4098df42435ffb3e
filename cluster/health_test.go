package cluster

import "testing"

// TestHealthReady covers the readiness rules.
func TestHealthReady(t *testing.T) {
	for _, tc := range []struct {
		h    Health
		want bool
		why  string
	}{
		{Health{Running: false, Role: Active}, false, "not serving: starting or shutting down"},
		{Health{Running: true, Role: Active}, true, "active"},
		{Health{Running: true, Role: Active, Paused: true}, false, "paused: this node did not run for a failure timeout and waits to hear its peers"},
		{Health{Running: true, Role: HandingOff}, false, "handing its role off"},
		{Health{Running: true, Role: Joining}, false, "joining: still learning who is active"},
		{Health{Running: true, Role: Standby}, false, "standby, and no active is known"},
		{Health{Running: true, Role: Standby, Active: "a:1", Following: "a:1"}, false, "standby, not synced with the active a:1 yet"},
		{Health{Running: true, Role: Standby, Active: "a:1", Following: "b:1", StreamLive: true}, false, "standby, not synced with the active a:1 yet"},
		{Health{Running: true, Role: Standby, Active: "a:1", Following: "a:1", StreamLive: true, Lag: ReadyMaxLag + 1}, false, "standby, 1001 records behind the active a:1"},
		{Health{Running: true, Role: Standby, Active: "a:1", Following: "a:1", StreamLive: true, Lag: 7}, true, "standby, caught up with the active a:1 (7 records behind)"},
	} {
		if ok, why := tc.h.Ready(); ok != tc.want || why != tc.why {
			t.Errorf("%+v: Ready() = %v %q, want %v %q", tc.h, ok, why, tc.want, tc.why)
		}
	}
}
