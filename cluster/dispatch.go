package cluster

import (
	"container/heap"
	"slices"
	"strconv"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

func waiterOf(c *conn, seq uint64) engine.Waiter { return engine.Waiter{Conn: c.id, Seq: seq} }

// parkedReq is a lock request that arrived while a handoff was in flight;
// it is answered once the handoff ends, one way or the other.
type parkedReq struct {
	c   *conn
	req proto.Request
}

// apply handles a batch of parsed lines from c under one acquisition of
// the node mutex; a key listing (K) lets go of it while it scans.
func (n *Node) apply(c *conn, batch []item) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.gone {
		return
	}
	now := n.now()
	for i := range batch {
		if r := &batch[i].req; batch[i].err == nil && r.Op == proto.OpKeys && n.role == Active && c.role >= auth.Client {
			n.armTimerLocked()
			n.mu.Unlock()
			n.listKeys(c, r.Key)
			n.mu.Lock()
			if c.gone {
				return
			}
			now = n.now()
			continue
		}
		it := &batch[i]
		if it.err != nil {
			pe, _ := it.err.(*proto.ParseError)
			if pe == nil {
				pe = &proto.ParseError{Key: proto.WordNone, Msg: it.err.Error()}
			}
			if pe.Op == proto.OpAcquire && pe.Key != proto.WordNone {
				// Matched by (A, key) like any acquire: it must not
				// overtake an older acquire of the key still waiting.
				seq := c.nextSeq
				c.nextSeq++
				c.answerA(pe.Key, seq, proto.AppendError(nil, pe.Key, pe.Op, pe.Msg))
				continue
			}
			c.send(func(b []byte) []byte { return proto.AppendError(b, pe.Key, pe.Op, pe.Msg) })
			continue
		}
		n.handle(c, now, it.req)
	}
	n.armTimerLocked()
}

// isLockOp reports whether op is served only by the active.
func isLockOp(op proto.Op) bool {
	switch op {
	case proto.OpAcquire, proto.OpRelease, proto.OpRenew, proto.OpQueue, proto.OpKeys:
		return true
	}
	return false
}

func (n *Node) handle(c *conn, now time.Time, req proto.Request) {
	if need := needs(&req); c.role < need {
		n.refuse(c, req, need)
		return
	}
	if isLockOp(req.Op) && n.role != Active {
		if n.role == HandingOff && len(n.parked) < maxParked {
			n.parked = append(n.parked, parkedReq{c, req})
			return
		}
		n.redirect(c, req)
		return
	}
	key := req.Key
	switch req.Op {
	case proto.OpAcquire:
		seq := c.nextSeq
		c.nextSeq++
		if c.nwaiting >= maxConnWaiters {
			c.answerA(key, seq, proto.AppendError(nil, key, req.Op, "this connection already has "+strconv.Itoa(maxConnWaiters)+" waiting acquires; open another connection"))
			return
		}
		w := waiterOf(c, seq)
		evs, err := n.eng.Acquire(now, key, req.Lease, req.Wait, w, n.evs[:0])
		granted, tok := n.routeOwn(evs, w)
		switch {
		case err != nil:
			c.answerA(key, seq, proto.AppendError(nil, key, req.Op, err.Error()))
		case granted:
			if len(c.pending[key]) == 0 {
				c.send(func(b []byte) []byte { return proto.AppendGranted(b, key, tok) })
			} else {
				c.answerA(key, seq, proto.AppendGranted(nil, key, tok))
			}
		default:
			c.wait(key, seq)
		}
	case proto.OpRelease:
		evs, ok := n.eng.Release(now, key, req.Token, n.evs[:0])
		n.route(evs)
		word := proto.WordOK
		if !ok {
			word = proto.WordNotHeld
		}
		c.send(func(b []byte) []byte { return proto.AppendWord(b, proto.OpRelease, key, word) })
	case proto.OpRenew:
		evs, err := n.eng.Renew(now, key, req.Token, req.Lease, n.evs[:0])
		n.route(evs)
		switch {
		case err == nil:
			c.send(func(b []byte) []byte { return proto.AppendWord(b, proto.OpRenew, key, proto.WordOK) })
		case err == engine.ErrNotHeld:
			c.send(func(b []byte) []byte { return proto.AppendWord(b, proto.OpRenew, key, proto.WordNotHeld) })
		default:
			c.send(func(b []byte) []byte { return proto.AppendError(b, key, req.Op, err.Error()) })
		}
	case proto.OpQueue:
		n.advanceLocked(now)
		h, held, ws := n.eng.Inspect(now, key)
		q := proto.Queue{Key: key, Held: held, Token: h.Token, LeaseLeft: h.LeaseLeft, Waiting: len(ws)}
		for _, w := range ws[:min(len(ws), proto.MaxListKeys)] {
			addr := ""
			if wc := n.conns[w.Waiter.Conn]; wc != nil {
				addr = wc.remote
			}
			q.Waiters = append(q.Waiters, proto.QueueWaiter{Waited: w.Waited, Addr: addr})
		}
		c.send(func(b []byte) []byte { return proto.AppendQueue(b, q) })
	case proto.OpKeys:
		// Parked during a handoff and replayed under the mutex: list
		// without holding up the replay.
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.listKeys(c, key)
		}()
	case proto.OpStatus:
		st := n.statusLocked(now)
		c.send(func(b []byte) []byte { return proto.AppendStatus(b, key, st) })
	case proto.OpHandoff:
		n.handleHandoffRequest(c, req)
	case proto.OpAuth:
		n.authStep(c, &req)
	case proto.OpBeat, proto.OpSync, proto.RecTakeover, proto.OpResolve:
		// Peer messages move tokens and roles: only the nodes of --peers
		// may send them, naming themselves.
		if n.peerByAddr(key) == nil {
			c.send(func(b []byte) []byte {
				return proto.AppendError(b, key, req.Op, key+" is not a peer of this node (not in its --peers); peer messages are for lockd nodes")
			})
			return
		}
		switch req.Op {
		case proto.OpBeat:
			n.answerBeat(c, now, req)
		case proto.OpSync:
			n.subscribe(c, now, req)
		case proto.OpResolve:
			n.answerResolve(c, req)
		default:
			n.takeoverConfirmed(c, req)
		}
	}
}

