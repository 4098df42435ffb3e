//go:build !lockd_plant

package cluster

// play cannot make a node play a fault in a build without the
// lockd_plant tag: the test that asks skips (make test passes the tag).
func (tn *testNode) play(fault) {
	tn.t.Skip("a node plays faults only in go test -tags lockd_plant, as make test runs it")
}

func (tn *testNode) forget() {}
