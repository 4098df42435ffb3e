package survey

import "slices"

// ProblemKind is what is wrong with the cluster.
type ProblemKind int

const (
	// SeveralActive: more than one node claims the active role (a
	// partition is healing).
	SeveralActive ProblemKind = iota + 1
	// NoActive: no node is active, and none is named so.
	NoActive
	// NodeDown: a node lockctl could not reach, and neither could its
	// peers.
	NodeDown
	// NodeUnreachable: a node that did not answer lockctl, for Err.
	NodeUnreachable
	// StandbyLagging: a node Lag changes behind the active, more than
	// MaxLag.
	StandbyLagging
	// Degraded: a sync-mode active that no standby is in sync with: a
	// crash of it may lose what it answered last.
	Degraded
)

// Problem is one thing wrong with the cluster, with what its words
// quote.
type Problem struct {
	Kind ProblemKind
	// Addr is the node the problem is about (every kind but SeveralActive
	// and NoActive).
	Addr string
	// Claims are the nodes that claim the active role (SeveralActive),
	// in priority order.
	Claims []string
	// Lag and MaxLag: how far behind the node is, and the most it may be
	// (StandbyLagging).
	Lag, MaxLag uint64
	// Err is why the node did not answer (NodeUnreachable).
	Err error
}

// Problems lists what is wrong with the cluster: no single active first,
// then each node in the view's order with at most one problem, the first
// of down, unreachable, more than maxLag changes behind, degraded. A
// healthy cluster has none.
func (v View) Problems(maxLag uint64) []Problem {
	var out []Problem
	switch {
	case len(v.Claims) > 1:
		out = append(out, Problem{Kind: SeveralActive, Claims: slices.Clone(v.Claims)})
	case v.Active == "":
		out = append(out, Problem{Kind: NoActive})
	}
	for _, n := range v.Nodes {
		switch {
		case !n.Reachable && n.Role == RoleDown:
			out = append(out, Problem{Kind: NodeDown, Addr: n.Addr})
		case !n.Reachable:
			out = append(out, Problem{Kind: NodeUnreachable, Addr: n.Addr, Err: n.Err})
		case n.HasLag && n.Lag > maxLag:
			out = append(out, Problem{Kind: StandbyLagging, Addr: n.Addr, Lag: n.Lag, MaxLag: maxLag})
		case n.Degraded:
			out = append(out, Problem{Kind: Degraded, Addr: n.Addr})
		}
	}
	return out
}
