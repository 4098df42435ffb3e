package survey

import (
	"context"
	"reflect"
	"testing"

	"github.com/lockd-io/lockd/proto"
)

// Each problem of --check, from a survey of a fake cluster: a healthy
// one has none; each node has at most one, the first that applies.
func TestProblems(t *testing.T) {
	a, b, c := "10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"
	run := func(edit func(table map[string]proto.Status)) View {
		table := threeNodes(a) // every standby 3 changes behind
		edit(table)
		return Run(context.Background(), []string{a, b, c}, fakeStatus(table))
	}
	refused := func(v View, addr string) error {
		for _, n := range v.Nodes {
			if n.Addr == addr {
				return n.Err
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name   string
		edit   func(table map[string]proto.Status)
		maxLag uint64
		want   func(v View) []Problem
	}{
		{"healthy, the standbys at --max-lag", func(map[string]proto.Status) {}, 3, func(View) []Problem { return nil }},
		{"lagging", func(map[string]proto.Status) {}, 2, func(View) []Problem {
			return []Problem{{Kind: StandbyLagging, Addr: b, Lag: 3, MaxLag: 2}, {Kind: StandbyLagging, Addr: c, Lag: 3, MaxLag: 2}}
		}},
		{"degraded", func(table map[string]proto.Status) {
			st := table[a]
			st.Replication, st.Degraded = "sync", true
			table[a] = st
		}, 3, func(View) []Problem { return []Problem{{Kind: Degraded, Addr: a}} }},
		{"a node its peers see but lockctl cannot reach", func(table map[string]proto.Status) { delete(table, c) }, 3,
			func(v View) []Problem { return []Problem{{Kind: NodeUnreachable, Addr: c, Err: refused(v, c)}} }},
		{"a node no peer reaches either", func(table map[string]proto.Status) {
			delete(table, c)
			for addr, st := range table {
				st.Peers = peersWithout(st.Peers, c)
				table[addr] = st
			}
		}, 3, func(View) []Problem { return []Problem{{Kind: NodeDown, Addr: c}} }},
		{"no active", func(table map[string]proto.Status) {
			for addr, st := range table {
				st.Role, st.Active = RoleStandby, ""
				table[addr] = st
			}
		}, 3, func(View) []Problem { return []Problem{{Kind: NoActive}} }},
		{"several active", func(table map[string]proto.Status) {
			st := table[c]
			st.Role, st.Active = RoleActive, c
			table[c] = st
		}, 3, func(View) []Problem { return []Problem{{Kind: SeveralActive, Claims: []string{a, c}}} }},
	} {
		v := run(tc.edit)
		if got, want := v.Problems(tc.maxLag), tc.want(v); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: problems %+v, want %+v", tc.name, got, want)
		}
	}
	if got := (View{}).Problems(3); !reflect.DeepEqual(got, []Problem{{Kind: NoActive}}) {
		t.Errorf("empty view: problems %+v", got)
	}
}

// peersWithout is peers without the one at addr.
func peersWithout(peers []proto.PeerStatus, addr string) []proto.PeerStatus {
	var out []proto.PeerStatus
	for _, p := range peers {
		if p.Addr != addr {
			out = append(out, p)
		}
	}
	return out
}
