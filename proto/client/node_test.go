package client_test

// The client against a real lockd node (package cluster, in process):
// what the fake servers of the other tests cannot show, that every call
// does what the engine means by it.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cluster"
	"github.com/lockd-io/lockd/proto/client"
)

// startNode runs a single lockd node on a free loopback port until the
// test ends.
func startNode(t *testing.T) string {
	t.Helper()
	node, err := cluster.New(cluster.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		node.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return node.Addr()
}

// A semaphore through the client: two places granted at once with tokens
// of their own, the third waits its turn, each holder renews and
// releases by its own token, Q lists both holders with their names, and
// another limit is refused as a mismatch.
func TestSemaphoreOnANode(t *testing.T) {
	addr := startNode(t)
	ctx := context.Background()
	alice, err := client.New([]string{addr}, client.Options{Name: "alice@ci-1:42"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := client.New([]string{addr}, client.Options{Name: "bob@ci-2:7"})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()

	l1, err := alice.AcquireWith(ctx, "builds", time.Minute, time.Second, client.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := bob.AcquireWith(ctx, "builds", time.Minute, time.Second, client.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token <= l1.Token || l1.Limit != 2 {
		t.Fatalf("places %+v and %+v: want limit 2 and a larger token for the later", l1, l2)
	}
	if _, err := alice.AcquireWith(ctx, "builds", time.Minute, 50*time.Millisecond, client.Limit(2)); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("third place: %v, want a timeout (both places held)", err)
	}
	_, err = alice.AcquireWith(ctx, "builds", time.Minute, 0, client.Limit(3))
	var se *client.ServerError
	if !errors.Is(err, client.ErrLimitMismatch) || !errors.As(err, &se) {
		t.Fatalf("another limit: %v, want a limit mismatch", err)
	}
	if _, err := alice.Acquire(ctx, "builds", time.Minute, 0); !errors.Is(err, client.ErrLimitMismatch) {
		t.Fatalf("a lock of a semaphore's key: %v, want a limit mismatch", err)
	}

	q, err := alice.Queue(ctx, "builds")
	if err != nil {
		t.Fatal(err)
	}
	if q.Limit != 2 || len(q.Holders) != 2 || q.Holders[0].Token != l1.Token || q.Holders[1].Token != l2.Token ||
		q.Holders[0].ID != l1.ID || q.Holders[1].Name() != "bob@ci-2:7" {
		t.Fatalf("queue %+v; want both places, with their ids", q)
	}

	// A waiter, named, queues for the next free place.
	third := make(chan client.Lock, 1)
	go func() {
		l, err := alice.AcquireWith(ctx, "builds", time.Minute, 10*time.Second, client.Limit(2))
		if err != nil {
			t.Error(err)
		}
		third <- l
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, err = alice.Queue(ctx, "builds")
		if err == nil && len(q.Waiters) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the third acquire never queued: %+v %v", q, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if q.Waiters[0].Name() != "alice@ci-1:42" {
		t.Errorf("waiter %+v: want alice's id", q.Waiters[0])
	}

	// Each place is its token's: bob renews his, alice frees hers, and
	// the waiter takes that place.
	if err := bob.Renew(ctx, "builds", l2.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := bob.Release(ctx, "builds", l1.Token); err != nil {
		t.Fatal(err) // a place is its token's, not its connection's
	}
	l3 := <-third
	if l3.Token <= l2.Token {
		t.Fatalf("the waiter got %+v, want a token larger than %d", l3, l2.Token)
	}
	if err := alice.Release(ctx, "builds", l1.Token); err != nil {
		t.Fatalf("releasing a freed place again (an answer lost, say): %v, want nil: it was released", err)
	}
	if err := alice.Release(ctx, "builds", l1.Token+1); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("releasing with a token that never held the key: %v, want ErrNotHeld", err)
	}
	for _, l := range []client.Lock{l2, l3} {
		if err := alice.Release(ctx, "builds", l.Token); err != nil {
			t.Fatal(err)
		}
	}
	// Free, the key forgets its limit: a lock may take it now.
	l, err := alice.Acquire(ctx, "builds", time.Minute, 0)
	if err != nil || l.Limit != 1 {
		t.Fatalf("a lock after the semaphore: %+v %v", l, err)
	}
}