// refuse answers a request that needs a role c has not proven.
func (n *Node) refuse(c *conn, req proto.Request, need auth.Role) {
	msg := n.gate.refusal(need, c.role)
	if need >= auth.Admin {
		n.refusedLog.log(n.log, "request refused", "remote", c.remote, "op", req.Op.String(), "key", req.Key, "needs", need.String(), "has", c.role.String())
	}
	if req.Op == proto.OpAcquire {
		seq := c.nextSeq
		c.nextSeq++
		c.answerA(req.Key, seq, proto.AppendError(nil, req.Key, req.Op, msg))
		return
	}
	c.send(func(b []byte) []byte { return proto.AppendError(b, req.Key, req.Op, msg) })
}

// redirect answers a lock request at a node that is not active.
func (n *Node) redirect(c *conn, req proto.Request) {
	to := n.redirectTarget()
	if req.Op == proto.OpAcquire {
		seq := c.nextSeq
		c.nextSeq++
		c.answerA(req.Key, seq, proto.AppendMoved(nil, req.Key, to))
		return
	}
	c.send(func(b []byte) []byte { return proto.AppendMoved(b, req.Key, to) })
}

// redirectTarget is the node clients should go to: the active, or while
// none is known, the node expected to become active.
func (n *Node) redirectTarget() string {
	if n.active != "" {
		return n.active
	}
	if c := n.candidateLocked(n.now()); c != "" {
		return c
	}
	return n.self
}

// routeOwn routes evs and reports whether one of them grants w, which the
// caller answers itself.
func (n *Node) routeOwn(evs []engine.Event, w engine.Waiter) (bool, uint64) {
	granted, tok := false, uint64(0)
	for _, ev := range evs {
		if ev.Kind == engine.Granted && ev.Waiter == w {
			granted, tok = true, ev.Token
			n.replicate(ev)
			continue
		}
		n.routeOne(ev)
	}
	n.evs = evs
	return granted, tok
}

// advanceLocked fires the deadlines due at now and routes what they
// produce: done before reading or moving the state, so it is as of now.
func (n *Node) advanceLocked(now time.Time) {
	n.evs = n.eng.Advance(now, n.evs[:0])
	n.route(n.evs)
}

// route delivers events to their waiters and replicates state changes.
func (n *Node) route(evs []engine.Event) {
	for _, ev := range evs {
		n.routeOne(ev)
	}
	n.evs = evs
}

func (n *Node) routeOne(ev engine.Event) {
	n.replicate(ev)
	switch ev.Kind {
	case engine.Granted, engine.TimedOut:
		c := n.conns[ev.Waiter.Conn]
		if c == nil || c.isClosed() {
			// Its connection closed after the grant was decided: release
			// at once rather than pin the key for a whole lease.
			if ev.Kind == engine.Granted {
				more, _ := n.eng.Release(n.now(), ev.Key, ev.Token, nil)
				for _, m := range more {
					n.routeOne(m)
				}
			}
			return
		}
		var line []byte
		if ev.Kind == engine.Granted {
			line = proto.AppendGranted(nil, ev.Key, ev.Token)
		} else {
			line = proto.AppendTimeout(nil, ev.Key)
		}
		c.answerA(ev.Key, ev.Waiter.Seq, line)
	}
}

