package core

// Readers and sets of keys, checked end to end.
//
// The clients take a key now and then as a reader (mode=shared) and now
// and then a set of 2 or 3 keys (key=), with ids, re-sent after a
// failover as any acquire is. Each key of a set is then a lock of its
// own: renewed and released by its own token, its lease its own; a
// client that loses one key of a set (notheld, or its lease ran out)
// releases the others at once.
//
// The invariants, checked while mutual exclusion is (s.faulty, exempt:
// the same rules, in docs/cluster.md's words):
//   - mutual exclusion by mode: at any instant a key is held by one
//     writer alone, by readers only, or by up to its limit of a
//     semaphore's holders; never a reader beside a writer;
//   - all or none: an acquire of a set is answered once, with one token
//     for every key it asked (A key T1 T2 ... [place=P] [ref=R]), and each
//     key is then the client's as any lock is: no other client is granted
//     it while the lease runs;
//   - places: a semaphore's grant says its place, 1 to its limit, not
//     one its holders have; a lock's, a reader's or a set's says none;
//   - writer fairness: a reader is not granted a key while a writer of
//     that key that reached the same node before it, in the same stretch
//     as active, still waits there (in the engine's queue, unanswered);
//     a reader whose place was kept from the last active (a ghost, FIFO
//     across failover) is not held to it.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// acquireKeys is every key of the acquire outstanding, the line's key
// first.
func (c *simClient) acquireKeys() []string {
	if len(c.keys) > 0 && c.keys[0] == c.key {
		return c.keys
	}
	return []string{c.key}
}

// grantWords reads the words of a grant: its tokens, then its place (0:
// none), then words the client skips.
func grantWords(fields []string) (toks []uint64, place int, err error) {
	i := 0
	for ; i < len(fields); i++ {
		tok, err := strconv.ParseUint(fields[i], 10, 64)
		if err != nil {
			break
		}
		toks = append(toks, tok)
	}
	if len(toks) == 0 {
		return nil, 0, fmt.Errorf("no token")
	}
	for _, f := range fields[i:] {
		name, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, 0, fmt.Errorf("word %q after the tokens", f)
		}
		if name == "place" {
			if place, err = strconv.Atoi(v); err != nil || place < 1 {
				return nil, 0, fmt.Errorf("place %q", v)
			}
		}
	}
	return toks, place, nil
}

// checkExclusion: c was granted key with tok, as a reader when c.shared.
// No other client may hold it beside, by mode and limit.
func (c *simClient) checkExclusion(key string, tok uint64) {
	s := c.s
	var writers, readers []string
	for _, o := range s.clients {
		// A lock granted before a wipe was lost with it.
		if h, ok := o.held[key]; ok && o != c && h.until > s.now && h.token != tok && s.grantWipes[h.token] == s.grantWipes[tok] {
			who := o.name() + " (token " + strconv.FormatUint(h.token, 10) + ")"
			if h.shared {
				readers = append(readers, who)
			} else {
				writers = append(writers, who)
			}
		}
	}
	limit := s.limitOf(key)
	switch {
	case c.shared && len(writers) > 0:
		s.fail("mutual exclusion: %s granted %s as a reader (token %d) while the writers %s hold it", c.name(), key, tok, strings.Join(writers, ", "))
	case !c.shared && len(readers) > 0:
		s.fail("mutual exclusion: %s granted %s as a writer (token %d) while the readers %s hold it", c.name(), key, tok, strings.Join(readers, ", "))
	case !c.shared && len(writers) >= limit:
		s.fail("mutual exclusion: %s granted %s (token %d, limit %d) while %s hold it", c.name(), key, tok, limit, strings.Join(writers, ", "))
	}
}

// checkPlace checks the place of the grant c was answered: a
// semaphore's, one of its places that no other holder has.
func (c *simClient) checkPlace(place int) {
	s := c.s
	limit := s.limitOf(c.key)
	if c.shared || len(c.acquireKeys()) > 1 || limit <= 1 {
		if place != 0 {
			s.fail("%s was granted %v with place=%d: only a semaphore's grant has a place", c.name(), c.acquireKeys(), place)
		}
		return
	}
	if place < 1 || place > limit {
		s.fail("%s was granted the semaphore %s (limit %d) with place %d", c.name(), c.key, limit, place)
		return
	}
	if s.faulty {
		return
	}
	for _, o := range s.clients {
		if h, ok := o.held[c.key]; ok && o != c && h.until > s.now && h.place == place && s.grantWipes[h.token] == s.wipes {
			s.fail("%s was granted the semaphore %s with place %d, which %s (token %d) holds", c.name(), c.key, place, o.name(), h.token)
		}
	}
}

