package core

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// drain carries out what c's events asked, as a shell does: apply runs
// for each action in order, and may call c's events in turn, whose
// actions are carried out next, until none is left.
func drain(c *Core, apply func(Action)) {
	var r Ready
	for {
		c.TakeReady(&r)
		if len(r.Actions) == 0 {
			return
		}
		for _, a := range r.Actions {
			apply(a)
		}
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

// A Send says whether the event that took its request up answered it,
// and otherwise how long the request waited: the shell's metrics keep
// no record of requests not answered yet.
func TestSendSaysHowLongItsRequestWaited(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c, err := New(Config{Self: "127.0.0.1:1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var sent []Send
	apply := func(a Action) {
		if a.Kind == ActSend {
			s := a.Send
			s.Line = nil
			sent = append(sent, s)
		}
	}
	drain(c, apply)
	c.ConnOpened(t0, 1, "a")
	c.ConnOpened(t0, 2, "b")
	req := func(at time.Duration, id ConnID, line string) {
		r, err := proto.Parse([]byte(line + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		c.Tick(t0.Add(at))
		c.Request(t0.Add(at), id, r)
		drain(c, apply)
	}
	req(0, 1, "A k 30 0")
	if len(sent) != 1 || !sent[0].AtOnce || sent[0].Outcome != Granted {
		t.Fatalf("a grant at once: %+v", sent)
	}
	tok := sent[0].Token
	req(time.Second, 2, "A k 30 60")
	req(3*time.Second, 2, "K *")
	if len(sent) != 1 {
		t.Fatalf("a waiter and a listing answered at once: %+v", sent)
	}
	c.KeysSlice(t0.Add(3500*time.Millisecond), 2)
	drain(c, apply)
	if len(sent) != 2 || sent[1].Op != proto.OpKeys || sent[1].AtOnce || sent[1].Waited != 500*time.Millisecond {
		t.Fatalf("the listing's answer: %+v", sent[1:])
	}
	req(4*time.Second, 1, "R k "+strconv.FormatUint(tok, 10))
	if len(sent) != 4 {
		t.Fatalf("the release and the waiter's grant: %+v", sent[2:])
	}
	for _, s := range sent[2:] {
		switch s.Op {
		case proto.OpRelease:
			if !s.AtOnce || s.Waited != 0 {
				t.Errorf("the release: %+v", s)
			}
		case proto.OpAcquire:
			if s.AtOnce || s.Waited != 3*time.Second || s.Conn != 2 {
				t.Errorf("the waiter's grant: %+v", s)
			}
		}
	}
	// A connection that closes leaves its waiter unanswered: counted
	// as cancelled.
	req(5*time.Second, 1, "A k 30 60")
	c.ConnClosed(t0.Add(6*time.Second), 1)
	if got := c.Counters().Cancelled[proto.OpAcquire-'A']; got != 1 {
		t.Errorf("cancelled acquires %d, want 1", got)
	}
}

// Two standbys that the last active's heartbeats told different lists of
// standbys in sync agree on who takes over: one that is in sync by its
// own list leaves the role to a peer of higher priority that holds every
// record it holds, rather than take it as the only one in sync.
func TestStandbysAgreeOnTheSuccessor(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	peers := []string{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"}
	c, err := New(Config{Self: peers[2], Peers: peers}, t0)
	if err != nil {
		t.Fatal(err)
	}
	c.synced, c.seq = true, 7
	c.activeISR = []string{peers[2]} // a heartbeat sent before the other standby caught up
	b := c.peerByAddr(peers[1])
	b.heard, b.synced, b.seq = t0, true, 7
	if got := c.candidate(t0); got != peers[1] {
		t.Errorf("candidate %s, want %s: it holds all this node holds, and goes first", got, peers[1])
	}
	b.seq = 6 // one record behind: it may lack an answer
	if got := c.candidate(t0); got != peers[2] {
		t.Errorf("candidate %s, want %s: the other lacks a record", got, peers[2])
	}
}

// A waiter whose connection closes while the active is paused (it did
// not run for a failure timeout) leaves without the engine firing the
// deadlines due meanwhile: a lease that ran out is not handed to the
// next waiter until the node has heard its peers and serves again.
func TestPausedActiveGrantsNothingAsAWaiterLeaves(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	peers := []string{"10.0.0.1:1", "10.0.0.2:1"}
	c, err := New(Config{Self: peers[0], Peers: peers, Async: true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var grants int
	apply := func(a Action) {
		if a.Kind == ActSend && a.Send.Outcome == Granted {
			grants++
		}
	}
	c.promote(t0, "test")
	c.Tick(t0)
	drain(c, apply)
	for id := ConnID(1); id <= 3; id++ {
		c.ConnOpened(t0, id, "client")
	}
	req := func(id ConnID, line string) {
		r, err := proto.Parse([]byte(line + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		c.Request(t0, id, r)
		drain(c, apply)
	}
	req(1, "A k 1 0")
	req(2, "A k 30 0")
	req(3, "A k 30 0")
	if grants != 1 {
		t.Fatalf("%d grants before the pause, want 1", grants)
	}
	// Frozen for 5 s: the lease of 1 s ran out meanwhile. The first event
	// after it is the close of a waiter's connection.
	late := t0.Add(5 * time.Second)
	c.ConnClosed(late, 3)
	drain(c, apply)
	if !c.Paused() || grants != 1 {
		t.Fatalf("paused %v, %d grants: a paused active granted as a waiter left", c.Paused(), grants)
	}
}

// An active that did not run for a failure timeout reports itself
// joining, with no active known, from the moment it runs again until it
// has heard its peers: to S, to the probes and to the metrics, which ask
// between its events, as well as after its first event noted the pause.
// A peer may have taken the role meanwhile; two nodes saying active
// would be one too many. Once it resumes with nobody else active, it
// reports the role it serves again.
func TestPausedActiveReportsJoining(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	peers := []string{"10.0.0.1:1", "10.0.0.2:1"}
	c, err := New(Config{Self: peers[0], Peers: peers}, t0)
	if err != nil {
		t.Fatal(err)
	}
	c.promote(t0, "test")
	c.Tick(t0)
	drain(c, func(Action) {})
	check := func(at time.Time, role Role, active string, paused bool) {
		t.Helper()
		st := c.Status(at)
		if Role(st.Role) != role || st.Active != active || c.PausedAt(at) != paused {
			t.Errorf("at +%s: role=%s active=%q paused=%v, want role=%s active=%q paused=%v",
				at.Sub(t0), st.Role, st.Active, c.PausedAt(at), role, active, paused)
		}
		for _, p := range st.Peers {
			if p.Addr == peers[0] && Role(p.Role) != role {
				t.Errorf("at +%s: its own peer entry says %s, want %s", at.Sub(t0), p.Role, role)
			}
		}
	}
	check(t0, Active, peers[0], false)
	late := t0.Add(5 * time.Second)
	check(late, Joining, "", true) // asked before any event noted the pause
	c.Tick(late)
	drain(c, func(Action) {})
	if !c.Paused() {
		t.Fatal("the first event after 5 s without a Tick did not pause the node")
	}
	check(late, Joining, "", true)
	// Its peer stays silent for a failure timeout: down, so the pause
	// ends and the node serves again as the active.
	for at := late; !at.After(late.Add(2 * time.Second)); at = at.Add(100 * time.Millisecond) {
		c.Tick(at)
		drain(c, func(Action) {})
	}
	end := late.Add(2 * time.Second)
	if c.Paused() || c.Role() != Active {
		t.Fatalf("paused %v, role %s after its peer was silent for a failure timeout", c.Paused(), c.Role())
	}
	check(end, Active, peers[0], false)
}

// A joining node does not yet know who is active: a lock request it gets
// waits there, rather than being sent to its guess (which may be a node
// that waits for this one, and sends the client back), and is served
// once the node has settled: here by taking the role, when no peer
// answers within the failure timeout.
func TestJoiningNodeHoldsRequestsUntilItKnows(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	peers := []string{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"}
	c, err := New(Config{Self: peers[0], Peers: peers}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var moved, granted int
	apply := func(a Action) {
		if a.Kind == ActSend {
			switch a.Send.Outcome {
			case Moved:
				moved++
			case Granted:
				granted++
			}
		}
	}
	c.Tick(t0)
	drain(c, apply)
	c.ConnOpened(t0, 1, "client")
	r, err := proto.Parse([]byte("A k 30 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Add(10 * time.Millisecond)
	c.Request(at, 1, r)
	drain(c, apply)
	if c.Role() != Joining || moved != 0 || granted != 0 {
		t.Fatalf("role %s, %d redirects, %d grants: a joining node answered before it knew who is active", c.Role(), moved, granted)
	}
	for ; c.Role() != Active && at.Before(t0.Add(5*time.Second)); at = at.Add(50 * time.Millisecond) {
		c.Tick(at)
		drain(c, apply)
	}
	if c.Role() != Active || granted != 1 || moved != 0 {
		t.Fatalf("role %s, %d grants, %d redirects: the held acquire was not served once the node took the role", c.Role(), granted, moved)
	}
}
