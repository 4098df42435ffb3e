package core

import "sync"

// drain carries out what c's events asked, as a shell does: apply runs
// for each action in order, and may call c's events in turn, whose
// actions are carried out next, until none is left.
func drain(c *Core, apply func(Action)) {
	for {
		r := c.Ready()
		if len(r.Actions) == 0 {
			c.Advance(r)
			return
		}
		for _, a := range r.Actions {
			apply(a)
		}
		c.Advance(r)
	}
}

// sinks are the apply functions of the single-node tests' cores, for
// the helpers that drive a core and then carry out what it asked.
var sinks sync.Map // *Core -> func(Action)

// settle carries out what c asked, with the apply function its test
// registered (none: the actions are dropped).
func settle(c *Core) {
	apply := func(Action) {}
	if f, ok := sinks.Load(c); ok {
		apply = f.(func(Action))
	}
	drain(c, apply)
}
