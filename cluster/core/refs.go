package core

import (
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// Acquires with a ref, try-locks and withdrawals (X).

// refWait is a waiting acquire that carried ref=R: its answer is written
// as soon as it is known, with the ref, and not held behind older
// acquires of its key (cn.pending is for those without).
type refWait struct {
	key string
	ref proto.Ref
}

// waitRef records that acquire seq of key, which carried ref, waits in
// the engine.
func (cn *conn) waitRef(key string, seq uint64, ref proto.Ref) {
	if cn.refs == nil {
		cn.refs = make(map[uint64]refWait)
	}
	cn.refs[seq] = refWait{key, ref}
	cn.refsPeak = max(cn.refsPeak, len(cn.refs))
	cn.nwaiting++
}

// takeRef forgets the ref'd waiting acquire seq, returning its ref.
func (cn *conn) takeRef(seq uint64) (proto.Ref, bool) {
	if len(cn.refs) == 0 {
		return proto.Ref{}, false
	}
	r, ok := cn.refs[seq]
	if !ok {
		return proto.Ref{}, false
	}
	delete(cn.refs, seq)
	if len(cn.refs) == 0 && cn.refsPeak > 64 {
		// A map keeps the room it grew to; a small one is kept for the
		// next wait, which on a busy key comes at once.
		cn.refs, cn.refsPeak = nil, 0
	}
	cn.nwaiting--
	return r.ref, true
}

// answerAcquire writes the answer to acquire seq of key that was never
// queued: at once when it carried a ref, else in (A, key) order.
func (c *Core) answerAcquire(cn *conn, key string, seq uint64, ref proto.Ref, a answer, line []byte) bool {
	if !ref.IsZero() {
		return c.send(cn, a, line)
	}
	return c.answerA(cn, key, seq, a, line)
}

// answerWaiter answers waiting acquire seq of key on cn: granted with
// token, or (token 0) T. It reports false when cn is gone.
func (c *Core) answerWaiter(cn *conn, key string, seq uint64, granted bool, token uint64, queued int64) bool {
	if cn == nil {
		return false
	}
	a := grant(key, token)
	if !granted {
		a = answered(proto.OpAcquire, key, TimedOut)
	}
	a = a.takenAt(queued)
	if ref, ok := cn.takeRef(seq); ok {
		var line []byte
		if granted {
			line = proto.AppendGrantedRef(c.buf[:0], key, token, ref)
		} else {
			line = proto.AppendTimeoutRef(c.buf[:0], key, ref)
		}
		return c.send(cn, a, line)
	}
	var line []byte
	if granted {
		line = proto.AppendGranted(nil, key, token)
	} else {
		line = proto.AppendTimeout(nil, key)
	}
	return c.answerA(cn, key, seq, a, line)
}

// tryAcquire serves an acquire with a wait of "-": granted or T at once.
func (c *Core) tryAcquire(now time.Time, cn *conn, req proto.Request, seq uint64) {
	key := req.Key
	w := waiterOf(cn, seq)
	evs, err := c.eng.TryAcquireID(now, key, req.Limit, req.Lease, req.ID, w, c.evs[:0])
	granted, tok := c.routeOwn(now, evs, w)
	switch {
	case err != nil:
		c.count.Refusals++
		c.answerAcquire(cn, key, seq, req.Ref, refused(req.Op, key, limitOf(err)), proto.AppendErrorRef(nil, key, req.Op, req.Ref, err.Error()))
	case granted:
		c.send(cn, grant(key, tok), proto.AppendGrantedSet(c.buf[:0], key, []uint64{tok}, c.sets.place, req.Ref))
	default:
		c.count.Timeouts++
		c.answerAcquire(cn, key, seq, req.Ref, answered(proto.OpAcquire, key, TimedOut), proto.AppendTimeoutRef(nil, key, req.Ref))
	}
}

// withdraw serves X: the waiter of key with the id, queued from this
// connection, leaves at once; its acquire is answered T, then the X.
func (c *Core) withdraw(now time.Time, cn *conn, req proto.Request) {
	c.advance(now)
	key := req.Key
	// A set waits, and is answered, on its first key, which X need not
	// name.
	lead := c.eng.QueuedKey(req.ID)
	var buf [engine.MaxSetKeys]string
	keys := c.eng.QueuedKeys(req.ID, buf[:0])
	evs, w, ok := c.eng.Withdraw(now, key, req.ID, uint64(cn.id), c.evs[:0])
	if !ok {
		c.route(now, evs)
		c.send(cn, answered(proto.OpWithdraw, key, OK), proto.AppendWord(c.buf[:0], proto.OpWithdraw, key, "none"))
		return
	}
	c.count.Withdrawals++
	c.answerWaiter(cn, lead, w.Seq, false, 0, 0)
	c.replicateWaiter(proto.Record{Kind: proto.RecLeft, Key: lead, ID: req.ID})
	c.touch(lead)
	if lead != key {
		c.touch(key)
	}
	for _, k := range keys {
		c.touch(k) // a set's other keys: their watchers see it leave
	}
	c.route(now, evs) // what the withdrawal let through; it flushes the watches
	c.send(cn, answered(proto.OpWithdraw, key, OK), proto.AppendWord(c.buf[:0], proto.OpWithdraw, key, proto.WordOK))
}
