package cluster

// canPlay is whether this build carries the mutations of faults_test.go:
// false here, true in the build of the mutated node, which replaces this
// file.
const canPlay = false
