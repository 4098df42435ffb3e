package cluster

import "sync"

// fault is a failure a test makes a node play (faults_test.go).
type fault uint8

const (
	// faultCrash: stop as kill -9 would, without a handoff.
	faultCrash fault = 1 << iota
	// faultLoseTakeover: on taking a handoff, close the stream without
	// confirming (O), as when the link breaks right then.
	faultLoseTakeover
)

// faults holds the nodes playing failures. Only this package's tests make
// its map; in a real node it is nil, and a check is one load.
var faults struct {
	sync.Mutex
	m map[*Node]fault
}

// playing reports whether n plays f.
func (n *Node) playing(f fault) bool {
	if faults.m == nil {
		return false
	}
	faults.Lock()
	defer faults.Unlock()
	return faults.m[n]&f != 0
}
