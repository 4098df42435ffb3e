package cluster

import (
	"context"
	"sync"
)

// turns hands out the node's one turn at scanning a slice of a key
// listing (K) fairly between addresses: in turn to each address that has
// a listing waiting, and within one address to each of its listings in
// turn. Thirty connections of one tenant looping K over every key then
// slow another address's listing down twofold, not thirtyfold; a slice
// at a time, no listing waits for another to end.
type turns struct {
	mu     sync.Mutex
	busy   bool                       // the turn is taken
	queues map[string][]chan struct{} // waiting, by address, oldest first
	order  []string                   // the addresses waiting, next first
	// taken, when set (tests), is told the address of each turn taken.
	taken func(ip string)
}

// take waits for the turn for a listing from ip, and reports false if
// ctx ended first.
func (t *turns) take(ctx context.Context, ip string) bool {
	return t.wait(ctx, ip, t.queue(ip))
}

// pass gives the turn, which a listing from ip holds, to the next
// listing waiting, and waits for ip's next turn, after pause (which
// runs while others scan); it reports false if ctx ended first.
func (t *turns) pass(ctx context.Context, ip string, pause func()) bool {
	ch := t.queue(ip)
	t.give()
	pause()
	return t.wait(ctx, ip, ch)
}

// queue puts a listing from ip in line, and returns the channel closed
// when its turn comes: at once if the turn is free.
func (t *turns) queue(ip string) chan struct{} {
	ch := make(chan struct{})
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.busy {
		t.busy = true
		close(ch)
		return ch
	}
	if t.queues == nil {
		t.queues = make(map[string][]chan struct{})
	}
	if len(t.queues[ip]) == 0 {
		t.order = append(t.order, ip)
	}
	t.queues[ip] = append(t.queues[ip], ch)
	return ch
}

// wait waits for ch, a turn queued for ip.
func (t *turns) wait(ctx context.Context, ip string, ch chan struct{}) bool {
	select {
	case <-ch:
		if t.taken != nil {
			t.taken(ip)
		}
		return true
	case <-ctx.Done():
	}
	t.mu.Lock()
	q := t.queues[ip]
	for i, w := range q {
		if w == ch {
			t.queues[ip] = append(q[:i:i], q[i+1:]...)
			t.mu.Unlock()
			return false
		}
	}
	t.mu.Unlock()
	t.give() // handed the turn meanwhile: pass it on
	return false
}

// give passes the turn on: to the oldest listing of the next address in
// turn, which goes to the end of the order if it has more.
func (t *turns) give() {
	t.mu.Lock()
	for len(t.order) > 0 {
		ip := t.order[0]
		t.order = t.order[1:]
		q := t.queues[ip]
		if len(q) == 0 {
			delete(t.queues, ip) // its waiters gave up
			continue
		}
		if len(q) > 1 {
			t.queues[ip] = q[1:]
			t.order = append(t.order, ip)
		} else {
			delete(t.queues, ip)
		}
		t.mu.Unlock()
		close(q[0])
		return
	}
	t.busy = false
	t.mu.Unlock()
}
