package core

import (
	"strings"
	"testing"

	"github.com/lockd-io/lockd/cluster/internal/mutant"
)

// The simulator proves it finds real bugs by finding planted ones. A
// planted bug is a mutation of the core's own source: the files the core
// ships carry no hook for it. TestPlantedBugsAreCaught compiles this
// package's tests once more with every mutation applied (go test
// -overlay), each behind a check c.has(b) that is false until a test
// plants b in a core, and runs the tests that plant bugs in that build,
// where plantable is true.

// bug is a bug the simulator plants in a core.
type bug uint8

const (
	bugNoSucceed bug = 1 << iota // promotion keeps the old token epoch
	bugNoDemote                  // a lower-priority active stays after a heal
	bugGuess                     // an unconfirmed handoff is aborted on a guess, not settled by asking
	bugNoWait                    // a standby promotes while the stream from its active is still open
	bugNoIDs                     // acquires are served as if they carried no id
	bugEarly                     // sync mode answers before the standbys acknowledge
	bugNoPlaces                  // a new active keeps no places for the last active's waiters
	bugAsReaders                 // a standby applies every holder it is streamed as a reader
)

// plantedBugs are the bugs the simulator plants by name (simOptions.planted).
var plantedBugs = map[string]bug{
	"no-epoch-bump":                  bugNoSucceed,
	"low-priority-stays":             bugNoDemote,
	"guess-on-unconfirmed-handoff":   bugGuess,
	"promote-before-the-stream-ends": bugNoWait,
	"answers-before-acks":            bugEarly,
	"acquire-ids-ignored":            bugNoIDs,
	"no-waiter-places":               bugNoPlaces,
	"writers-applied-as-readers":     bugAsReaders,
}

// mutations are the bugs of plantedBugs, as source.
var mutations = []mutant.Mutation{
	{File: "roles.go",
		Clean:   "\t// before it took the role): wait for it rather than compete.\n\treturn true\n",
		Planted: "\t// before it took the role): wait for it rather than compete.\n\treturn !c.has(bugNoWait)\n"},
	{File: "roles.go",
		Clean:   "c.follow.target == c.active:",
		Planted: "c.follow.target == c.active && !c.has(bugNoWait):"},
	{File: "roles.go",
		Clean:   "\tcase yieldPriority:\n\t\treturn true, ",
		Planted: "\tcase yieldPriority:\n\t\tif c.has(bugNoDemote) {\n\t\t\treturn false, \"\"\n\t\t}\n\t\treturn true, "},
	{File: "roles.go",
		Clean:   "\tc.eng.Succeed(now)\n",
		Planted: "\tif !c.has(bugNoSucceed) {\n\t\tc.eng.Succeed(now)\n\t}\n"},
	{File: "sets.go",
		Clean:   "\tid := req.ID\n\tvar buf",
		Planted: "\tid := req.ID\n\tif c.has(bugNoIDs) {\n\t\tid = \"\"\n\t}\n\tvar buf"},
	{File: "sets.go",
		Clean:   "\tc.seq++\n\tfor _, r := range rows {\n\t\tc.eng.ApplyHolder(",
		Planted: "\tc.seq++\n\tfor _, r := range rows {\n\t\tif c.has(bugAsReaders) {\n\t\t\tr.Shared = true\n\t\t}\n\t\tc.eng.ApplyHolder("},
	{File: "ghosts.go",
		Clean:   "if len(c.rwait) == 0 {",
		Planted: "if len(c.rwait) == 0 || c.has(bugNoPlaces) {"},
	{File: "sync.go",
		Clean:   "!c.waits()) && c.onDisk()",
		Planted: "!c.waits() || c.has(bugEarly)) && c.onDisk()"},
	{File: "requests.go",
		Clean:   "\tid := req.ID\n\tfresh := ",
		Planted: "\tid := req.ID\n\tif c.has(bugNoIDs) {\n\t\tid = \"\"\n\t}\n\tfresh := "},
	{File: "handoff.go",
		Clean:   "\th.resolving, h.why, h.resolveSince = true, why, now\n",
		Planted: "\tif c.has(bugGuess) {\n\t\tc.abortHandoff(now, why)\n\t\treturn\n\t}\n\th.resolving, h.why, h.resolveSince = true, why, now\n"},
}

// planted holds the bugs planted in cores.
var planted mutant.Planted[*Core, bug]

// has reports whether b is planted in c. Only the mutated sources call it.
func (c *Core) has(b bug) bool { return planted.Has(c, b) }

// plant plants the bug named name in c, if it is one of plantedBugs, and
// forgets c's earlier bugs.
func plant(c *Core, name string) {
	if b, ok := plantedBugs[name]; ok {
		planted.Set(c, b)
	}
}

// unplant forgets c, a core the simulator is done with.
func unplant(c *Core) { planted.Forget(c) }

// needPlantable skips a test that plants bugs in the plain build:
// TestPlantedBugsAreCaught runs it in the mutated one.
func needPlantable(t interface{ Skip(...any) }) {
	if !plantable {
		t.Skip("plants bugs: TestPlantedBugsAreCaught runs it in a build of the mutated core")
	}
}

// TestMutationsApply keeps the mutations in step with the sources, in
// every build: a change to the core that a mutation no longer matches
// fails here at once, not only in the slower mutated build.
func TestMutationsApply(t *testing.T) {
	if len(mutant.Sources(t, mutations)) == 0 {
		t.Fatal("no mutations")
	}
}

// TestPlantedBugsAreCaught builds this package's tests with every bug
// planted as a mutation and runs the tests that plant them. make test
// runs it without the race detector, beside TestSimulate.
func TestPlantedBugsAreCaught(t *testing.T) {
	if plantable {
		t.Skip("this is the mutated build")
	}
	if raceEnabled {
		t.Skip("make test runs it without the race detector, with the simulator's seeds")
	}
	sources := mutant.Sources(t, mutations)
	sources["sim_plantable_test.go"] = "package core\n\nconst plantable = true\n"
	bin := mutant.Build(t, sources)
	out := mutant.Run(t, bin, "TestSimulatorCatchesPlantedBugs", "TestSimSyncCrashLosesNoAnsweredGrant", "TestSimFIFOAcrossFailover")
	t.Logf("the mutated build caught every planted bug:\n%s", grepLines(out, "caught: "))
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
