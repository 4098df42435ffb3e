package cluster

func init() { faults.m = make(map[*Node]fault) }

// play makes n play f from now on, until the test ends.
func (tn *testNode) play(f fault) {
	faults.Lock()
	faults.m[tn.Node] |= f
	faults.Unlock()
}

// forget ends what tn plays.
func (tn *testNode) forget() {
	faults.Lock()
	delete(faults.m, tn.Node)
	faults.Unlock()
}
