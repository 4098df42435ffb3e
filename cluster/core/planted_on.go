//go:build lockd_plant

package core

import "sync"

// planted holds the bugs planted in cores, by core: only the simulator's
// tests plant any (sim_plant_test.go), and only builds with the
// lockd_plant tag, which make test passes to them, compile this file.
var planted sync.Map // *Core -> bug

// has reports whether b is planted in c.
func (c *Core) has(b bug) bool {
	v, ok := planted.Load(c)
	return ok && v.(bug)&b != 0
}

// plantable says whether this build can plant bugs.
const plantable = true
