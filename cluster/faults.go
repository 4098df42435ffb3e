package cluster

// fault is a failure a test makes a node play (faults_test.go): a node
// checks for one with n.playing(f), which in a build without the
// lockd_plant tag (every build but the tests') is a constant false.
type fault uint8

const (
	// faultCrash: stop as kill -9 would, without a handoff.
	faultCrash fault = 1 << iota
	// faultLoseTakeover: on taking a handoff, close the stream without
	// confirming (O), as when the link breaks right then.
	faultLoseTakeover
)