// replicate appends the state change of ev to every standby's stream.
func (n *Node) replicate(ev engine.Event) {
	if ev.Kind == engine.TimedOut {
		return
	}
	n.seq++
	if len(n.streams) == 0 {
		return
	}
	rec := proto.Record{Kind: proto.RecHeld, Key: ev.Key, Token: ev.Token, Lease: ev.Lease}
	if ev.Kind == engine.Freed {
		rec = proto.Record{Kind: proto.RecFree, Key: ev.Key, Token: ev.Token}
	}
	for _, c := range n.streams {
		c.send(func(b []byte) []byte { return proto.AppendRecord(b, rec) })
	}
}

func (n *Node) statusLocked(now time.Time) proto.Status {
	keys, waiters := n.eng.Stats()
	st := proto.Status{
		Self:    n.self,
		Role:    string(n.role),
		Active:  n.active,
		Token:   n.eng.HighWater(),
		Seq:     n.seq,
		Uptime:  now.Sub(n.base),
		Keys:    keys,
		Waiters: waiters,
		Sticky:  n.sticky,
	}
	head := n.seq
	if n.role != Active {
		head = max(n.activeSeq, n.seq)
	}
	all := make([]proto.PeerStatus, 0, len(n.peers)+1)
	selfStatus := proto.PeerStatus{Addr: n.self, Role: string(n.role), Reachable: true, Seq: n.seq, Lag: head - n.seq, Token: n.eng.HighWater()}
	inserted := false
	for _, p := range n.peers {
		if !inserted && p.idx > n.selfIdx {
			all = append(all, selfStatus)
			inserted = true
		}
		ps := proto.PeerStatus{Addr: p.addr, Role: p.role, Reachable: p.aliveLocked(now, n.cfg.FailureTimeout), Seq: p.seq, Token: p.token}
		if !ps.Reachable {
			ps.Role = "down"
		} else if head > p.seq && p.role != string(Active) {
			ps.Lag = head - p.seq
		}
		if ps.Role == "" {
			ps.Role = "unknown"
		}
		all = append(all, ps)
	}
	if !inserted {
		all = append(all, selfStatus)
	}
	st.Peers = all
	return st
}

// keysSlice is how many keys one hold of the node mutex scans for K.
const keysSlice = 4096

// listKeys answers "K pattern" on c: the first proto.MaxListKeys matching
// keys in byte order, and how many matched. It scans a slice of the keys
// at a time under the node mutex, so that others are served in between,
// and at most maxScans listings run at once. Keys that change during the
// listing may be missed or, in TOTAL, counted twice.
func (n *Node) listKeys(c *conn, pattern string) {
	select {
	case n.scans <- struct{}{}:
		defer func() { <-n.scans }()
	case <-n.ctx.Done():
		return
	}
	var top keyHeap // the smallest matches so far, largest on top
	inTop := make(map[string]bool)
	total := 0
	cursor := engine.ScanStart
	for cursor != 0 {
		n.mu.Lock()
		if c.gone {
			n.mu.Unlock()
			return
		}
		if n.role != Active {
			to := n.redirectTarget()
			n.mu.Unlock()
			c.send(func(b []byte) []byte { return proto.AppendMoved(b, pattern, to) })
			return
		}
		now := n.now()
		n.advanceLocked(now)
		cursor = n.eng.Scan(now, cursor, keysSlice, func(h engine.Holder, _ bool) {
			if !proto.MatchKeys(pattern, h.Key) || inTop[h.Key] {
				return
			}
			total++
			switch {
			case len(top) < proto.MaxListKeys:
				heap.Push(&top, h.Key)
				inTop[h.Key] = true
			case h.Key < top[0]:
				delete(inTop, top[0])
				top[0] = h.Key
				heap.Fix(&top, 0)
				inTop[h.Key] = true
			}
		})
		n.mu.Unlock()
	}
	keys := []string(top)
	slices.Sort(keys)
	fields := append([]string{strconv.Itoa(total)}, keys...)
	c.send(func(b []byte) []byte { return proto.AppendFields(b, proto.OpKeys, pattern, fields...) })
}

// keyHeap is a max-heap of keys.
type keyHeap []string

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
