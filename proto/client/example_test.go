package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/lockd-io/lockd/cluster"
	"github.com/lockd-io/lockd/proto/client"
)

// exampleNode runs a lockd node in this process for an example; a real
// program is given the addresses of its cluster instead.
func exampleNode() (addr string, stop func()) {
	node, err := cluster.New(cluster.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Listen(); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		node.Run(ctx)
	}()
	return node.Addr(), func() { cancel(); <-done }
}

// store stands for whatever the lock protects (a database row, a file, an
// API): it refuses a write whose token is smaller than the largest it
// has seen, so that a holder that lost its lock without knowing (frozen,
// partitioned, paused past its lease) cannot do harm when it wakes up.
type store struct {
	mu      sync.Mutex
	fence   uint64
	balance int
}

func (s *store) add(token uint64, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.fence {
		return fmt.Errorf("token %d is older than %d: refused", token, s.fence)
	}
	s.fence = token
	s.balance += n
	return nil
}

// A critical section with Hold: the lock renews itself while the work
// runs, the work stops when Done closes (its Context is cancelled), and
// every write carries the token, which the resource checks.
func ExampleClient_Hold() {
	addr, stop := exampleNode()
	defer stop()
	c, err := client.New([]string{addr}, client.Options{Name: "billing-worker"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var account store

	ctx := context.Background()
	h, err := c.Hold(ctx, "account-42", 10*time.Second, client.Wait(5*time.Second))
	if err != nil {
		log.Fatal(err) // errors.Is(err, client.ErrTimeout): someone else kept it 5s
	}
	defer h.Release(context.Background())

	for i := 0; i < 3; i++ {
		select {
		case <-h.Done():
			// Lost or expired: another client may hold it now. Stop.
			log.Fatal(h.Err())
		default:
		}
		if err := account.add(h.Token(), 10); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("balance:", account.balance)

	// A late write with an older token is refused by the resource itself.
	err = account.add(h.Token()-1, 1000)
	fmt.Println("late write refused:", err != nil)

	if err := h.Release(ctx); err != nil {
		log.Fatal(err)
	}
	<-h.Done()
	fmt.Println("released:", errors.Is(h.Err(), client.ErrReleased))
	// Output:
	// balance: 30
	// late write refused: true
	// released: true
}

// Hold's Context carries the reason the lock ended, for work that takes
// a context.
func ExampleHeld_Context() {
	addr, stop := exampleNode()
	defer stop()
	c, err := client.New([]string{addr}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	h, err := c.Hold(context.Background(), "reindex", 5*time.Second, client.MaxHold(300*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	work := h.Context()
	<-work.Done() // a long job would pass work to every call it makes
	fmt.Println(errors.Is(context.Cause(work), client.ErrMaxHold))
	// Output: true
}

// A semaphore: Limit(n) lets up to n hold the key at once, each with its
// own token; the next waits its turn in the same FIFO queue.
func ExampleLimit() {
	addr, stop := exampleNode()
	defer stop()
	c, err := client.New([]string{addr}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	var held []*client.Held
	for i := 0; i < 2; i++ {
		h, err := c.Hold(ctx, "builds", 30*time.Second, client.Limit(2))
		if err != nil {
			log.Fatal(err)
		}
		held = append(held, h)
	}
	fmt.Println("places held:", len(held))

	_, err = c.Hold(ctx, "builds", 30*time.Second, client.Limit(2), client.Wait(100*time.Millisecond))
	fmt.Println("third waits:", errors.Is(err, client.ErrTimeout))

	held[0].Release(ctx)
	h, err := c.Hold(ctx, "builds", 30*time.Second, client.Limit(2), client.Wait(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("third after a release:", h.Token() > held[1].Token())
	h.Release(ctx)
	held[1].Release(ctx)
	// Output:
	// places held: 2
	// third waits: true
	// third after a release: true
}
