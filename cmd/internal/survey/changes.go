package survey

import (
	"cmp"
	"slices"

	"github.com/lockd-io/lockd/proto"
)

// MaxChanges is how many role changes a view keeps: the newest, as many
// as one node tells of itself. A cluster that moved its role more often
// than that in a while has an operator reading the nodes' logs anyway.
const MaxChanges = 8

// MergeChanges is the cluster's role changes from what each node says
// of itself: every move of the role has the node that took it, so the
// lists together are the cluster's history, as far as the nodes asked
// remember it. A change told twice (one node reached under two names)
// counts once. The result is oldest first, the newest keep of them.
//
// The times are each node's own clock: on machines whose clocks differ,
// changes close together may show out of the order they happened in.
func MergeChanges(lists [][]proto.RoleChange, keep int) []proto.RoleChange {
	type key struct {
		ms               int64
		from, to, reason string
	}
	seen := make(map[key]bool)
	var out []proto.RoleChange
	for _, l := range lists {
		for _, c := range l {
			k := key{c.At.UnixMilli(), c.From, c.To, c.Reason}
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, c)
		}
	}
	// Ties (two nodes that claim the role in the same millisecond, as in
	// a healing partition) are ordered by their words, so that two runs
	// show the same list.
	slices.SortFunc(out, func(a, b proto.RoleChange) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.To, b.To),
			cmp.Compare(a.From, b.From), cmp.Compare(a.Reason, b.Reason))
	})
	if keep >= 0 && len(out) > keep {
		out = out[len(out)-keep:]
	}
	return out
}
