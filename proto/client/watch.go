package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// watchBuffer is how many states a Watch channel holds for a reader that
// is behind. A reader further behind loses the oldest of them, never the
// latest: every state is the whole of the key's holders and waiters, so
// the last one read is always the key as it is now.
const watchBuffer = 64

// Watch subscribes to key's holders and waiters (proto's L). The channel
// receives the key's current state first, then a new state after every
// change: a grant, a release, an expiry, a waiter joining or leaving.
// Renewals alone send nothing. It is closed when ctx ends or the client
// is closed. Each state reads as Queue's answer does: Limit is 1 for a
// lock.
//
// The watch follows the active node: when the connection drops, or the
// active hands its role over, the client subscribes again where the role
// went and delivers the current state there first, so a reader sees the
// key as the new active has it. Several Watch calls of one key share one
// subscription.
//
// While no node can be reached, the last state received stays the last
// one: Watch does not say that it may be out of date. WatchEvents does.
//
// Watch returns once the first state is known. It fails when ctx ends
// first, when no node can be reached (ErrUnavailable), or when the node
// refuses the watch (a *ServerError: too many watches on the connection
// or the node, or an unauthenticated connection to a node with secrets).
func (c *Client) Watch(ctx context.Context, key string) (<-chan proto.Queue, error) {
	w := &watcher{states: make(chan proto.Queue, watchBuffer)}
	if err := c.watch(ctx, key, w); err != nil {
		return nil, err
	}
	return w.states, nil
}

// WatchEvent is one event of WatchEvents: a state of the watched key, or
// word that the watch lost the cluster.
type WatchEvent struct {
	// Queue is the key's holders and waiters: the state just read from
	// the active node, or, in a Stale event, the last state read.
	Queue proto.Queue
	// Info is Queue with what the node said beyond it: the key's mode,
	// sets, places and values (see QueueInfo). Info.Queue is Queue.
	Info QueueInfo
	// Addr is the node Queue was read from.
	Addr string
	// Stale says that the watch lost the cluster: no node has served it
	// for Options.FailureTimeout (the nodes are down, frozen or out of
	// reach), so Queue, the last state known, may no longer be the key's.
	// The watch keeps trying. The next event that is not Stale is the
	// state read where it subscribed again: the watch is current again.
	Stale bool
	// Err, in a Stale event, says why; it wraps ErrUnavailable.
	Err error
}

// WatchEvents is Watch with word of the watch's own health: besides each
// state of key, it delivers a Stale event when the watch loses the
// cluster, and then the state it reads once it subscribes again, which
// says it is current again. A reader that shows the key to people, or
// acts on who holds it, learns so when what it has may be old. Several
// Watch and WatchEvents calls of one key share one subscription; a
// WatchEvents that joins a stale one gets the last state, then a Stale
// event.
func (c *Client) WatchEvents(ctx context.Context, key string) (<-chan WatchEvent, error) {
	w := &watcher{events: make(chan WatchEvent, watchBuffer)}
	if err := c.watch(ctx, key, w); err != nil {
		return nil, err
	}
	return w.events, nil
}

func (c *Client) watch(ctx context.Context, key string, w *watcher) error {
	if err := checkKey("watch", key); err != nil {
		return err
	}
	if c.ctx.Err() != nil {
		return callErr("watch", key, ErrClosed)
	}
	c.wmu.Lock()
	g := c.watches[key]
	fresh := g == nil
	if fresh {
		g = &watchGroup{c: c, key: key, move: make(chan string, 1), stop: make(chan struct{}), ready: make(chan struct{})}
		if c.watches == nil {
			c.watches = make(map[string]*watchGroup)
		}
		c.watches[key] = g
	}
	g.mu.Lock()
	g.subs = append(g.subs, w)
	if g.have {
		w.send(WatchEvent{Queue: g.last.Queue, Info: g.last, Addr: g.lastAddr})
		if g.stale {
			w.send(WatchEvent{Queue: g.last.Queue, Info: g.last, Addr: g.lastAddr, Stale: true, Err: g.staleErr})
		}
	}
	g.mu.Unlock()
	c.wmu.Unlock()
	if fresh {
		c.wg.Add(1)
		go g.run()
	}
	select {
	case <-g.ready:
	case <-ctx.Done():
		g.remove(w)
		return ctx.Err()
	}
	if g.err != nil {
		g.remove(w)
		return callErr("watch", key, g.err)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-ctx.Done():
		case <-g.stop:
		case <-c.ctx.Done():
		}
		g.remove(w)
	}()
	return nil
}

// watcher is one Watch call's channel of states, or one WatchEvents
// call's channel of events.
type watcher struct {
	states chan proto.Queue
	events chan WatchEvent
	closed bool
}

// send hands ev to the reader (a Watch reader gets states only),
// dropping the oldest one it has not read when its buffer is full. Its
// group's mu is held.
func (w *watcher) send(ev WatchEvent) {
	switch {
	case w.closed:
	case w.events != nil:
		sendLatest(w.events, ev)
	case !ev.Stale:
		sendLatest(w.states, ev.Queue)
	}
}

