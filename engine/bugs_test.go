package engine

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a fataler that stops the walk at the first failure and
// keeps its message.
type recorder struct{ msg string }

type stopped struct{}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(stopped{})
}

// walkFails runs the walk with b planted and returns the first failure
// the model reports, "" if none.
func walkFails(seed uint64, w rwWalk) (msg string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(stopped); !ok {
				msg = fmt.Sprint("panic: ", p)
				return
			}
			msg = r.msg
		}
	}()
	runRandomRW(r, seed, w)
	return ""
}

// TestModelCatchesPlantedBugs plants in the engine, one at a time, the
// bugs the model is there to catch, and requires the walks to report
// each for what it is. A model that passes a broken engine proves
// nothing.
func TestModelCatchesPlantedBugs(t *testing.T) {
	for _, c := range []struct {
		name string
		bug  bug
		sets bool
		want []string // the failure names one of these
	}{
		{"readers pass a waiting writer", bugReadersOvertake, false, []string{"writer fairness"}},
		{"a reader beside a writer", bugReaderBesideWriter, false, []string{"a reader beside a writer"}},
		{"a set granted with one key not free", bugSetGrantedEarly, true, []string{"beside", "does not admit", "writer fairness", "past its limit"}},
		{"a waiter leaves and lets nobody through", bugNoSettleOnLeave, false, []string{"a grant lost"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var msg string
			for seed := uint64(1); seed <= 4 && msg == ""; seed++ {
				msg = walkFails(seed, rwWalk{sets: c.sets, bug: c.bug, steps: 4000, drains: true})
			}
			if msg == "" {
				t.Fatal("the walks passed an engine with the bug planted")
			}
			found := false
			for _, w := range c.want {
				found = found || strings.Contains(msg, w)
			}
			if !found {
				t.Fatalf("the walk failed for another reason than the bug: %s", msg)
			}
			t.Logf("caught: %s", msg)
		})
	}
	// And without a bug, the same walks pass.
	if msg := walkFails(1, rwWalk{sets: true, steps: 1000, drains: true}); msg != "" {
		t.Fatalf("the walk fails with no bug planted: %s", msg)
	}
}
