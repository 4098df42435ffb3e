//go:build lockd_plant

package core

// plant plants the bug named name in c, if it is one of plantedBugs, and
// forgets c's earlier bugs.
func plant(c *Core, name string) {
	if b, ok := plantedBugs[name]; ok {
		planted.Store(c, b)
	}
}

// unplant forgets c, a core the simulator is done with.
func unplant(c *Core) { planted.Delete(c) }
