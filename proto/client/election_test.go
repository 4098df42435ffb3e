package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// Three candidates on three clients: one leads, observers see its value;
// when it resigns the next leads within 100 ms, and when that one's
// process dies (its client closes without a word) the last leads once
// the dead leader's lease ends.
func TestElection(t *testing.T) {
	addr := startNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const lease = 600 * time.Millisecond

	type won struct {
		i   int
		h   *client.Held
		err error
	}
	wins := make(chan won, 3)
	var clients []*client.Client
	var elections []*client.Election
	for i, value := range []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"} {
		c, err := client.New([]string{addr}, client.Options{FailureTimeout: testFT})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		e := client.NewElection(c, "leader")
		e.Lease = lease
		clients, elections = append(clients, c), append(elections, e)
		go func() {
			h, err := e.Campaign(ctx, value)
			wins <- won{i, h, err}
		}()
	}
	values := []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"}

	observer := newClient(t, addr, client.Options{})
	oe := client.NewElection(observer, "leader")
	seen := oe.Observe(ctx)

	next := func(what string, within time.Duration) won {
		t.Helper()
		select {
		case w := <-wins:
			if w.err != nil {
				t.Fatalf("%s: campaign %d: %v", what, w.i, w.err)
			}
			return w
		case <-time.After(within):
			t.Fatalf("%s: no candidate leads after %s", what, within)
		}
		return won{}
	}
	observed := func(want string, token uint64) {
		t.Helper()
		deadline := time.After(2 * time.Second)
		for {
			select {
			case l := <-seen:
				if l.Value == want && l.Token == token {
					return
				}
			case <-deadline:
				t.Fatalf("Observe never showed %s (token %d)", want, token)
			}
		}
	}

	first := next("first", 2*time.Second)
	select {
	case w := <-wins:
		t.Fatalf("two leaders: %d and %d", first.i, w.i)
	case <-time.After(100 * time.Millisecond):
	}
	l, err := oe.Leader(ctx)
	if err != nil || l.Value != values[first.i] || l.Token != first.h.Token() {
		t.Fatalf("Leader %+v %v; want %s with token %d", l, err, values[first.i], first.h.Token())
	}
	observed(values[first.i], first.h.Token())

	// Resign: the next candidate in the queue leads at once.
	resigned := time.Now()
	if err := elections[first.i].Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second := next("after a resign", time.Second)
	if took := time.Since(resigned); took > 100*time.Millisecond {
		t.Errorf("the next leader led %s after the resign, want within 100ms", took)
	}
	if second.h.Token() <= first.h.Token() {
		t.Errorf("token %d after %d", second.h.Token(), first.h.Token())
	}
	observed(values[second.i], second.h.Token())

	// The leader dies: no resign, no renewal. The last candidate leads
	// once its lease has run out, and not before.
	died := time.Now()
	clients[second.i].Close()
	third := next("after the leader died", 3*lease)
	if took := time.Since(died); took > lease+300*time.Millisecond {
		t.Errorf("the last leader led %s after the leader died, want within the lease, %s", took, lease)
	}
	observed(values[third.i], third.h.Token())
	if err := elections[third.i].Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := oe.Leader(ctx); !errors.Is(err, client.ErrNoLeader) {
		t.Errorf("Leader after every resign: %v, want ErrNoLeader", err)
	}
	observed("", 0)
}

// A value is 1 to MaxValueLen bytes of UTF-8; a campaign whose ctx ends
// leaves the queue.
func TestElectionCampaignErrors(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{})
	e := client.NewElection(c, "leader")
	ctx := context.Background()
	if _, err := e.Campaign(ctx, strings.Repeat("v", client.MaxValueLen+1)); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("long value: %v", err)
	}
	if _, err := e.Campaign(ctx, ""); err == nil || !strings.Contains(err.Error(), "no leader") {
		t.Errorf("empty value: %v", err)
	}
	if _, err := e.Campaign(ctx, "\xff"); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("a value that is not UTF-8: %v", err)
	}
	// A short word: a node that reads value= and one that does not yet
	// both carry it.
	word := strings.Repeat("v", 50)
	h, err := e.Campaign(ctx, word)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := e.Leader(ctx); err != nil || l.Value != word {
		t.Fatalf("Leader %+v %v", l, err)
	}
	if _, err := e.Campaign(ctx, "again"); err == nil {
		t.Error("a second campaign of a leading Election succeeded")
	}
	// A campaign given up leaves the queue at once: it is not granted
	// later and released for nothing.
	other := client.NewElection(c, "leader")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := make(chan error, 1)
	go func() {
		_, err := other.Campaign(cctx, "late")
		lost <- err
	}()
	waiting := func() int {
		q, err := c.Queue(ctx, "leader")
		if err != nil {
			t.Fatal(err)
		}
		return q.Waiting
	}
	for deadline := time.Now().Add(5 * time.Second); waiting() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second candidate never queued")
		}
	}
	cancel()
	if err := <-lost; !errors.Is(err, context.Canceled) {
		t.Fatalf("campaign with a leader in place, ctx ended: %v", err)
	}
	// The withdraw goes out behind the campaign's acquire: allow it a
	// round trip on a busy machine. A candidate left queued would wait
	// for as long as the leader holds.
	for deadline := time.Now().Add(time.Second); waiting() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled candidate still waits (Waiting %d)", waiting())
		}
	}
	h.Release(ctx)
}

// A value of any UTF-8 text, spaces included, up to MaxValueLen bytes,
// and Proclaim changing it: observers see each one.
func TestElectionLongValueAndProclaim(t *testing.T) {
	addr := startNode(t)
	c := newClient(t, addr, client.Options{})
	e := client.NewElection(c, "leader")
	ctx := context.Background()
	long := "node 1 (10.0.0.1) — 100% ready, " + strings.Repeat("é", 400)
	long += strings.Repeat("x", client.MaxValueLen-len(long))
	h, err := e.Campaign(ctx, long)
	if err != nil && strings.Contains(err.Error(), "does not read value=") {
		t.Skip("the node does not read value= yet:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	if l, err := e.Leader(ctx); err != nil || l.Value != long {
		t.Fatalf("Leader %+v %v", l, err)
	}
	if err := e.Proclaim(ctx, "node 2"); err != nil {
		t.Fatal(err)
	}
	if l, err := e.Leader(ctx); err != nil || l.Value != "node 2" || l.Token != h.Token() {
		t.Fatalf("Leader after Proclaim %+v %v", l, err)
	}
}