// rwWait is an acquire that reached an active node and is not answered
// yet, for writer fairness.
type rwWait struct {
	conn   *simConn
	id     string
	keys   []string
	shared bool
	seq    uint64        // the order it reached the node in
	until  time.Duration // its wait ends; 0: never
	// again: re-sent with its id, it found its grant held when it came
	again bool
}

// rwNode is what writer fairness keeps of a node's stretch as active.
type rwNode struct {
	gen   int
	waits map[*simConn]*rwWait
	first map[string]uint64 // by id: when an acquire with it first came
}

func (s *sim) rwOf(n *simNode) *rwNode {
	if s.rwNodes == nil {
		s.rwNodes = make(map[int]*rwNode)
	}
	r := s.rwNodes[n.idx]
	if r == nil || r.gen != n.gen {
		r = &rwNode{gen: n.gen, waits: make(map[*simConn]*rwWait), first: make(map[string]uint64)}
		s.rwNodes[n.idx] = r
	}
	return r
}

// rwForget: n no longer serves, or starts anew: its stretch ends.
func (s *sim) rwForget(n *simNode) { delete(s.rwNodes, n.idx) }

// rwArrived: an acquire reached n on client connection c.
func (s *sim) rwArrived(n *simNode, c *simConn, req proto.Request) {
	if n.core.Role() != Active {
		return
	}
	r := s.rwOf(n)
	s.rwSeq++
	w := &rwWait{conn: c, id: req.ID, keys: append([]string{req.Key}, req.Keys...), shared: req.Mode == proto.ModeShared, seq: s.rwSeq}
	w.again = req.ID != "" && n.holdsID(req.Key, req.ID)
	if req.Wait > 0 {
		w.until = s.now + req.Wait
	}
	r.waits[c] = w
	if _, seen := r.first[req.ID]; !seen && req.ID != "" {
		r.first[req.ID] = s.rwSeq
	}
}

// rwAnswered: n answers the acquire outstanding on client connection c.
func (s *sim) rwAnswered(n *simNode, c *simConn, outcome Outcome) {
	r := s.rwNodes[n.idx]
	if r == nil || r.gen != n.gen {
		return
	}
	w := r.waits[c]
	if w == nil {
		return
	}
	delete(r.waits, c)
	if outcome != Granted || !w.shared || s.faulty {
		return
	}
	arrived := w.seq
	if first, ok := r.first[w.id]; ok {
		arrived = first
	}
	if e := s.fifoEpoch(n); e != nil && e.ws[w.id] != nil {
		return // its place was kept from the last active
	}
	if w.again {
		return // its grant was made before it came (its answer lost): answered again
	}
	for _, x := range r.waits {
		if x.shared || x.seq >= arrived || x.until != 0 && x.until <= s.now+time.Millisecond {
			continue
		}
		for _, k := range w.keys {
			if slices.Contains(x.keys, k) && n.queued(k, x.conn.srvID) && (x.id == "" || !n.holdsID(k, x.id)) {
				hs, ws, _ := n.core.Engine().InspectN(n.clock(), k, 8)
				s.fail("writer fairness: node %d granted %s to the reader %s while the writer %s, which reached it first, still waits (holders %+v, waiters %+v)",
					n.idx, k, w.id, x.id, hs, ws)
				return
			}
		}
	}
}

// rwClosed: the server side of client connection c closed on n.
func (s *sim) rwClosed(n *simNode, c *simConn) {
	if r := s.rwNodes[n.idx]; r != nil {
		delete(r.waits, c)
	}
}

// queued reports whether the acquire waiting on connection id is in
// key's queue on n.
func (n *simNode) queued(key string, id ConnID) bool {
	_, ws, _ := n.core.Engine().InspectN(n.clock(), key, 1<<20)
	return slices.ContainsFunc(ws, func(w engine.WaiterInfo) bool { return w.Waiter.Conn == uint64(id) })
}
