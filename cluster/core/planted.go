package core

import "sync"

// bug is a bug the simulator's own test plants in a core, to show that
// the simulator finds it (sim_plant_test.go).
type bug uint8

const (
	bugNoSucceed bug = 1 << iota // promotion keeps the old token epoch
	bugNoDemote                  // a lower-priority active stays after a heal
	bugGuess                     // an unconfirmed handoff is aborted on a guess, not settled by asking
	bugNoWait                    // a standby promotes while the stream from its active is still open
	bugNoIDs                     // acquires are served as if they carried no id
	bugEarly                     // sync mode answers before the standbys acknowledge
	bugNoPlaces                  // a new active keeps no places for the last active's waiters
)

// planted holds the cores with bugs planted. Only this package's tests
// make its map; in a real node it is nil, and a check is one load.
var planted struct {
	sync.Mutex
	m map[*Core]bug
}

// has reports whether b is planted in c.
func (c *Core) has(b bug) bool {
	if planted.m == nil {
		return false
	}
	planted.Lock()
	defer planted.Unlock()
	return planted.m[c]&b != 0
}
