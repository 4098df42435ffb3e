//go:build lockd_plant

package cluster

// play makes n play f from now on, until the test ends.
func (tn *testNode) play(f fault) {
	old, _ := faults.Load(tn.Node)
	v, _ := old.(fault)
	faults.Store(tn.Node, v|f)
}

// forget ends what tn plays.
func (tn *testNode) forget() { faults.Delete(tn.Node) }
