package core

import (
	"errors"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// Readers, sets of keys and values. An acquire that names mode=shared,
// more keys (key=KEY) or a value takes the engine's set path; the
// plain acquire of one key keeps its own, which costs no more than it
// did. The engine answers a set as a row of events, one per key, in the
// order its keys were asked (engine.Event.SetSize): the core gathers
// the row and answers the client once, with every token, on the line's
// key (the first of the row), where the acquire waits on its connection.
// The row's grants are replicated and logged as one change: one
// position (seq), their G records marked set=SET,N, which a standby and
// a recovery apply together once all N have come.

// setBatches is what the core gathers of the rows of set events.
type setBatches struct {
	// answer: the row of Granted or TimedOut events of one set being
	// gathered for its answer.
	n     int
	keys  [engine.MaxSetKeys]string
	toks  [engine.MaxSetKeys]uint64
	place int
	// repl counts the G records of a set's grant still to come in the
	// row being replicated: the row takes one position.
	repl int
	// pending holds, on a standby or in a recovery, the G records of a
	// set's grant read so far; they are applied when the row is whole.
	pending []proto.Record
}

// isSetAcquire reports whether req takes the set path.
func isSetAcquire(req proto.Request) bool {
	return req.Mode != 0 || len(req.Keys) > 0 || req.HasValue
}

// setKeys is req's keys as the engine takes them.
func setKeys(req proto.Request, buf *[engine.MaxSetKeys]engine.SetKey) []engine.SetKey {
	mode := engine.Exclusive
	if req.Mode == proto.ModeShared {
		mode = engine.Shared
	}
	n := 1 + len(req.Keys)
	if n > engine.MaxSetKeys {
		n = engine.MaxSetKeys // Parse allows no more; the engine refuses a set it cannot hold
	}
	buf[0] = engine.SetKey{Key: req.Key, Limit: req.Limit, Mode: mode}
	for i, k := range req.Keys[:n-1] {
		buf[i+1] = engine.SetKey{Key: k, Limit: req.Limit, Mode: mode}
	}
	return buf[:n]
}

// acquireSet serves an acquire on the set path: a reader, several keys,
// or a value.
func (c *Core) acquireSet(now time.Time, cn *conn, req proto.Request, seq uint64) {
	key := req.Key
	w := waiterOf(cn, seq)
	id := req.ID
	var buf [engine.MaxSetKeys]engine.SetKey
	keys := setKeys(req, &buf)
	var evs []engine.Event
	var err error
	if req.Try {
		evs, err = c.eng.TryAcquireValue(now, keys, req.Lease, id, req.Value, w, c.evs[:0])
	} else {
		fresh := id != "" && len(c.streams) > 0 && !c.eng.QueuedID(id)
		evs, err = c.eng.AcquireValue(now, keys, req.Lease, req.Wait, id, req.Value, w, c.evs[:0])
		defer func() {
			if fresh && c.eng.QueuedID(id) {
				c.replicateWaiter(joinedRecord(req, id))
			}
		}()
	}
	toks, place, timedOut := c.routeOwnSet(now, evs, w)
	switch {
	case err != nil:
		c.count.Refusals++
		c.answerAcquire(cn, key, seq, req.Ref, refused(req.Op, key, limitOf(err)), proto.AppendErrorRef(nil, key, req.Op, req.Ref, err.Error()))
	case len(toks) > 0:
		c.send(cn, grant(key, toks[0]), proto.AppendGrantedSet(c.buf[:0], key, toks, place, req.Ref))
	case timedOut || req.Try:
		c.count.Timeouts++
		c.answerAcquire(cn, key, seq, req.Ref, answered(proto.OpAcquire, key, TimedOut), proto.AppendTimeoutRef(nil, key, req.Ref))
	default:
		if req.Ref.IsZero() {
			cn.wait(key, seq)
		} else {
			cn.waitRef(key, seq, req.Ref)
		}
		for _, k := range keys {
			c.touch(k.Key)
		}
		c.flushWatches(now)
	}
}

// joinedRecord is the J record of a waiter of the set path.
func joinedRecord(req proto.Request, id string) proto.Record {
	rec := proto.Record{Kind: proto.RecJoined, Key: req.Key, ID: id, Limit: max(req.Limit, 1), Lease: req.Lease, Wait: req.Wait, Shared: req.Mode == proto.ModeShared}
	if len(req.Keys) > 0 {
		rec.Keys = string(proto.AppendKeys(nil, req.Keys))
	}
	return rec
}

// routeOwnSet routes evs, and returns the tokens and place of w's own
// grant, which the caller answers, or reports that w was answered
// TimedOut at once (a try).
func (c *Core) routeOwnSet(now time.Time, evs []engine.Event, w engine.Waiter) ([]uint64, int, bool) {
	var toks []uint64
	place, timedOut := 0, false
	for _, ev := range evs {
		switch {
		case ev.Kind == engine.Granted && ev.Waiter == w:
			toks = append(toks, ev.Token)
			place = int(ev.Place)
			if len(toks) == 1 {
				c.count.Grants++
			}
			c.replicate(ev)
			c.touch(ev.Key)
		case ev.Kind == engine.TimedOut && ev.Waiter == w:
			timedOut = true
		default:
			c.routeOne(now, ev)
		}
	}
	c.evs = evs
	c.flushWatches(now)
	if len(toks) > 1 {
		place = 0 // a set's grant says no place
	}
	return toks, place, timedOut
}

// routeSetEvent takes in ev, one of a row of set events (SetSize > 1)
// to a waiter: it reports true once the row is whole, with the set's
// tokens (granted) gathered.
func (c *Core) routeSetEvent(ev engine.Event) bool {
	b := &c.sets
	if b.n < len(b.keys) {
		b.keys[b.n], b.toks[b.n] = ev.Key, ev.Token
		b.n++
	}
	return b.n >= ev.SetSize
}

// answerSet answers the set whose row c.sets gathered, and forgets the
// row: granted with every token, or T, on the line's key. A grant whose
// connection is gone is released at once, every key of it.
func (c *Core) answerSet(now time.Time, ev engine.Event) {
	b := &c.sets
	n := b.n
	b.n = 0
	granted := ev.Kind == engine.Granted
	cn := c.conns[ConnID(ev.Waiter.Conn)]
	var toks []uint64
	if granted {
		toks = b.toks[:n]
	}
	if c.answerWaiterSet(cn, b.keys[0], ev.Waiter.Seq, toks, 0, ev.Queued) || !granted {
		return
	}
	var keys [engine.MaxSetKeys]string
	var held [engine.MaxSetKeys]uint64
	copy(keys[:], b.keys[:n])
	copy(held[:], b.toks[:n])
	for i := range n {
		c.releaseOrphan(now, keys[i], held[i])
	}
}

// answerWaiterSet is answerWaiter for a grant of several tokens or with
// a place; toks nil answers T.
func (c *Core) answerWaiterSet(cn *conn, key string, seq uint64, toks []uint64, place int, queued int64) bool {
	if cn == nil {
		return false
	}
	var tok uint64
	if len(toks) > 0 {
		tok = toks[0]
	}
	a := grant(key, tok)
	if toks == nil {
		a = answered(proto.OpAcquire, key, TimedOut)
	}
	a = a.takenAt(queued)
	ref, hasRef := cn.takeRef(seq)
	var line []byte
	if toks == nil {
		line = proto.AppendTimeoutRef(nil, key, ref)
	} else {
		line = proto.AppendGrantedSet(nil, key, toks, place, ref)
	}
	if hasRef {
		return c.send(cn, a, line)
	}
	return c.answerA(cn, key, seq, a, line)
}

// batch is the number of G records of the row ev is one of, when ev is
// a grant (or a re-grant) of a set; 0 otherwise. It counts the row down
// (repl) as its records go.
func (b *setBatches) batch(ev engine.Event) int {
	if ev.Kind != engine.Granted || ev.SetSize <= 1 {
		return 0
	}
	if b.repl == 0 {
		b.repl = ev.SetSize
	}
	b.repl--
	return ev.SetSize
}

// heldRecord is the G record of a grant or a renewal.
func heldRecord(ev engine.Event, batch int) proto.Record {
	rec := proto.Record{Kind: proto.RecHeld, Key: ev.Key, Token: ev.Token, Lease: ev.Lease, Limit: ev.Limit, ID: ev.ID}
	if ev.Mode == engine.Shared || ev.Set != 0 || ev.Place != 0 || ev.Value != "" {
		rec.Shared, rec.Set, rec.Place, rec.Value = ev.Mode == engine.Shared, ev.Set, int(ev.Place), ev.Value
		if batch > 1 && ev.Set != 0 {
			rec.Batch = batch
		}
	}
	return rec
}

// holderRecord is the G record of a holder, for a snapshot.
func holderRecord(h engine.Holder) proto.Record {
	return proto.Record{Kind: proto.RecHeld, Key: h.Key, Token: h.Token, Lease: h.LeaseLeft, Limit: h.Limit, ID: h.ID,
		Shared: h.Mode == engine.Shared, Set: h.Set, Place: h.Place, Value: h.Value}
}

// recordHolder is the holder a G record says, with lease left.
func recordHolder(rec proto.Record, lease time.Duration) engine.Holder {
	mode := engine.Exclusive
	if rec.Shared {
		mode = engine.Shared
	}
	return engine.Holder{Key: rec.Key, Token: rec.Token, LeaseLeft: lease, Limit: rec.Limit, ID: rec.ID, Mode: mode, Set: rec.Set, Place: rec.Place, Value: rec.Value}
}

// gather takes in rec, a G record read back (a standby's stream, a
// recovery), and returns the records to apply now as one change: rec
// alone, or the whole row of a set's grant once its last record has
// come; none while the row is not whole. A row broken by another
// record is refused: its set was never answered, and a standby never
// holds part of a set.
func (b *setBatches) gather(rec proto.Record) ([]proto.Record, string) {
	if rec.Batch <= 1 {
		if len(b.pending) > 0 {
			b.pending = b.pending[:0]
			return nil, "a set's grant broken by another record"
		}
		b.pending = append(b.pending[:0], rec)
		rows := b.pending
		b.pending = b.pending[:0]
		return rows, ""
	}
	if len(b.pending) > 0 && (b.pending[0].Batch != rec.Batch || b.pending[0].Set != rec.Set) {
		b.pending = b.pending[:0]
		return nil, "a set's grant broken by another set's"
	}
	b.pending = append(b.pending, rec)
	if len(b.pending) < rec.Batch {
		return nil, ""
	}
	rows := b.pending
	b.pending = b.pending[:0]
	return rows, ""
}

// applyHeld applies a G record read on the stream: a change, or part of
// a set's, which is applied when whole.
func (c *Core) applyHeld(now time.Time, rec proto.Record) error {
	rows, msg := c.sets.gather(rec)
	if msg != "" {
		return errors.New(msg)
	}
	if len(rows) == 0 {
		return nil
	}
	c.seq++
	for _, r := range rows {
		c.eng.ApplyHolder(now, recordHolder(r, r.Lease))
		c.top = max(c.top, r.Token)
		c.logChange(r)
	}
	return nil
}

// recoverHeld applies a G record read back from the data directory,
// logged at at: a change, or part of a set's grant, applied when whole.
// A row a crash cut short was never answered: it is dropped.
func (c *Core) recoverHeld(now, at time.Time, rec proto.Record) {
	if rec.Batch <= 1 {
		c.dropPartSet()
	}
	rows, msg := c.sets.gather(rec)
	if msg != "" {
		c.log.Warn("data directory: "+msg+"; its part is dropped", "self", c.self)
		rows, _ = c.sets.gather(rec)
	}
	if len(rows) > 0 {
		c.seq++
	}
	for _, r := range rows {
		c.eng.ApplyHolder(now, recordHolder(r, r.Lease-max(now.Sub(at), 0)))
	}
}

// dropPartSet forgets the part of a set's grant read back, whose row a
// crash cut short.
func (c *Core) dropPartSet() {
	if len(c.sets.pending) > 0 {
		c.log.Warn("data directory: a set's grant cut short by a crash is dropped (it was never answered)", "self", c.self, "records", len(c.sets.pending))
		c.sets.pending = c.sets.pending[:0]
	}
}
