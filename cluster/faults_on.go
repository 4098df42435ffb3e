//go:build lockd_plant

package cluster

import "sync"

// faults holds the faults nodes play, by node: only this package's tests
// make any (faults_test.go), and only builds with the lockd_plant tag,
// which make test passes to them, compile this file.
var faults sync.Map // *Node -> fault

// playing reports whether n plays f.
func (n *Node) playing(f fault) bool {
	v, ok := faults.Load(n)
	return ok && v.(fault)&f != 0
}

// canPlay says whether this build can make nodes play faults.
const canPlay = true
