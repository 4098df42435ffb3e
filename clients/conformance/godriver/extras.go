package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// handles numbers the holds and watches of this driver.
type handles struct {
	mu      sync.Mutex
	next    int
	holds   map[int]*holdState
	watches map[int]context.CancelFunc
}

type holdState struct {
	h holding
	// e is the election a campaign's hold leads, nil for a plain hold.
	e      *client.Election
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
	l, err := c.TryAcquire(context.Background(), cmd.Key, ms(cmd.LeaseMS), d.acquireOpts(cmd)...)
	if errors.Is(err, client.ErrTimeout) {
		// The client's "held by others" also matches ErrTimeout.
		return map[string]any{"acquired": false}, nil
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"acquired": true, "token": fmt.Sprint(l.Token)}, nil
}

// queueFields is a key's state as DRIVER.md's queue writes it: each
// holder's set, place and value when the answer names them, each
// waiter's mode and set.
func queueFields(qi client.QueueInfo) map[string]any {
	q := qi.Queue
	holders := []map[string]any{}
	for i, h := range q.Holders {
		hf := map[string]any{"token": fmt.Sprint(h.Token), "lease_left_ms": msOf(h.LeaseLeft), "id": h.ID, "shared": qi.Shared}
		if i < len(qi.HolderInfo) {
			info := qi.HolderInfo[i]
			if info.Set != 0 {
				hf["set"] = fmt.Sprint(info.Set)
			}
			if info.Place != 0 {
				hf["place"] = info.Place
			}
			if info.Value != "" {
				hf["value"] = info.Value
			}
		}
		holders = append(holders, hf)
	}
	if len(q.Holders) == 0 && q.Held {
		holders = append(holders, map[string]any{"token": fmt.Sprint(q.Token), "lease_left_ms": msOf(q.LeaseLeft), "id": "", "shared": qi.Shared})
	}
	waiters := []map[string]any{}
	for i, w := range q.Waiters {
		shared, set := false, []string{}
		if i < len(qi.WaiterInfo) {
			shared = qi.WaiterInfo[i].Shared
			set = append(set, qi.WaiterInfo[i].Set...)
		}
		waiters = append(waiters, map[string]any{"waited_ms": msOf(w.Waited), "addr": w.Addr, "id": w.ID, "shared": shared, "set_keys": set})
	}
	limit := q.Limit
	if limit == 0 {
		limit = 1
	}
	return map[string]any{"holders": holders, "waiters": waiters, "nwaiters": max(q.Waiting, len(q.Waiters)), "limit": limit, "shared": qi.Shared}
}

func (d *driver) watch(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.WatchEvents(ctx, cmd.Key)
	if err != nil {
		cancel()
		return nil, err
	}
	return stream(d, ctx, cancel, ch, "watch", func(ev client.WatchEvent) (map[string]any, bool, error) {
		info := ev.Info
		info.Queue = ev.Queue
		return queueFields(info), ev.Stale, ev.Err
	}), nil
}

// stream writes what ch yields as events named event, under a new watch
// handle that unwatch cancels, then a watch_end that says whether
// unwatch or the client's close ended it. A value that says it is stale
// is written as a stale event instead, and the first value after it
// that is not is preceded by a current event (DRIVER.md).
func stream[T any](d *driver, ctx context.Context, cancel context.CancelFunc, ch <-chan T, event string, fields func(T) (map[string]any, bool, error)) map[string]any {
	id := d.newHandle()
	d.h.mu.Lock()
	d.h.watches[id] = cancel
	d.h.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		stale := false
		for v := range ch {
			ev, isStale, why := fields(v)
			if isStale && d.brk.name == "nostale" {
				continue
			}
			switch {
			case isStale:
				stale = true
				msg := ""
				if why != nil {
					msg = why.Error()
				}
				d.write(map[string]any{"event": "stale", "watch": id, "message": msg, "ms_since_open": d.sinceOpen()})
				continue
			case stale:
				stale = false
				d.write(map[string]any{"event": "current", "watch": id, "ms_since_open": d.sinceOpen()})
			}
			ev["event"], ev["watch"], ev["ms_since_open"] = event, id, d.sinceOpen()
			d.write(ev)
		}
		reason := "unwatched"
		if ctx.Err() == nil {
			reason = "closed"
		}
		d.write(map[string]any{"event": "watch_end", "watch": id, "reason": reason})
	}()
	return map[string]any{"watch": id}
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
	ctx, cancel := callCtx(cmd)
	defer cancel()
	opts := d.acquireOpts(cmd)
	if wait := d.brk.wait(ms(cmd.WaitMS)); wait > 0 {
		opts = append(opts, client.Wait(wait))
	}
	if cmd.MaxMS != nil {
		opts = append(opts, client.MaxHold(ms(*cmd.MaxMS)))
	}
	h, err := c.Hold(ctx, cmd.Key, ms(cmd.LeaseMS), opts...)
	if err != nil {
		return nil, err
	}
	return map[string]any{"hold": d.addHold(h, nil), "token": fmt.Sprint(h.Token()), "place": placeOf(h.Lock())}, nil
}

