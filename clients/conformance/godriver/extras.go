package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// The client API behind try, watch and hold is found on the Client by
// method, so that this driver builds against a client without it and
// answers "unsupported" there, and takes it up with no edit once the
// client has it.

// tryAcquirer is a client with try-lock (proto's wait "-"). It came with
// acquire refs and withdraw (X) in one change of the client, so a client
// without it has neither: open says so.
type tryAcquirer interface {
	TryAcquire(ctx context.Context, key string, lease time.Duration, opts ...client.AcquireOption) (client.Lock, error)
}

// watcher is a client with Watch (proto's L).
type watcher interface {
	Watch(ctx context.Context, key string) (<-chan proto.Queue, error)
}

// held is what the client's Hold returns: a lock that renews itself.
type held interface {
	Token() uint64
	Done() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
}

// missing lists the behaviours of DRIVER.md's open "unsupported" that c
// lacks.
func missing(c *client.Client) []string {
	m := []string{}
	if _, ok := any(c).(tryAcquirer); !ok {
		m = append(m, "ref", "withdraw")
	}
	return m
}

// handles numbers the holds and watches of this driver.
type handles struct {
	mu      sync.Mutex
	next    int
	holds   map[int]*holdState
	watches map[int]context.CancelFunc
}

type holdState struct {
	h      held
	mu     sync.Mutex
	lost   bool
	reason string
}

func (d *driver) newHandle() int {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	d.h.next++
	return d.h.next
}

func (d *driver) try(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	t, ok := any(c).(tryAcquirer)
	if !ok {
		return nil, errUnsupported
	}
	var opts []client.AcquireOption
	if cmd.Limit != 0 {
		opts = append(opts, client.Limit(cmd.Limit))
	}
	l, err := t.TryAcquire(context.Background(), cmd.Key, ms(cmd.LeaseMS), opts...)
	if errors.Is(err, client.ErrTimeout) {
		// The client's "held by others" also matches ErrTimeout.
		return map[string]any{"acquired": false}, nil
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"acquired": true, "token": fmt.Sprint(l.Token)}, nil
}

func queueFields(q proto.Queue) map[string]any {
	holders := []map[string]any{}
	for _, h := range q.Holders {
		holders = append(holders, map[string]any{"token": fmt.Sprint(h.Token), "lease_left_ms": msOf(h.LeaseLeft), "id": h.ID})
	}
	if len(q.Holders) == 0 && q.Held {
		holders = append(holders, map[string]any{"token": fmt.Sprint(q.Token), "lease_left_ms": msOf(q.LeaseLeft), "id": ""})
	}
	waiters := []map[string]any{}
	for _, w := range q.Waiters {
		waiters = append(waiters, map[string]any{"waited_ms": msOf(w.Waited), "addr": w.Addr, "id": w.ID})
	}
	limit := q.Limit
	if limit == 0 {
		limit = 1
	}
	return map[string]any{"holders": holders, "waiters": waiters, "nwaiters": max(q.Waiting, len(q.Waiters)), "limit": limit}
}

func (d *driver) watch(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	w, ok := any(c).(watcher)
	if !ok {
		return nil, errUnsupported
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := w.Watch(ctx, cmd.Key)
	if err != nil {
		cancel()
		return nil, err
	}
	id := d.newHandle()
	d.h.mu.Lock()
	d.h.watches[id] = cancel
	d.h.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for q := range ch {
			ev := queueFields(q)
			ev["event"], ev["watch"], ev["ms_since_open"] = "watch", id, d.sinceOpen()
			d.write(ev)
		}
		reason := "unwatched"
		if ctx.Err() == nil {
			reason = "closed"
		}
		d.write(map[string]any{"event": "watch_end", "watch": id, "reason": reason})
	}()
	return map[string]any{"watch": id}, nil
}

func (d *driver) unwatch(cmd command) (map[string]any, error) {
	d.h.mu.Lock()
	cancel := d.h.watches[cmd.Watch]
	delete(d.h.watches, cmd.Watch)
	d.h.mu.Unlock()
	if cancel == nil {
		return nil, invalidError{fmt.Sprintf("no watch %d", cmd.Watch)}
	}
	cancel()
	return nil, nil
}

func (d *driver) sinceOpen() float64 { return msOf(time.Since(d.opened)) }

func (d *driver) hold(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	m := reflect.ValueOf(c).MethodByName("Hold")
	if !m.IsValid() {
		return nil, errUnsupported
	}
	if cmd.MaxMS != nil {
		// MaxHold is an option the driver cannot name without the API.
		return nil, errUnsupported
	}
	ctx, cancel := callCtx(cmd)
	defer cancel()
	if cmd.WaitMS > 0 {
		// Without a wait option Hold waits until its ctx ends.
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeoutCause(ctx, ms(cmd.WaitMS), errHoldWait)
		defer c2()
	}
	args := []reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(cmd.Key), reflect.ValueOf(ms(cmd.LeaseMS))}
	if cmd.Limit != 0 {
		args = append(args, reflect.ValueOf(client.Limit(cmd.Limit)))
	}
	out := m.Call(args)
	if e, _ := out[1].Interface().(error); e != nil {
		if errors.Is(context.Cause(ctx), errHoldWait) {
			return nil, fmt.Errorf("%w: %v", client.ErrTimeout, e)
		}
		return nil, e
	}
	h, ok := out[0].Interface().(held)
	if !ok {
		return nil, errUnsupported
	}
	id := d.newHandle()
	st := &holdState{h: h}
	d.h.mu.Lock()
	d.h.holds[id] = st
	d.h.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		<-h.Done()
		reason := lossReason(h.Err())
		st.mu.Lock()
		st.lost, st.reason = true, reason
		st.mu.Unlock()
		msg := ""
		if err := h.Err(); err != nil {
			msg = err.Error()
		}
		d.write(map[string]any{"event": "lost", "hold": id, "reason": reason, "message": msg, "ms_since_open": d.sinceOpen()})
	}()
	return map[string]any{"hold": id, "token": fmt.Sprint(h.Token())}, nil
}

var errHoldWait = errors.New("the hold's wait_ms elapsed")

// lossReason maps a Held's Err to DRIVER.md's reasons. The client's
// ErrExpired, ErrReleased and ErrMaxHold are told apart by their words:
// this driver builds against clients that do not name them.
func lossReason(err error) string {
	switch {
	case errors.Is(err, client.ErrClosed):
		return "closed"
	case errors.Is(err, client.ErrNotHeld):
		return "notheld"
	case err == nil:
		return "released"
	}
	m := err.Error()
	switch {
	case strings.Contains(m, "released"):
		return "released"
	case strings.Contains(m, "MaxHold"):
		return "max"
	}
	return "expired"
}

func (d *driver) holdOf(cmd command) (*holdState, error) {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	st := d.h.holds[cmd.Hold]
	if st == nil {
		return nil, invalidError{fmt.Sprintf("no hold %d", cmd.Hold)}
	}
	return st, nil
}

func (d *driver) holdRelease(cmd command) (map[string]any, error) {
	st, err := d.holdOf(cmd)
	if err != nil {
		return nil, err
	}
	return nil, st.h.Release(context.Background())
}

func (d *driver) holdState(cmd command) (map[string]any, error) {
	st, err := d.holdOf(cmd)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	r := map[string]any{"lost": st.lost}
	if st.lost {
		r["reason"] = st.reason
	}
	return r, nil
}
