// Package survey asks the nodes of a lockd cluster for their status,
// follows the peers they name, and merges the answers into one view of
// the cluster: which node is active, which claim to be, how far each
// standby lags, which nodes are down or silent. It also says what is
// wrong with a view (Problems) and waits for a node to become active.
// lockctl's status, drill and handoff render it or act on it.
package survey

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// MaxNodes bounds how many nodes a survey follows, so that nodes naming
// ever new peers cannot keep it going.
const MaxNodes = 64

// Roles as nodes report them (cluster.Role values), plus what a peer is
// called when its peers cannot reach it.
const (
	RoleActive  = "active"
	RoleStandby = "standby"
	RoleDown    = "down"
	// RoleUnresponsive is a node that took lockctl's connection and
	// said nothing within --failure-timeout: frozen or overloaded.
	RoleUnresponsive = "unresponsive"
)

// StatusFunc asks one node for its status: client.Status, or a fake in
// tests.
type StatusFunc func(ctx context.Context, addr string) (proto.Status, error)

// Answer is what one address said, or why it said nothing.
type Answer struct {
	Asked  string
	Status proto.Status
	Err    error
}

// Run asks every address of addrs, then every peer the answers name
// that was not asked yet, until no new node turns up, and returns the
// cluster as seen from here.
func Run(ctx context.Context, addrs []string, ask StatusFunc) View {
	asked := make(map[string]bool)
	var answers []Answer
	next := slices.Clone(addrs)
	for len(next) > 0 && len(asked) < MaxNodes && ctx.Err() == nil {
		var round []string
		for _, a := range next {
			if !asked[a] && len(asked) < MaxNodes {
				asked[a] = true
				round = append(round, a)
			}
		}
		got := make([]Answer, len(round))
		var wg sync.WaitGroup
		for i, a := range round {
			wg.Go(func() {
				// ask bounds the question (--timeout): a node that has not
				// answered by then is shown as unreachable.
				st, err := ask(ctx, a)
				got[i] = Answer{Asked: a, Status: st, Err: err}
			})
		}
		wg.Wait()
		next = next[:0]
		for _, ans := range got {
			answers = append(answers, ans)
			if ans.Err != nil {
				continue
			}
			// A node reached by another name (localhost:7070 for
			// 127.0.0.1:7070) is not asked again under its own.
			asked[ans.Status.Self] = true
			for _, p := range ans.Status.Peers {
				if !asked[p.Addr] {
					next = append(next, p.Addr)
				}
			}
		}
	}
	return Build(answers)
}

// View is the cluster as the answers of a survey describe it.
type View struct {
	// Active is the node that reports itself active (the one of highest
	// priority when several do), or, when none answered as active, the
	// active the others name; "" when nobody knows of one.
	Active string
	// Claims lists every node that reports itself active: more than one
	// means a partition is healing (split brain).
	Claims   []string
	Nodes    []Node
	Answered int // nodes that answered
	// Silent is the node its peers name active that took lockctl's
	// connection and answered nothing (frozen, overloaded): not Active.
	Silent string
	// Changes are the last moves of the active role, oldest first, the
	// newest MaxChanges of what the nodes that answered remember (see
	// MergeChanges): a node that is down takes its own with it.
	Changes []proto.RoleChange
}

// Node is one node, from its own answer when it gave one, else from
// what its peers say of it.
type Node struct {
	Addr      string
	Priority  int // 1-based place in the peers list; 0 when not in it
	Role      string
	Reachable bool // it answered lockctl
	HasLag    bool
	Lag       uint64
	HasToken  bool
	Token     uint64
	HasUptime bool
	Uptime    time.Duration
	Sticky    bool
	// Replication is the node's mode, sync or async ("" from an older
	// node); Degraded, on a sync-mode active, says no standby is in sync.
	Replication string
	Degraded    bool
	// Durability is what the node keeps across a restart, as it says:
	// "memory" or "disk:MODE" ("" from an older node).
	Durability string
	// Seq, Keys and Waiters are what the node says of itself, when it
	// answered.
	Seq     uint64
	Keys    int
	Waiters int
	Err     error // why it did not answer
}

