package survey

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// fakeStatus answers status questions from a table; an address missing
// from it refuses the connection.
func fakeStatus(table map[string]proto.Status) StatusFunc {
	return func(ctx context.Context, addr string) (proto.Status, error) {
		if st, ok := table[addr]; ok {
			return st, nil
		}
		return proto.Status{}, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
}

func threeNodes(active string) map[string]proto.Status {
	addrs := []string{"10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"}
	var peers []proto.PeerStatus
	for _, a := range addrs {
		role := RoleStandby
		if a == active {
			role = RoleActive
		}
		peers = append(peers, proto.PeerStatus{Addr: a, Role: role, Reachable: true, Token: 42, Lag: 3})
	}
	table := make(map[string]proto.Status)
	for _, a := range addrs {
		role := RoleStandby
		if a == active {
			role = RoleActive
		}
		table[a] = proto.Status{Self: a, Role: role, Active: active, Token: 42, Uptime: time.Minute, Peers: peers}
	}
	return table
}

func TestRunFollowsPeers(t *testing.T) {
	table := threeNodes("10.0.0.2:7070")
	// The user knows one node by another name.
	table["localhost:7070"] = table["10.0.0.1:7070"]
	var mu sync.Mutex
	asked := map[string]int{}
	ask := func(ctx context.Context, addr string) (proto.Status, error) {
		mu.Lock()
		asked[addr]++
		mu.Unlock()
		return fakeStatus(table)(ctx, addr)
	}
	v := Run(context.Background(), []string{"localhost:7070"}, ask)
	if v.Active != "10.0.0.2:7070" || v.Answered != 3 || len(v.Nodes) != 3 {
		t.Fatalf("view: %+v", v)
	}
	for i, n := range v.Nodes {
		if n.Priority != i+1 || !n.Reachable {
			t.Errorf("node %d: %+v", i, n)
		}
	}
	if asked["10.0.0.1:7070"] != 0 {
		t.Errorf("the node asked as localhost:7070 was asked again under its own name: %v", asked)
	}
	// The active's word on its standbys' lag; its own lag is nothing.
	for _, n := range v.Nodes {
		want := uint64(3)
		if n.Addr == v.Active {
			want = 0
		}
		if !n.HasLag || n.Lag != want {
			t.Errorf("%s: lag %v %d, want %d", n.Addr, n.HasLag, n.Lag, want)
		}
	}
}

// A survey stops at MaxNodes however many new peers the answers name.
func TestRunIsBounded(t *testing.T) {
	var mu sync.Mutex
	asked := 0
	ask := func(ctx context.Context, addr string) (proto.Status, error) {
		mu.Lock()
		asked++
		n := asked
		mu.Unlock()
		next := fmt.Sprintf("10.1.%d.%d:7070", n/250, n%250)
		return proto.Status{Self: addr, Role: RoleStandby, Peers: []proto.PeerStatus{{Addr: next, Reachable: true}}}, nil
	}
	v := Run(context.Background(), []string{"10.0.0.1:7070"}, ask)
	if asked != MaxNodes || v.Answered != MaxNodes {
		t.Errorf("asked %d nodes, %d answered; want %d", asked, v.Answered, MaxNodes)
	}
}

func TestBuildUnreachableAndSplitBrain(t *testing.T) {
	table := threeNodes("10.0.0.1:7070")
	delete(table, "10.0.0.3:7070")
	v := Run(context.Background(), []string{"10.0.0.3:7070", "10.0.0.2:7070"}, fakeStatus(table))
	if v.Answered != 2 || v.Nodes[2].Reachable || v.Nodes[2].Addr != "10.0.0.3:7070" {
		t.Fatalf("view: %+v", v)
	}
	// Its peers still see it: its role comes from them.
	if v.Nodes[2].Role != RoleStandby || !errors.Is(v.Nodes[2].Err, syscall.ECONNREFUSED) {
		t.Errorf("unreachable node: %+v", v.Nodes[2])
	}

	split := threeNodes("10.0.0.1:7070")
	st := split["10.0.0.3:7070"]
	st.Role, st.Active = RoleActive, "10.0.0.3:7070"
	split["10.0.0.3:7070"] = st
	v = Run(context.Background(), []string{"10.0.0.3:7070"}, fakeStatus(split))
	if len(v.Claims) != 2 || v.Active != "10.0.0.1:7070" {
		t.Errorf("split brain: claims %v, active %q (want the higher priority)", v.Claims, v.Active)
	}
}

// A node nobody can reach and no peer sees is down; one never asked
// says so rather than carrying no error.
func TestBuildDown(t *testing.T) {
	v := Build([]Answer{{Asked: "10.0.0.9:7070", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}})
	if len(v.Nodes) != 1 || v.Nodes[0].Role != RoleDown || v.Active != "" || v.Answered != 0 {
		t.Fatalf("view: %+v", v)
	}
	table := threeNodes("10.0.0.1:7070")
	v = Build([]Answer{{Asked: "10.0.0.1:7070", Status: table["10.0.0.1:7070"]}})
	for _, n := range v.Nodes[1:] {
		if n.Reachable || n.Err == nil || n.Err.Error() != "not asked" {
			t.Errorf("%s: %+v", n.Addr, n)
		}
	}
}

// A node that took the connection and said nothing (frozen) is not
// shown active on its peers' word, which lags by their failure timeout.
func TestBuildFrozenActive(t *testing.T) {
	table := threeNodes("10.0.0.1:7070")
	ask := func(ctx context.Context, addr string) (proto.Status, error) {
		if addr == "10.0.0.1:7070" {
			return proto.Status{}, fmt.Errorf("status %s: %w: it took the connection, but answered nothing in time", addr, client.ErrNoAnswer)
		}
		return fakeStatus(table)(ctx, addr)
	}
	v := Run(context.Background(), []string{"10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"}, ask)
	if v.Active != "" || v.Silent != "10.0.0.1:7070" || len(v.Claims) != 0 {
		t.Fatalf("active %q, silent %q, claims %v", v.Active, v.Silent, v.Claims)
	}
	if n := v.Nodes[0]; n.Role != RoleUnresponsive || n.Reachable {
		t.Errorf("the frozen node: %+v", n)
	}
}
