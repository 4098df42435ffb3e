package core

// bug is a bug the simulator's own test plants in a core, to show that
// the simulator finds it (sim_plant_test.go). A core checks for one with
// c.has(b): in a build without the lockd_plant tag (every build but the
// tests') that is a constant false, and nothing is planted or looked up.
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