// holding is a hold of one key (*client.Held) or of a set of keys
// (*client.HeldSet).
type holding interface {
	Done() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
}

// addHold numbers h and writes its loss as an event when it comes; e is
// the election h leads, if any.
func (d *driver) addHold(h holding, e *client.Election) int {
	id := d.newHandle()
	st := &holdState{h: h, e: e}
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
		ev := map[string]any{"event": "lost", "hold": id, "reason": reason, "message": msg, "ms_since_open": d.sinceOpen()}
		if s, ok := h.(*client.HeldSet); ok {
			if l, by := s.EndedBy(); by {
				ev["key"] = l.Key // the key whose loss ended the set
			}
		}
		d.write(ev)
	}()
	return id
}

// lossReason maps a Held's Err to DRIVER.md's reasons.
func lossReason(err error) string {
	switch {
	case errors.Is(err, client.ErrClosed):
		return "closed"
	case errors.Is(err, client.ErrMaxHold):
		return "max"
	case err == nil, errors.Is(err, client.ErrReleased):
		return "released"
	case errors.Is(err, client.ErrNotHeld):
		return "notheld"
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

// campaign waits until this client leads the election on key with
// value: its hold, as for hold, is the leadership.
func (d *driver) campaign(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := callCtx(cmd)
	defer cancel()
	e := client.NewElection(c, cmd.Key)
	e.Lease = ms(cmd.LeaseMS)
	if d.brk.wait(0) > 0 {
		// Broken: a campaign that does not wait through an outage.
		lease := e.Lease
		if lease <= 0 {
			lease = client.DefaultElectionLease
		}
		h, err := c.Hold(ctx, cmd.Key, lease, client.Name(cmd.Value), client.Wait(d.brk.wait(0)))
		if err != nil {
			return nil, err
		}
		return map[string]any{"hold": d.addHold(h, nil), "token": fmt.Sprint(h.Token())}, nil
	}
	h, err := e.Campaign(ctx, cmd.Value)
	if err != nil {
		return nil, err
	}
	return map[string]any{"hold": d.addHold(h, e), "token": fmt.Sprint(h.Token())}, nil
}

// leaderFields is a leader as DRIVER.md writes it: value and token null
// when nobody leads.
func leaderFields(l client.Leader) map[string]any {
	if l.Token == 0 {
		return map[string]any{"value": nil, "token": nil}
	}
	return map[string]any{"value": l.Value, "token": fmt.Sprint(l.Token)}
}

func (d *driver) leader(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	l, err := client.NewElection(c, cmd.Key).Leader(context.Background())
	if errors.Is(err, client.ErrNoLeader) {
		return leaderFields(client.Leader{}), nil
	}
	if err != nil {
		return nil, err
	}
	return leaderFields(l), nil
}

// observe writes the leader now, then every change of leader, as leader
// events, until unwatch or close.
func (d *driver) observe(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	leaders := client.NewElection(c, cmd.Key).Observe(ctx)
	return stream(d, ctx, cancel, leaders, "leader", func(l client.Leader) (map[string]any, bool, error) {
		return leaderFields(l), l.Stale, nil
	}), nil
}

// resign gives up the leadership that a campaign's hold is.
func (d *driver) resign(cmd command) (map[string]any, error) {
	st, err := d.holdOf(cmd)
	if err != nil {
		return nil, err
	}
	if st.e == nil {
		return nil, invalidError{fmt.Sprintf("hold %d is no campaign's: release it with hold_release", cmd.Hold)}
	}
	return nil, st.e.Resign(context.Background())
}
