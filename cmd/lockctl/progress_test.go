package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cmd/internal/drill"
)

// drill and bench show a live line on a terminal
// (phase, elapsed, grants so far, the action once it fired), cleared when
// the run ends; on a dumb terminal without escape codes.
func TestProgressLine(t *testing.T) {
	p := drill.Plan{Duration: 6 * time.Second, Action: drill.ActionRun, At: 2 * time.Second}
	var pr drill.Snapshot
	if got := progressLine(pr, p, renderStyle{}); got != "drill: starting" {
		t.Errorf("before the start: %q", got)
	}
	pr.Start, pr.Grants = time.Now().Add(-time.Second), 1234
	if got := progressLine(pr, p, renderStyle{}); !strings.HasPrefix(got, "drill: 1.0s of 6s · 1234 grants · 0 errors · run in 1.0s") {
		t.Errorf("before the action: %q", got)
	}
	pr.Action, pr.Acted = "command exited 0 after 3ms", true
	if got := progressLine(pr, p, renderStyle{ASCII: true}); !strings.HasSuffix(got, " - action: command exited 0 after 3ms") {
		t.Errorf("after the action: %q", got)
	}

	for _, dumb := range []bool{false, true} {
		var w lockedBuffer
		n := 0
		stop := runProgress(&w, func() string { n++; return "drill: " + strings.Repeat("x", 100) }, 5*time.Millisecond, dumb, 40, nil)
		waitUntil(t, func() bool { return strings.Count(w.String(), "drill:") >= 2 })
		stop()
		out := w.String()
		if strings.Contains(out, "\x1b") == dumb {
			t.Errorf("dumb %v: escape codes %v:\n%q", dumb, !dumb, out)
		}
		if strings.Contains(out, strings.Repeat("x", 40)) {
			t.Errorf("dumb %v: the line is not cut to the width: %q", dumb, out)
		}
		if !strings.HasSuffix(out, "\r") && !strings.HasSuffix(out, "\x1b[2K") {
			t.Errorf("dumb %v: the line is not cleared at the end: %q", dumb, out)
		}
	}
	var b benchProgress
	b.cycles.Store(500)
	if got := b.line(time.Now().Add(-time.Second), 10*time.Second, renderStyle{}); !strings.HasPrefix(got, "bench: 1.0s of 10s · 500 cycles (") {
		t.Errorf("bench: %q", got)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("waited 5s")
		}
	}
}