// Build merges the answers of a survey into one view.
func Build(answers []Answer) View {
	var v View
	own := make(map[string]proto.Status) // by the node's own name
	var order []string                   // nodes in the order first heard of
	seen := make(map[string]bool)
	note := func(addr string) {
		if !seen[addr] {
			seen[addr] = true
			order = append(order, addr)
		}
	}
	errs := make(map[string]error)
	silent := make(map[string]bool) // took lockctl's connection, said nothing
	for _, a := range answers {
		if a.Err != nil {
			note(a.Asked)
			errs[a.Asked] = a.Err
			silent[a.Asked] = errors.Is(a.Err, client.ErrNoAnswer)
			continue
		}
		if _, dup := own[a.Status.Self]; dup {
			continue
		}
		own[a.Status.Self] = a.Status
		note(a.Status.Self)
		v.Answered++
	}
	// The priority order: the peers lists, the active's first (they are
	// the same list on a well configured cluster).
	var reporters []proto.Status
	var changes [][]proto.RoleChange
	for _, a := range order {
		if st, ok := own[a]; ok {
			reporters = append(reporters, st)
			changes = append(changes, st.Changes)
		}
	}
	v.Changes = MergeChanges(changes, MaxChanges)
	slices.SortStableFunc(reporters, func(a, b proto.Status) int {
		return boolRank(a.Role == RoleActive) - boolRank(b.Role == RoleActive)
	})
	prio := make(map[string]int)
	n := 0
	for _, st := range reporters {
		for _, p := range st.Peers {
			if _, ok := prio[p.Addr]; !ok {
				n++
				prio[p.Addr] = n
			}
			note(p.Addr)
		}
	}
	// What the active says of its peers is the freshest word on their
	// lag; what any node says of a peer stands in for a node we could not
	// reach ourselves.
	var activeSt *proto.Status
	for i := range reporters {
		if reporters[i].Role == RoleActive {
			activeSt = &reporters[i]
			break
		}
	}
	peerView := func(addr string) (proto.PeerStatus, bool) {
		for _, st := range reporters {
			for _, p := range st.Peers {
				if p.Addr == addr && p.Addr != st.Self {
					return p, true
				}
			}
		}
		return proto.PeerStatus{}, false
	}
	for _, addr := range order {
		nv := Node{Addr: addr, Priority: prio[addr], Err: errs[addr]}
		if st, ok := own[addr]; ok {
			nv.Reachable = true
			nv.Role = st.Role
			nv.HasToken, nv.Token = true, st.Token
			nv.HasUptime, nv.Uptime = true, st.Uptime
			nv.Sticky = st.Sticky
			nv.Replication, nv.Degraded = st.Replication, st.Degraded
			nv.Durability = st.Durability
			nv.Seq, nv.Keys, nv.Waiters = st.Seq, st.Keys, st.Waiters
			for _, p := range st.Peers {
				if p.Addr == st.Self {
					nv.HasLag, nv.Lag = true, p.Lag
				}
			}
			if st.Role == RoleActive {
				nv.HasLag, nv.Lag = true, 0
				v.Claims = append(v.Claims, addr)
			}
		} else if silent[addr] {
			// What its peers say of it is as old as their failure
			// timeout: a node frozen a moment ago is still "active" to
			// them, and must not be to the person reading this.
			nv.Role = RoleUnresponsive
			if p, ok := peerView(addr); ok && p.Role == RoleActive {
				v.Silent = addr
			}
		} else if p, ok := peerView(addr); ok && p.Reachable {
			nv.Role = p.Role
			nv.HasToken, nv.Token = true, p.Token
		} else {
			nv.Role = RoleDown
		}
		if activeSt != nil && addr != activeSt.Self {
			for _, p := range activeSt.Peers {
				if p.Addr == addr && p.Reachable {
					nv.HasLag, nv.Lag = true, p.Lag
				}
			}
		}
		if nv.Err == nil && !nv.Reachable {
			nv.Err = errors.New("not asked")
		}
		v.Nodes = append(v.Nodes, nv)
	}
	slices.SortStableFunc(v.Nodes, func(a, b Node) int {
		return prioRank(a.Priority) - prioRank(b.Priority)
	})
	slices.SortStableFunc(v.Claims, func(a, b string) int { return prioRank(prio[a]) - prioRank(prio[b]) })
	if len(v.Claims) > 0 {
		v.Active = v.Claims[0]
	} else {
		for _, st := range reporters {
			if st.Active != "" && !silent[st.Active] {
				v.Active = st.Active
				break
			}
		}
	}
	return v
}

func boolRank(b bool) int {
	if b {
		return 0
	}
	return 1
}

// prioRank sorts nodes without a priority after those with one.
func prioRank(p int) int {
	if p == 0 {
		return MaxNodes + 1
	}
	return p
}
