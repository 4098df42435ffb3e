package cluster

import (
	"container/heap"
	"slices"
	"strconv"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// item is one line read from a connection: a request, or why it is not.
type item struct {
	req proto.Request
	err error
}

// apply hands a batch of parsed lines from c to the core under one
// acquisition of the node mutex; a key listing (K) lets go of it while it
// scans, and a new standby's snapshot is sent by a goroutine of its own.
func (n *Node) apply(c *conn, batch []item) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.gone {
		return
	}
	// Answers for other connections are written by c's reader after the
	// batch (direct.go), if it asked to.
	n.direct = c.direct
	defer func() { n.direct = nil }()
	id := core.ConnID(c.id)
	now := n.now()
	// answered: the requests of the batch answered at once, for the
	// request duration if the batch is timed.
	timed := c.timed
	c.timed = false
	answered := uint64(0)
	for i := range batch {
		it := &batch[i]
		if it.err != nil {
			pe, _ := it.err.(*proto.ParseError)
			if pe == nil {
				pe = &proto.ParseError{Key: proto.WordNone, Msg: it.err.Error()}
			}
			pe = unechoed(c, pe)
			n.stats.begin(c, pe.Op, pe.Key)
			n.core.RequestError(id, pe)
			answered += n.stats.end(c, now)
			if n.strangerRefusedLocked(c) {
				return
			}
			continue
		}
		req := &it.req
		switch need := needs(req); {
		case req.Op == proto.OpAuth:
			n.authStep(c, req)
			n.countAuth(c)
			answered++
			if n.strangerRefusedLocked(c) {
				return
			}
		case c.role < need:
			if need >= auth.Admin {
				n.refusedLog.log(n.log, "request refused", "remote", c.remote, "op", req.Op.String(), "key", req.Key, "needs", need.String(), "has", c.role.String())
			}
			n.stats.begin(c, req.Op, req.Key)
			n.core.Refuse(id, req.Op, req.Key, n.gate.refusal(need, c.role))
			answered += n.stats.end(c, now)
			if n.strangerRefusedLocked(c) {
				return
			}
		case req.Op == proto.OpKeys && n.core.Role() == core.Active:
			n.rearmLocked()
			n.direct = nil
			n.mu.Unlock()
			// The answers c's reader held back (direct.go) go before a
			// scan that may wait for others'.
			c.writeHeld()
			n.listKeys(c, req.Key)
			n.mu.Lock()
			if c.gone {
				return
			}
			n.direct = c.direct
			now = n.now()
			answered++
		default:
			// Peer messages are no client requests: their connection's
			// answers are not counted.
			c.peer = c.peer || need == auth.Peer || opIndex[req.Op] < 0
			n.stats.begin(c, req.Op, req.Key)
			n.core.Request(now, id, *req)
			answered += n.stats.end(c, now)
			if req.Op == proto.OpSync && n.core.Syncing(id) {
				n.startSnapshot(c)
			}
		}
	}
	if timed && answered > 0 {
		n.stats.latency.add(time.Since(n.base)-c.readAt, answered)
	}
	n.rearmLocked()
}

// startSnapshot sends a new standby's snapshot from a goroutine of its
// own, a slice per hold of the mutex, never running ahead of what the
// standby reads.
func (n *Node) startSnapshot(c *conn) {
	c.outMu.Lock()
	c.stream = true
	c.outMu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for c.waitRoom() {
			n.mu.Lock()
			done := c.gone || n.core.SnapshotSlice(n.now(), core.ConnID(c.id))
			n.mu.Unlock()
			if done {
				return
			}
		}
	}()
}

// keysSlice is how many keys one hold of the node mutex scans for K, and
// keysPause the pause between two slices: Go's mutex would otherwise hand
// the lock straight back to the scanner, and the clients waiting for it
// would wait for the whole scan.
const (
	keysSlice = 1024
	keysPause = 50 * time.Microsecond
)

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
		var active bool
		cursor, active = n.core.KeysSlice(n.now(), cursor, keysSlice, func(key string) {
			if !proto.MatchKeys(pattern, key) || inTop[key] {
				return
			}
			total++
			switch {
			case len(top) < proto.MaxListKeys:
				heap.Push(&top, key)
				inTop[key] = true
			case key < top[0]:
				delete(inTop, top[0])
				top[0] = key
				heap.Fix(&top, 0)
				inTop[key] = true
			}
		})
		if !active {
			to := n.core.RedirectTarget(n.now())
			n.countShellAnswer(proto.OpKeys, outMoved)
			n.mu.Unlock()
			c.send(func(b []byte) []byte { return proto.AppendMoved(b, pattern, to) })
			return
		}
		if cursor == 0 {
			n.countShellAnswer(proto.OpKeys, outOK)
		}
		n.rearmLocked()
		n.mu.Unlock()
		if cursor != 0 {
			time.Sleep(keysPause)
		}
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
