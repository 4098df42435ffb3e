package survey

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

var t0 = time.UnixMilli(1_750_000_000_000)

func change(ms int, from, to, reason string) proto.RoleChange {
	return proto.RoleChange{At: t0.Add(time.Duration(ms) * time.Millisecond), From: from, To: to, Reason: reason}
}

func describe(cs []proto.RoleChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%d %s>%s %s", c.At.Sub(t0).Milliseconds(), c.From, c.To, c.Reason))
	}
	return out
}

// Each node tells the times it took the role; merged, they are the
// cluster's moves in time order, whichever node was asked first, and a
// change told twice counts once.
func TestMergeChangesOrdersAndDedupes(t *testing.T) {
	a := []proto.RoleChange{
		change(0, "", "a", "no active node is reachable"),
		change(3000, "c", "a", "handoff from c"),
	}
	b := []proto.RoleChange{change(1000, "a", "b", "the active a is unreachable")}
	c := []proto.RoleChange{change(2000, "b", "c", "handoff from b")}
	want := []string{
		"0 >a no active node is reachable",
		"1000 a>b the active a is unreachable",
		"2000 b>c handoff from b",
		"3000 c>a handoff from c",
	}
	for _, lists := range [][][]proto.RoleChange{{a, b, c}, {c, b, a}, {b, a, c, a, slices.Clone(b)}} {
		if got := describe(MergeChanges(lists, MaxChanges)); !slices.Equal(got, want) {
			t.Errorf("merged %v, want %v", got, want)
		}
	}
	// Same time, different moves (two nodes that took the role in one
	// millisecond): both stay, in an order that does not depend on the
	// order of the answers.
	x := change(5000, "a", "x", "r")
	y := change(5000, "a", "y", "r")
	for _, lists := range [][][]proto.RoleChange{{{x}, {y}}, {{y}, {x}}} {
		if got := describe(MergeChanges(lists, MaxChanges)); !slices.Equal(got, []string{"5000 a>x r", "5000 a>y r"}) {
			t.Errorf("same-millisecond changes: %v", got)
		}
	}
	if got := MergeChanges(nil, MaxChanges); len(got) != 0 {
		t.Errorf("no changes: %v", got)
	}
}

// A view keeps the newest MaxChanges of the whole cluster, not of each
// node.
func TestMergeChangesKeepsTheNewest(t *testing.T) {
	var a, b []proto.RoleChange
	for i := range MaxChanges {
		a = append(a, change(2*i*1000, "b", "a", fmt.Sprint("a", i)))
		b = append(b, change((2*i+1)*1000, "a", "b", fmt.Sprint("b", i)))
	}
	got := MergeChanges([][]proto.RoleChange{a, b}, MaxChanges)
	if len(got) != MaxChanges {
		t.Fatalf("kept %d, want %d", len(got), MaxChanges)
	}
	if first, last := got[0].At.Sub(t0), got[MaxChanges-1].At.Sub(t0); first != 8*time.Second || last != 15*time.Second {
		t.Errorf("kept %v", describe(got))
	}
	if got := MergeChanges([][]proto.RoleChange{a, b}, 3); len(got) != 3 || got[2].Reason != "b7" {
		t.Errorf("keep 3: %v", describe(got))
	}
}

// Build merges the changes of the nodes that answered; one reached
// under two names counts once, and a node that did not answer has
// nothing to tell.
func TestBuildMergesChanges(t *testing.T) {
	table := threeNodes("10.0.0.2:7070")
	st := table["10.0.0.1:7070"]
	st.Changes = []proto.RoleChange{change(0, "", "10.0.0.1:7070", "no active node is reachable")}
	table["10.0.0.1:7070"] = st
	st = table["10.0.0.2:7070"]
	st.Changes = []proto.RoleChange{change(1000, "10.0.0.1:7070", "10.0.0.2:7070", "handoff from 10.0.0.1:7070")}
	table["10.0.0.2:7070"] = st
	v := Build([]Answer{
		{Asked: "10.0.0.2:7070", Status: table["10.0.0.2:7070"]},
		{Asked: "10.0.0.1:7070", Status: table["10.0.0.1:7070"]},
		{Asked: "localhost:7070", Status: table["10.0.0.1:7070"]},
		{Asked: "10.0.0.3:7070", Err: syscall.ECONNREFUSED},
	})
	want := []string{
		"0 >10.0.0.1:7070 no active node is reachable",
		"1000 10.0.0.1:7070>10.0.0.2:7070 handoff from 10.0.0.1:7070",
	}
	if got := describe(v.Changes); !slices.Equal(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
}
