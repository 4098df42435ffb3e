package core

func init() { planted.m = make(map[*Core]bug) }

// plantedBugs are the bugs the simulator plants by name (simOptions.planted).
var plantedBugs = map[string]bug{
	"no-epoch-bump":                  bugNoSucceed,
	"low-priority-stays":             bugNoDemote,
	"guess-on-unconfirmed-handoff":   bugGuess,
	"promote-before-the-stream-ends": bugNoWait,
	"answers-before-acks":            bugEarly,
	"acquire-ids-ignored":            bugNoIDs,
	"no-waiter-places":               bugNoPlaces,
}

// plant plants the bug named name in c, if it is one of plantedBugs, and
// forgets c's earlier bugs.
func plant(c *Core, name string) {
	b, ok := plantedBugs[name]
	if !ok {
		return
	}
	planted.Lock()
	planted.m[c] = b
	planted.Unlock()
}

// unplant forgets c, a core the simulator is done with.
func unplant(c *Core) {
	planted.Lock()
	delete(planted.m, c)
	planted.Unlock()
}
