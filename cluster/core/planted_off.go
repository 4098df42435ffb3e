//go:build !lockd_plant

package core

// has reports whether b is planted in c: never, in a build without the
// lockd_plant tag.
func (c *Core) has(bug) bool { return false }

// plantable says whether this build can plant bugs (see planted_on.go).
const plantable = false
