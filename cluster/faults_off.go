//go:build !lockd_plant

package cluster

// playing reports whether n plays f: never, in a build without the
// lockd_plant tag.
func (n *Node) playing(fault) bool { return false }

// canPlay says whether this build can make nodes play faults.
const canPlay = false
