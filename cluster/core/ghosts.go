package core

import (
	"slices"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// Replicated waiters. The active streams each waiter whose acquire has
// an id (J when it joins the queue, D when it leaves without a grant; a
// G with its id says it was granted) to standbys that read them
// (PeerVersion 3). A standby keeps them, in queue order, beside its
// engine; when it takes the role, it queues them as ghosts (engine
// AddGhost) behind the holders, so a client that re-sends its acquire
// with the same id gets its place and its wait back. They do not count
// as state changes (seq): they move no token and no holder, and a
// standby of an older version, which never sees them, keeps counting
// the same positions.

// replWaiter is a waiter as a standby knows it.
type replWaiter struct {
	key   string
	id    string
	lease time.Duration
	until time.Time // when its wait ends; zero: forever
	limit int
	// shared: it asks as a reader; keys: a set's every key, key first,
	// nil for one key.
	shared bool
	keys   []string
}

// ghostGrace is how long a new active keeps the places of the waiters it
// was told of: its clients re-send their acquires as soon as they find
// it, well within a failure timeout; a place nobody claims is given up
// then (and never after engine.MaxGhostGrace).
func (c *Core) ghostGrace() time.Duration {
	return min(max(c.cfg.FailureTimeout, 500*time.Millisecond), engine.MaxGhostGrace)
}

// replicateWaiter streams a waiter's record: one with an id that joined
// a queue (RecJoined) or left it (RecLeft). Standbys before stream
// version 3 keep no queues, and are sent neither.
func (c *Core) replicateWaiter(rec proto.Record) {
	if rec.ID == "" || len(c.streams) == 0 {
		return
	}
	var b []byte
	for _, s := range c.streams {
		if s.stream.version < 3 {
			continue
		}
		if b == nil {
			b = proto.AppendRecord(c.buf[:0], rec)
		}
		c.write(s.id, record, b)
	}
	if b != nil {
		c.buf = b[:0]
	}
}

// snapshotWaiters lists every waiter with an id, in queue order, for a
// standby's snapshot. It goes right before the synced mark, so it is the
// queues as they are then; a waiter the standby heard of while the
// snapshot was sent moves to its listed place.
func (c *Core) snapshotWaiters(now time.Time, b []byte) []byte {
	c.eng.Waiters(now, func(key string, limit int, w engine.WaiterInfo) {
		if w.ID == "" {
			return
		}
		rec := proto.Record{Kind: proto.RecJoined, Key: key, ID: w.ID, Limit: limit, Lease: w.Lease, Wait: w.WaitLeft, Shared: w.Mode == engine.Shared}
		if len(w.Set) > 0 {
			if w.Set[0].Key != key {
				return // a set is listed on each of its keys, and sent once
			}
			rec.Keys = setRest(w.Set)
		}
		b = proto.AppendRecord(b, rec)
	})
	return b
}

// applyJoined takes a J record in: the waiter goes to the tail of its
// key, moving there if it was known already.
func (c *Core) applyJoined(now time.Time, rec proto.Record) {
	c.forgetWaiter(rec.ID)
	w := replWaiter{key: rec.Key, id: rec.ID, lease: rec.Lease, limit: rec.Limit, shared: rec.Shared}
	if rest, ok := proto.SplitKeys(rec.Keys); ok {
		w.keys = append([]string{rec.Key}, rest...)
	}
	if rec.Wait > 0 {
		w.until = now.Add(rec.Wait)
	}
	if c.rwait == nil {
		c.rwait = make(map[string][]replWaiter)
		c.rwaitKey = make(map[string]string)
	}
	c.rwait[rec.Key] = append(c.rwait[rec.Key], w)
	c.rwaitKey[rec.ID] = rec.Key
}

// forgetWaiter drops the replicated waiter with id: it left, or was
// granted (a G record with its id).
func (c *Core) forgetWaiter(id string) {
	key, ok := c.rwaitKey[id]
	if !ok {
		return
	}
	delete(c.rwaitKey, id)
	ws := slices.DeleteFunc(c.rwait[key], func(w replWaiter) bool { return w.id == id })
	if len(ws) == 0 {
		delete(c.rwait, key)
	} else {
		c.rwait[key] = ws
	}
}

// queueGhosts, on promotion, queues the replicated waiters as ghosts.
func (c *Core) queueGhosts(now time.Time) {
	if len(c.rwait) == 0 {
		c.rwait, c.rwaitKey = nil, nil
		return
	}
	keys := make([]string, 0, len(c.rwait))
	for k := range c.rwait {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	grace := c.ghostGrace()
	n := 0
	for _, k := range keys {
		for _, w := range c.rwait[k] {
			left := time.Duration(0)
			if !w.until.IsZero() {
				if left = w.until.Sub(now); left <= 0 {
					continue
				}
			}
			if c.eng.AddGhostSet(now, w.setKeys(), w.id, w.lease, left, grace) {
				n++
			}
		}
	}
	c.rwait, c.rwaitKey = nil, nil
	if n > 0 {
		c.log.Info("kept the places of the last active's waiters", "self", c.self, "waiters", n, "grace", grace.String())
	}
}

// setKeys is the keys w asks for, as the engine takes them.
func (w replWaiter) setKeys() []engine.SetKey {
	mode := engine.Exclusive
	if w.shared {
		mode = engine.Shared
	}
	if len(w.keys) == 0 {
		return []engine.SetKey{{Key: w.key, Limit: w.limit, Mode: mode}}
	}
	keys := make([]engine.SetKey, len(w.keys))
	for i, k := range w.keys {
		keys[i] = engine.SetKey{Key: k, Limit: w.limit, Mode: mode}
	}
	return keys
}

// setRest is the keys of a set after its first, as a J record lists
// them.
func setRest(set []engine.SetKey) string {
	rest := make([]string, 0, len(set)-1)
	for _, k := range set[1:] {
		rest = append(rest, k.Key)
	}
	return string(proto.AppendKeys(nil, rest))
}