func (w *watcher) close() {
	w.closed = true
	if w.events != nil {
		close(w.events)
	} else {
		close(w.states)
	}
}

// sendLatest sends v on ch, dropping the oldest value queued when ch is
// full: every state is the whole of the key's holders and waiters, so
// the last one read is always the key as it is now.
func sendLatest[T any](ch chan T, v T) {
	for range 2 {
		select {
		case ch <- v:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// watchGroup is the client's one subscription to a key, shared by every
// Watch of it. Its run goroutine keeps it subscribed on the active.
type watchGroup struct {
	c   *Client
	key string

	// ready is closed once the first subscription is settled; err says
	// how (nil: subscribed).
	ready chan struct{}
	err   error

	move chan string   // cap 1: the subscription was lost; the address to try ("" any)
	stop chan struct{} // closed when the last watcher left

	mu       sync.Mutex
	subs     []*watcher
	cn       *conn // where the subscription lives now, nil while it moves
	last     QueueInfo
	lastAddr string // where last was read
	have     bool
	ended    bool
	// live: the node at cn answered the subscription, and it has not
	// been lost since. stale: it has been lost for a failure timeout,
	// and the watchers were told (staleErr); staleT fires then.
	live     bool
	stale    bool
	staleErr error
	staleT   *time.Timer
	lastErr  error // why the last subscription attempt failed
}

// remove takes w out of the group, closing its channel; the last one out
// ends the subscription.
func (g *watchGroup) remove(w *watcher) {
	c := g.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.closed {
		return
	}
	w.close()
	for i, s := range g.subs {
		if s == w {
			g.subs = append(g.subs[:i], g.subs[i+1:]...)
			break
		}
	}
	if len(g.subs) == 0 && !g.ended {
		g.ended = true
		if g.staleT != nil {
			g.staleT.Stop()
		}
		if c.watches[g.key] == g {
			delete(c.watches, g.key)
		}
		close(g.stop)
	}
}

// deliver hands an L answer read on cn to every watcher.
func (g *watchGroup) deliver(cn *conn, a proto.Answer) {
	q, err := ParseQueueInfo(a)
	if err != nil {
		g.c.log.Warn("lockd watch answer unreadable", "addr", cn.addr, "key", a.Key, "err", err)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cn != cn {
		return // a line from a connection the watch has left
	}
	g.last, g.lastAddr, g.have = q, cn.addr, true
	g.live, g.stale = true, false
	if g.staleT != nil {
		g.staleT.Stop()
		g.staleT = nil
	}
	for _, w := range g.subs {
		w.send(WatchEvent{Queue: q.Queue, Info: q, Addr: cn.addr})
	}
}

// lost says that the subscription on cn is gone: the connection dropped
// (addr "") or the node gave its role up and named addr.
func (g *watchGroup) lost(cn *conn, addr string) {
	g.mu.Lock()
	mine := g.cn == cn
	if mine {
		g.cn = nil
		g.live = false
		if g.staleT == nil && !g.stale && !g.ended {
			g.staleT = time.AfterFunc(g.c.opts.FailureTimeout, g.goStale)
		}
	}
	g.mu.Unlock()
	if !mine {
		return
	}
	select {
	case g.move <- addr:
	default:
	}
}

// goStale tells the watchers that the watch lost the cluster, if it has
// not subscribed again since it was lost a failure timeout ago.
func (g *watchGroup) goStale() {
	g.mu.Lock()
	cause := g.lastErr
	g.mu.Unlock()
	if !errors.Is(cause, ErrUnavailable) {
		cause = g.c.unavailable(cause) // not under g.mu: c.mu comes first
	}
	err := fmt.Errorf("watch %s lost the cluster: no node has served it for %s (the failure timeout): %w; it keeps trying, and until then its last state may be out of date",
		g.key, g.c.opts.FailureTimeout, cause)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.staleT = nil
	if g.live || g.stale || g.ended || !g.have {
		return
	}
	g.stale, g.staleErr = true, err
	for _, w := range g.subs {
		w.send(WatchEvent{Queue: g.last.Queue, Info: g.last, Addr: g.lastAddr, Stale: true, Err: err})
	}
}

// run keeps the group subscribed until its last watcher leaves or the
// client closes.
func (g *watchGroup) run() {
	c := g.c
	defer c.wg.Done()
	var at attempt
	first := true
	for {
		cn, err := g.subscribe(&at)
		if first {
			first = false
			g.err = err
			close(g.ready)
			if err != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, ErrClosed) || errors.Is(err, errWatchStopped) {
				return
			}
			// Refused or unreachable for now: keep trying, as the reader
			// waits for the key's next state.
			c.log.Warn("lockd watch lost; subscribing again", "key", g.key, "err", err)
			g.mu.Lock()
			g.lastErr = err
			g.mu.Unlock()
			t := time.NewTimer(min(c.opts.Redial, time.Second))
			select {
			case <-t.C:
			case <-g.stop:
				t.Stop()
				return
			case <-c.ctx.Done():
				t.Stop()
				return
			}
			at = attempt{}
			continue
		}
		select {
		case addr := <-g.move:
			at = attempt{target: addr}
		case <-g.stop:
			cn.unwatch(g)
			return
		case <-c.ctx.Done():
			return
		}
	}
}

var errWatchStopped = errors.New("the watch ended")

// subscribe sends L on the active's connection, following redirects,
// until the node answers the current state.
func (g *watchGroup) subscribe(at *attempt) (*conn, error) {
	c := g.c
	select {
	case <-g.move: // a loss before this attempt: it is the one under way
	default:
	}
	for {
		cn, gen, wake, err := c.choose(at)
		if err != nil {
			return nil, err
		}
		if cn == nil {
			select {
			case <-wake:
			case <-g.stop:
				return nil, errWatchStopped
			}
			continue
		}
		cl := newCall(&request{op: proto.OpWatch, key: g.key}, nil)
		if err := cn.watch(g, cl); err != nil {
			at.fail(cn, gen, err)
			continue
		}
		var r result
		select {
		case r = <-cl.res:
		case <-g.stop:
			cl.abandon()
			cn.unwatch(g)
			return nil, errWatchStopped
		}
		if r.err != nil {
			if errors.Is(r.err, ErrClosed) {
				return nil, ErrClosed
			}
			at.fail(cn, gen, r.err)
			if at.drops >= maxDrops {
				return nil, c.unavailable(r.err)
			}
			continue
		}
		a := r.ans
		switch a.Kind {
		case proto.OpWatch:
			c.setActive(cn.addr)
			return cn, nil
		case proto.KindMoved:
			cn.unwatch(g)
			addr, err := movedTo(cn.addr, a)
			if err != nil {
				return nil, err
			}
			at.moves++
			if at.moves > 10*maxMoves {
				return nil, fmt.Errorf("redirected %d times in a row, the last time by %s to %s: %w", at.moves, cn.addr, addr, ErrDisagree)
			}
			if c.stale(addr) {
				// A failover under way, or the node is back (stale
				// dialled it): ask again shortly.
				at.target = ""
			} else {
				c.setActive(addr)
				at.target = addr
			}
			if pause := moveBackoff(at.moves); pause > 0 {
				t := time.NewTimer(pause)
				select {
				case <-t.C:
				case <-g.stop:
					t.Stop()
					return nil, errWatchStopped
				}
			}
		case proto.KindError:
			cn.unwatch(g)
			return nil, serverError(a)
		default:
			cn.unwatch(g)
			return nil, badAnswer("watch", g.key, cn, a)
		}
	}
}

// watch registers g on cn and sends its L, under one lock, so that no L
// line of the key is read before the watch is there to take it.
func (cn *conn) watch(g *watchGroup, cl *call) error {
	cn.mu.Lock()
	if cn.nc == nil {
		cn.mu.Unlock()
		return fmt.Errorf("connection to %s is down", cn.addr)
	}
	if cn.watching == nil {
		cn.watching = make(map[string]*watchGroup)
	}
	cn.watching[g.key] = g
	g.mu.Lock()
	g.cn = cn
	g.mu.Unlock()
	cn.queueLocked(cl)
	cn.mu.Unlock()
	cn.wakeWriter()
	return nil
}

// unwatch takes g off cn and, if the connection is up, sends U. Lines of
// the key read after this are dropped; U's answer is consumed unread.
func (cn *conn) unwatch(g *watchGroup) {
	g.mu.Lock()
	if g.cn == cn {
		g.cn = nil
	}
	g.mu.Unlock()
	cn.mu.Lock()
	if cn.watching[g.key] != g {
		cn.mu.Unlock()
		return
	}
	delete(cn.watching, g.key)
	if cn.nc == nil {
		cn.mu.Unlock()
		return
	}
	cl := newCall(&request{op: proto.OpUnwatch, key: g.key}, nil)
	cl.state.Store(callAbandoned)
	cn.queueLocked(cl)
	cn.mu.Unlock()
	cn.wakeWriter()
}

// withdraw sends X for an abandoned acquire still outstanding on cn, so
// that the node takes it out of its queue at once instead of granting it
// later for nothing. The answers (the acquire's T, then X's own) are
// consumed by the reader; a grant that crossed the X goes to orphan,
// which releases it.
func (cn *conn) withdraw(cl *call) {
	if cl.req.op != proto.OpAcquire || cl.req.id == "" || cl.req.try {
		return
	}
	cn.mu.Lock()
	q := cn.pending[pendingKey{proto.OpAcquire, cl.req.key}]
	outstanding := false
	if q != nil && cn.nc != nil {
		for _, o := range q.calls[q.head:] {
			if o == cl {
				outstanding = true
				break
			}
		}
	}
	if !outstanding {
		cn.mu.Unlock()
		return
	}
	x := newCall(&request{op: proto.OpWithdraw, key: cl.req.key, id: cl.req.id}, nil)
	x.state.Store(callAbandoned)
	cn.queueLocked(x)
	cn.mu.Unlock()
	cn.wakeWriter()
}
