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
