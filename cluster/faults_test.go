package cluster

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/lockd-io/lockd/cluster/internal/mutant"
)

// A test makes a node play a failure (kill -9, a lost confirmation) that
// a real process would, in process. The code that plays it is a mutation
// of the node's sources: the files lockd ships carry no hook for it.
// TestNodesPlayFaults compiles this package's tests once more with every
// mutation applied (go test -overlay), each behind a check n.playing(f)
// that is false until the test makes its node play f, and runs the tests
// that play faults in that build, where canPlay is true; in the plain
// build they skip (playsFaults).

// fault is a failure a test makes a node play.
type fault uint8

const (
	// faultCrash: stop as kill -9 would, without a handoff, writing and
	// saying nothing more.
	faultCrash fault = 1 << iota
	// faultLoseTakeover: on taking a handoff, close the stream without
	// confirming (O), as when the link breaks right then.
	faultLoseTakeover
)

// faultMutations are the faults, as source.
var faultMutations = []mutant.Mutation{
	{File: "node.go",
		Clean:   "\tn.handOffAndDrain()\n",
		Planted: "\tif !n.playing(faultCrash) {\n\t\tn.handOffAndDrain()\n\t}\n"},
	{File: "conn.go",
		Clean:   "\tn.core.ConnClosed(n.now(), core.ConnID(c.id))\n",
		Planted: "\tif n.playing(faultCrash) {\n\t\tn.mu.Unlock()\n\t\treturn\n\t}\n\tn.core.ConnClosed(n.now(), core.ConnID(c.id))\n"},
	{File: "durable.go",
		Clean:   "\t\tdone, err := d.log.Sync()\n",
		Planted: "\t\tif n.playing(faultCrash) {\n\t\t\tcontinue\n\t\t}\n\t\tdone, err := d.log.Sync()\n"},
	{File: "durable.go",
		Clean:   "\tif d.err == nil {\n\t\td.log.Sync()\n",
		Planted: "\tif !n.playing(faultCrash) && d.err == nil {\n\t\td.log.Sync()\n"},
	{File: "carry.go",
		Clean:   "\t\t\tf.reply(a.Line, k.direct)\n",
		Planted: "\t\t\tif n.playing(faultLoseTakeover) {\n\t\t\t\tf.stop()\n\t\t\t\treturn\n\t\t\t}\n\t\t\tf.reply(a.Line, k.direct)\n"},
}

// faults holds the faults nodes play.
var faults mutant.Planted[*Node, fault]

// playing reports whether n plays f. Only the mutated sources call it.
func (n *Node) playing(f fault) bool { return faults.Has(n, f) }

// play makes n play f from now on, until the test ends.
func (tn *testNode) play(f fault) {
	if !canPlay {
		tn.t.Fatal("a test that plays a fault calls playsFaults first: the plain build cannot play one")
	}
	faults.Add(tn.Node, f)
}

// playsFaults skips, in the plain build, a test that makes a node play a
// fault, before it starts any: TestNodesPlayFaults runs it in the mutated
// build.
func playsFaults(t *testing.T) {
	t.Helper()
	if !canPlay {
		t.Skip("plays a fault: TestNodesPlayFaults runs it in a build of the mutated node")
	}
}

// forget ends what tn plays.
func (tn *testNode) forget() { faults.Forget(tn.Node) }

// TestFaultMutationsApply keeps the mutations in step with the sources in
// every build.
func TestFaultMutationsApply(t *testing.T) {
	mutant.Sources(t, faultMutations)
}

// TestNodesPlayFaults builds this package's tests with the faults
// planted as mutations and runs the tests that play them.
func TestNodesPlayFaults(t *testing.T) {
	if canPlay {
		t.Skip("this is the mutated build")
	}
	sources := mutant.Sources(t, faultMutations)
	sources["faults_canplay_test.go"] = "package cluster\n\nconst canPlay = true\n"
	mutant.Run(t, mutant.Build(t, sources), faultTests(t)...)
}

// faultTests are the tests that make a node play a fault: those that
// begin with playsFaults.
func faultTests(t *testing.T) []string {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\) \{\n\tplaysFaults\(t\)$`)
	var names []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			names = append(names, string(m[1]))
		}
	}
	if len(names) == 0 {
		t.Fatal("no test begins with playsFaults")
	}
	return names
}
