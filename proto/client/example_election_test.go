package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// Leader election: every instance campaigns with its own address; the one
// that leads does the work while its Held lasts, hands its token to what
// it leads, and resigns when it stops; the others (and any observer)
// learn who leads from Observe, pushed by the node.
func ExampleElection() {
	addr, stop := exampleNode()
	defer stop()
	c, err := client.New([]string{addr}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	observer := client.NewElection(c, "scheduler-leader")
	leaders := observer.Observe(ctx)
	fmt.Println("leader at first:", (<-leaders).Value == "")

	e := client.NewElection(c, "scheduler-leader")
	e.Lease = 5 * time.Second
	lead, err := e.Campaign(ctx, "10.0.0.7:8080") // blocks until this instance leads
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("observed:", (<-leaders).Value)

	select {
	case <-lead.Done():
		log.Fatal(lead.Err()) // deposed: stop leading at once
	default:
		// Lead, passing lead.Token() to whatever is led.
	}
	if err := e.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after resigning:", (<-leaders).Value == "")
	// Output:
	// leader at first: true
	// observed: 10.0.0.7:8080
	// after resigning: true
}

// A try-lock: take the key if it is free now, never wait in its queue.
func ExampleClient_TryAcquire() {
	addr, stop := exampleNode()
	defer stop()
	c, err := client.New([]string{addr}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.TryAcquire(ctx, "nightly-report", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.TryAcquire(ctx, "nightly-report", time.Minute)
	fmt.Println("second try: held by others:", errors.Is(err, client.ErrHeld))
	if err := c.Release(ctx, "nightly-report", l.Token); err != nil {
		log.Fatal(err)
	}
	// Output: second try: held by others: true
}
