package core

// The simulator's workload and the invariants it checks.
//
// Always, whatever the faults:
//   - no two grants carry the same token;
//   - a node never issues a token at or below one it issued before, across
//     its restarts too;
//   - a grant exceeds every token granted before it anywhere, unless
//     another node served as active at some moment since this node became
//     active (a split brain, which docs/cluster.md allows: then the tokens of the
//     two sides interleave, but the later side's are larger once they meet);
//   - every lock a standby applied is held under the same token when it
//     becomes active after the active crashed (unless its lease ran out,
//     or it synced from another active since);
//   - heartbeat answers and replication records are well formed.
//
// Until a fault that may lose locks happens (exempt, by one of the rules
// below, each a loss docs/cluster.md admits in the same words: a
// partition, a crash or freeze of the active under asynchronous
// replication or while degraded, a standby in sync crashing without a
// data directory, a node leaving without a handoff; a freeze under
// synchronous replication, a restart that takes the role back, a cold
// start, SIGINT, lockctl handoff and, with data directories, crashes and
// restarts exempt nothing):
//   - no two clients hold the same key at once (mutual exclusion), unless
//     both are readers or it is a semaphore's, within its limit; a set is
//     answered all or none; a reader is not granted past a writer queued
//     before it (sim_rw_test.go);
//   - a renewal or a release of a lock whose lease the client still
//     counts running is not answered notheld: nothing a client was told
//     is lost (checkLost);
//   - waiters that a new active was told of, and that come back to it
//     within the grace, are granted in their order (FIFO across failover
//     and handoff, sim_fifo_test.go).
// And from every cold start (every node starting together) until it
// settles: one promotion, no demotion, never two actives (checkCold).
// Nor is mutual exclusion checked between a grant and one made after
// every node that held the lock state lost its memory (see wipeCheck):
// without a data directory those locks are gone, and the grants made
// after start over. Token order is still checked across such a wipe:
// tokens grow with the wall clock, not with the state.
//
// At the end of the quiet period (everything healed, restarted, idle):
//   - exactly one node is active and every other follows it, synced, with
//     the same locks; none is joining or handing off;
//   - without handoffs by command, the active is the first node of --peers
//     (take-back by priority);
//   - no client still waits for an answer;
//   - the watcher is subscribed on the active and its last state of the
//     key is the active's.
//
// And throughout: an X is answered after its acquire, "ok" only when
// that acquire was answered T; every watch line reads as a queue.

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// heldLock is a lock a client believes it holds: from the grant's arrival
// until its release is sent, or until the lease, counted from when the
// acquire or the last renewal answered ok was sent (the server's lease
// began later), runs out.
type heldLock struct {
	token uint64
	until time.Duration
	lease time.Duration
	// keep: the client keeps the lock until then, renewing it whenever
	// less than half its lease is left, as a long job's Hold does.
	keep time.Duration
	// releasing: a release was sent and is to be sent again where the
	// role is (it was redirected, or its answer lost with the
	// connection); valid is the lease the client counted when it first
	// sent it: a release sent before then must be answered ok.
	releasing bool
	valid     time.Duration
	// shared: held as a reader (mode=shared); set: every key of the set
	// it was granted with, in their order (nil: taken alone); lost: a
	// key of its set is gone, so the client releases it at once; place:
	// a semaphore holder's place (0 for a lock, a reader, a set).
	shared bool
	set    []string
	lost   bool
	place  int
}

// simClient acquires and releases a few keys on the node it believes
// active, following M answers, as the official client does.
type simClient struct {
	s      *sim
	idx    int
	conn   *simConn
	target int
	busy   bool
	req    string // the request outstanding
	op     byte
	key    string
	// keys: every key of the acquire outstanding, the line's key first
	// (more than one: a set); shared: it asks them as a reader.
	keys    []string
	shared  bool
	lease   time.Duration
	sentAt  time.Duration
	held    map[string]heldLock
	epoch   int  // bumped whenever the outstanding request is settled
	dialing bool // a connect is under way
	id      string
	nextID  int
	resend  string // an acquire to send again, with its id, once connected
	// withdrawing: an X sent for the outstanding acquire (id), on conn
	// xConn; acqAnswer is the kind the acquire was answered with since
	// (0: not yet). The X must be answered after the acquire, and "ok"
	// only when that answer was T.
	withdrawing bool
	xConn       *simConn
	xID, xKey   string
	acqAnswer   proto.Op
	// The release or renewal outstanding: its token, and the lease the
	// client counted when it was sent (see checkLost).
	opToken uint64
	opValid time.Duration
	probing bool // an S probe is on its way
}

func (c *simClient) name() string { return "client " + strconv.Itoa(c.idx) }

// act picks and sends the next request, connecting first if needed.
func (c *simClient) act() {
	s := c.s
	if c.busy {
		return
	}
	if s.now >= s.cfg.length && len(c.held) == 0 {
		return // the quiet period: nothing more to do
	}
	if c.conn == nil || !c.conn.open || c.conn.closed[0] {
		c.connect()
		return
	}
	if c.resend != "" {
		// An acquire whose answer was lost: sent again with its id, as
		// the official client does; it must not grant twice.
		line := c.resend
		c.resend = ""
		c.send('A', c.key, line)
		return
	}
	keys := slices.Sorted(maps.Keys(c.held))
	var free []string // the locks the client may release now
	lost := ""        // a key of a set the client lost part of
	for _, key := range keys {
		h := c.held[key]
		switch {
		case h.lost && lost == "":
			lost = key
		case h.releasing || h.keep <= s.now || s.now >= s.cfg.length:
			free = append(free, key)
		case h.until <= s.now:
			// Its lease ran out before the client renewed it: the client
			// knows the lock is gone, and with it its set.
			delete(c.held, key)
			c.loseSet(key, h)
		case h.until-s.now < h.lease/2:
			// A lock the client keeps: renewed before its lease runs low.
			c.opToken, c.opValid, c.lease = h.token, h.until, h.lease
			c.send('N', key, "N "+key+" "+strconv.FormatUint(h.token, 10)+" "+proto.FormatSeconds(h.lease))
			return
		}
	}
	if lost != "" {
		// A set is all or none: the client gives up the rest of one it
		// lost a key of.
		c.release(lost)
		return
	}
	switch {
	case s.rng.IntN(20) == 0:
		// A key listing, scanned a slice at a time between the others'
		// requests.
		c.send('K', "k*", "K k*")
	case len(free) > 0 && (s.now >= s.cfg.length || s.rng.IntN(10) < 6):
		c.release(free[s.rng.IntN(len(free))])
	case len(free) == 0 && len(keys) > 0 && s.now >= s.cfg.length:
		c.later() // kept locks end with the workload
	default:
		key := "k" + strconv.Itoa(s.rng.IntN(s.cfg.keys))
		if _, ok := c.held[key]; ok || s.cfg.holdFrom > 0 && s.now >= s.cfg.holdFrom {
			c.later()
			return
		}
		c.lease = 500*time.Millisecond + time.Duration(s.rng.IntN(2500))*time.Millisecond
		wait := "0"
		if s.rng.IntN(5) > 0 {
			wait = proto.FormatSeconds(100*time.Millisecond + time.Duration(s.rng.IntN(1900))*time.Millisecond)
		}
		c.nextID++
		c.id = "c" + strconv.Itoa(c.idx) + "-" + strconv.Itoa(c.nextID)
		c.keys, c.shared = c.pickKeys(key), false
		line := "A " + key + " " + proto.FormatSeconds(c.lease) + " " + wait
		for _, k := range c.keys[1:] {
			line += " key=" + k
		}
		if s.rng.IntN(5) == 0 && (len(c.keys) > 1 || s.limitOf(key) == 1) {
			// A reader (a semaphore's places are all alike: never one).
			c.shared = true
			line += " mode=shared"
		}
		if l := s.limitOf(key); l > 1 && len(c.keys) == 1 {
			line += " limit=" + strconv.Itoa(l)
		}
		c.send('A', key, line+" id="+c.id)
		if s.rng.IntN(6) == 0 {
			// The caller gives up after a while: withdraw the acquire.
			epoch, conn, id := c.epoch, c.conn, c.id
			c.s.at(time.Duration(1+s.rng.IntN(400))*time.Millisecond, func() { c.withdraw(epoch, conn, id) })
		}
	}
}

// pickKeys is the keys of the next acquire, whose line's key is key:
// key alone, or now and then a set of 2 or 3 keys the client holds none
// of (a semaphore's key is never one of a set: a set's keys share one
// limit).
func (c *simClient) pickKeys(key string) []string {
	s := c.s
	keys := []string{key}
	if s.rng.IntN(6) != 0 || s.limitOf(key) > 1 {
		return keys
	}
	want := 2 + s.rng.IntN(2)
	for _, i := range s.rng.Perm(s.cfg.keys) {
		k := "k" + strconv.Itoa(i)
		if _, held := c.held[k]; len(keys) < want && k != key && !held && s.limitOf(k) == 1 {
			keys = append(keys, k)
		}
	}
	return keys
}

// release sends the release of the lock on key.
func (c *simClient) release(key string) {
	h := c.held[key]
	c.opToken, c.opValid = h.token, h.until
	if h.releasing {
		c.opValid = h.valid
	}
	c.send('R', key, "R "+key+" "+strconv.FormatUint(h.token, 10))
	// The client stops relying on the lock as it sends the release.
	delete(c.held, key)
}

// loseSet: the client lost the lock h on key, one of a set: it gives up
// the set's other keys, which it releases at once.
func (c *simClient) loseSet(key string, h heldLock) {
	for _, k := range h.set {
		if o, ok := c.held[k]; ok && k != key && slices.Equal(o.set, h.set) && !o.releasing {
			o.lost = true
			c.held[k] = o
		}
	}
}

// withdraw sends X for the acquire id if it is still outstanding on conn.
func (c *simClient) withdraw(epoch int, conn *simConn, id string) {
	if c.epoch != epoch || !c.busy || c.op != 'A' || c.conn != conn || c.withdrawing || !conn.open || conn.closed[0] {
		return
	}
	c.withdrawing, c.xConn, c.xID, c.xKey, c.acqAnswer = true, conn, id, c.key, 0
	line := "X " + c.key + " " + id
	c.s.logf("%s -> node %d: %s", c.name(), conn.to, line)
	conn.toServer([]byte(line + "\n"))
}

// withdrawn checks the answer to an X.
func (c *simClient) withdrawn(a proto.Answer, line []byte) {
	s := c.s
	c.withdrawing = false
	switch {
	case len(a.Fields) != 1:
		s.fail("%s: answer %q to X %s", c.name(), line, c.xID)
	case c.acqAnswer == 0:
		s.fail("%s: X %s answered %q before its acquire", c.name(), c.xID, line)
	case a.Fields[0] == proto.WordOK && c.acqAnswer != proto.KindTimeout:
		s.fail("%s: X %s answered ok, but its acquire was answered %s", c.name(), c.xID, c.acqAnswer)
	}
}

func (c *simClient) later() {
	c.s.at(time.Duration(1+c.s.rng.IntN(300))*time.Millisecond, c.act)
}

func (c *simClient) connect() {
	s := c.s
	if c.dialing {
		return
	}
	c.dialing = true
	if c.target < 0 || c.target >= len(s.nodes) {
		c.target = s.rng.IntN(len(s.nodes))
	}
	target := c.target
	s.dial(-1-c.idx, target, kindClient, func(conn *simConn, err error) {
		c.dialing = false
		if err != nil {
			c.target = s.rng.IntN(len(s.nodes))
			c.later()
			return
		}
		c.conn = conn
		conn.onLine = func(line []byte) { c.answer(conn, line) }
		conn.onClose = func(string) { c.dropped(conn) }
		c.act()
	})
}

func (c *simClient) send(op byte, key, line string) {
	c.busy, c.op, c.key, c.req, c.sentAt = true, op, key, line, c.s.now
	c.epoch++
	epoch := c.epoch
	conn := c.conn
	c.s.logf("%s -> node %d: %s", c.name(), conn.to, line)
	conn.toServer([]byte(line + "\n"))
	// A connection silent for a failure timeout is probed with S, and
	// given up on when the probe is not answered within another: a
	// frozen or cut-off node is left within two, as the official client
	// leaves it; a waiting acquire on a live node stays.
	c.s.at(c.s.cfg.failure, func() { c.probe(epoch, conn) })
	// A node that neither answers nor closes (frozen, cut off) is given
	// up on, as the official client's request deadline would.
	c.s.at(5*time.Second, func() {
		if c.epoch == epoch && c.busy && c.conn == conn {
			c.s.logf("%s gives up on %s after 5s", c.name(), line)
			conn.close(0, "request timeout")
			c.dropped(conn)
		}
	})
}

// probe checks, while request epoch is outstanding on conn, that conn
// has said something within the failure timeout: else it sends S, and
// gives up on conn when nothing came back for another failure timeout.
func (c *simClient) probe(epoch int, conn *simConn) {
	s := c.s
	if c.epoch != epoch || !c.busy || c.conn != conn || !conn.open || conn.closed[0] {
		return
	}
	switch silent := s.now - conn.lastHeard; {
	case silent >= 2*s.cfg.failure:
		s.logf("%s gives up on its silent connection to node %d", c.name(), conn.to)
		conn.close(0, "silent")
		c.dropped(conn)
		return
	case silent >= s.cfg.failure && !c.probing:
		c.probing = true
		conn.toServer([]byte("S -\n"))
	}
	s.at(s.cfg.failure/2, func() { c.probe(epoch, conn) })
}

func (c *simClient) dropped(conn *simConn) {
	if c.conn != conn {
		return
	}
	c.s.logf("%s lost its connection to node %d", c.name(), conn.to)
	c.conn = nil
	c.withdrawing = false
	if c.busy && c.op == 'A' && c.s.now-c.sentAt < 4*time.Second && c.s.rng.IntN(4) > 0 {
		c.resend = c.req
	}
	if c.busy && c.op == 'R' && c.s.rng.IntN(2) == 0 {
		// The official client sends a release again on another
		// connection when its answer is lost: the node may have applied
		// it already, and must still say ok.
		c.held[c.key] = heldLock{token: c.opToken, releasing: true, valid: c.opValid}
	}
	c.busy = false
	c.epoch++
	c.target = c.s.rng.IntN(len(c.s.nodes))
	c.later()
}

func (c *simClient) answer(conn *simConn, line []byte) {
	s := c.s
	if conn != c.conn {
		return
	}
	a, err := proto.ParseAnswer(line)
	if err != nil {
		s.fail("%s: unreadable answer %q", c.name(), line)
		return
	}
	if a.Kind == proto.OpStatus {
		c.probing = false // the probe's answer: the node runs
		return
	}
	s.logf("%s <- node %d: %s", c.name(), conn.to, strings.TrimSpace(string(line)))
	if c.withdrawing && conn == c.xConn {
		if a.Kind == proto.OpWithdraw && a.Key == c.xKey {
			c.withdrawn(a, line)
			return
		}
		if a.Kind == proto.KindMoved && a.Key == c.xKey && c.acqAnswer != 0 {
			// The X's answer, after its acquire's: the node gave the
			// role up in between (it thawed and yielded, say). The
			// acquire is settled; there is nothing left to withdraw.
			c.withdrawing = false
			return
		}
		if c.busy && c.op == 'A' && c.id == c.xID && a.Key == c.key {
			c.acqAnswer = a.Kind // the withdrawn acquire's own answer
		}
		if c.acqAnswer != 0 && a.Kind == proto.KindMoved && a.Key == c.xKey && !(c.busy && c.op == 'A' && c.id == c.xID) {
			// The X itself redirected after its acquire was answered
			// (a parked X, replayed as M once the node gave the role
			// up): answers keep their order, so it comes before the
			// answer of any request sent after it.
			c.withdrawing = false
			return
		}
	}
	if !c.busy || a.Key != c.key {
		s.fail("%s: answer %q matches no request (outstanding %q)", c.name(), strings.TrimSpace(string(line)), c.req)
		return
	}
	c.busy = false
	c.epoch++
	switch a.Kind {
	case proto.OpAcquire:
		keys := c.acquireKeys()
		toks, place, err := grantWords(a.Fields)
		if err != nil || len(toks) != len(keys) {
			// All or none: a set is answered once, with a token for
			// every key.
			s.fail("all or none: %s asked %v and was answered %q", c.name(), keys, strings.TrimSpace(string(line)))
			return
		}
		c.checkPlace(place)
		until := c.sentAt + c.lease
		if until > s.now && s.nodes[c.target].state == nodeUp && !s.faulty {
			for i, k := range keys {
				c.checkExclusion(k, toks[i])
			}
		}
		if until > s.now {
			h := heldLock{token: toks[0], until: until, lease: c.lease, shared: c.shared, place: place}
			if s.rng.IntN(2) == 0 {
				h.keep = s.now + time.Duration(500+s.rng.IntN(3500))*time.Millisecond
			}
			if s.cfg.holdFrom > 0 {
				h.keep = s.cfg.length
			}
			if len(keys) > 1 {
				h.set = keys
			}
			for i, k := range keys {
				h.token = toks[i]
				c.held[k] = h
			}
		}
	case proto.OpRenew, proto.OpRelease:
		word := ""
		if len(a.Fields) == 1 {
			word = a.Fields[0]
		}
		switch {
		case word == proto.WordOK && a.Kind == proto.OpRenew:
			if h, ok := c.held[c.key]; ok && h.token == c.opToken && !h.releasing {
				h.until = max(h.until, c.sentAt+c.lease)
				c.held[c.key] = h
			}
		case word == proto.WordNotHeld:
			c.checkLost(a.Kind)
			if h, ok := c.held[c.key]; ok && h.token == c.opToken {
				delete(c.held, c.key)
				c.loseSet(c.key, h)
			}
		}
	case proto.OpKeys:
		total, err := strconv.Atoi(a.Fields[0])
		listed := a.Fields[1:]
		if err != nil || total < len(listed) || !slices.IsSorted(listed) || len(listed) > s.cfg.keys {
			s.fail("%s: key listing %q is not TOTAL and sorted keys", c.name(), strings.TrimSpace(string(line)))
		}
		for _, k := range listed {
			if !proto.MatchKeys(c.key, k) {
				s.fail("%s: key listing %q has %s, which %s does not match", c.name(), strings.TrimSpace(string(line)), k, c.key)
			}
		}
	case proto.KindMoved:
		c.target = s.byAddr(a.Fields[0])
		conn.close(0, "moved")
		c.conn = nil
		c.withdrawing = false
		switch c.op {
		case 'R':
			// Re-send the release where the role is.
			c.held[c.key] = heldLock{token: c.opToken, releasing: true, valid: c.opValid}
		case 'A':
			// Ask again where the role is, with the same id, as the
			// official client does: a waiter moved by a handoff, or
			// redirected by a standby, takes back the place the new
			// active kept for it.
			c.resend = c.req
		}
	}
	c.later()
}

// checkLost runs when a release or a renewal is answered notheld. A
// lock the client was told it holds, whose lease (as the client counts it,
// from when it sent the acquire or the last renewal answered ok) has not
// run out, must still be held, or have been released by this very token:
// a renewal that finds it gone, or a release re-sent after the first was
// applied that is told notheld, is an answer lost, unless a fault that
// docs/cluster.md says may lose answers happened (see exempt).
func (c *simClient) checkLost(op proto.Op) {
	s := c.s
	if s.faulty || c.opValid <= s.now+time.Millisecond || s.grantWipes[c.opToken] != s.wipes {
		return
	}
	what := map[proto.Op]string{proto.OpRenew: "renewal", proto.OpRelease: "release"}[op]
	s.fail("lost lock: %s's %s of %s (token %d) answered notheld while its lease runs %.4fs more", c.name(), what, c.key, c.opToken, (c.opValid - s.now).Seconds())
}

// checkSend checks that what a Send to a client says (op, key, outcome)
// is what its line says: the shell counts from the former and the client
// reads the latter.
func (s *sim) checkSend(n *simNode, snd Send) {
	if snd.Outcome == NoOutcome {
		return
	}
	line := snd.Line
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i+1]
	}
	a, err := proto.ParseAnswer(line)
	if err != nil {
		s.fail("node %d sent %q, which is no answer: %v", n.idx, snd.Line, err)
		return
	}
	kind := map[Outcome]proto.Op{Granted: proto.OpAcquire, TimedOut: proto.KindTimeout, Moved: proto.KindMoved, Refused: proto.KindError}[snd.Outcome]
	if kind == 0 {
		kind = snd.Op
	}
	ok := a.Kind == kind && a.Key == snd.Key
	switch snd.Outcome {
	case Granted, TimedOut:
		ok = ok && snd.Op == proto.OpAcquire
	case NotHeld, OK:
		if snd.Op == proto.OpRelease || snd.Op == proto.OpRenew {
			word := proto.WordOK
			if snd.Outcome == NotHeld {
				word = proto.WordNotHeld
			}
			ok = ok && len(a.Fields) == 1 && a.Fields[0] == word
		}
	case Refused:
		ok = ok && a.ReqOp() == snd.Op
	}
	if !ok {
		s.fail("node %d sent %q as op %q key %q outcome %d: the line says otherwise", n.idx, snd.Line, snd.Op, snd.Key, snd.Outcome)
	}
}

func (s *sim) checkOutgoing(n *simNode, c *simConn, line []byte) {
	if c.kind != kindClient || len(line) < 2 || line[0] != 'A' || line[1] != ' ' {
		return
	}
	a, err := proto.ParseAnswer(line)
	if err != nil {
		return
	}
	toks, _, err := grantWords(a.Fields)
	if err != nil {
		return
	}
	// The acquire this grant answers: its id and keys, when the client
	// is ours.
	id, keys := "", []string{a.Key}
	if ci := -1 - c.from; ci >= 0 && ci < len(s.clients) {
		id = s.clients[ci].id
		if ks := s.clients[ci].acquireKeys(); len(ks) == len(toks) && ks[0] == a.Key {
			keys = ks
		}
	}
	for i, tok := range toks {
		key := ""
		if i < len(keys) {
			key = keys[i]
		}
		s.checkGrant(n, key, tok, id)
	}
}

// checkGrant checks the token tok that n answered a client's acquire
// with id of key ("" when unknown) with.
func (s *sim) checkGrant(n *simNode, key string, tok uint64, id string) {
	who := n.addr + " (node " + strconv.Itoa(n.idx) + ")"
	if prev, dup := s.grants[tok]; dup {
		if id != "" && s.grantIDs[tok] == id {
			// The same acquire re-sent with its id: its grant, answered
			// again. Exactly once.
			return
		}
		s.fail("token %d granted twice: by %s and by %s", tok, prev, who)
		return
	}
	// Exactly once: an acquire re-sent with its id while its first grant
	// still holds the key must get that grant again, not a second place.
	if id != "" && key != "" {
		for prevTok, prevID := range s.grantIDs {
			if prevID == id && prevTok != tok && n.holds(key, prevTok) {
				s.fail("ghost grant: %s granted %s token %d to the acquire %s, whose grant %d still holds it", who, key, tok, id, prevTok)
			}
		}
	}
	s.grants[tok] = who
	s.grantIDs[tok] = id
	s.grantAt[tok] = s.now
	s.grantWipes[tok] = s.wipes
}

// The rules by which the checker stops checking mutual exclusion (and
// FIFO across failover) for the rest of a run: each is a loss
// docs/cluster.md states, and names the fault that may cause it.
const (
	ruleAsync         = "a crash of the active can lose the last answers under asynchronous replication"
	ruleDegraded      = "a crash while degraded may lose the last answers"
	rulePartition     = "mutual exclusion is not guaranteed across a partition"
	ruleMemoryStandby = "a standby in sync that stops without a data directory loses what it acknowledged"
	ruleLeave         = "a node that stops without handing off takes what only it holds"
	ruleUnsettled     = "a node whose handoff does not settle in time stops as if it crashed"
	ruleUnheard       = "an active that runs again and hears none of the nodes that took over serves as across a partition"
)

// exempt stops checking mutual exclusion from now on, by rule; what
// says what happened, for the trace.
func (s *sim) exempt(rule, what string) {
	if rule == s.strict {
		s.logf("not exempt, checked without the rule: %s (%s)", rule, what)
		return
	}
	s.logf("exempt from mutual exclusion from now on: %s (%s)", rule, what)
	s.faulty = true
	if !slices.Contains(s.rules, rule) {
		s.rules = append(s.rules, rule)
	}
}

// wipeCheck runs as n exits (crashes, vanishes, stops after SIGINT): when
// no node that held the lock state is left, the state is wiped. A node
// holds it when its incarnation synced or served as active (Synced), and
// keeps holding it, frozen or cut off, until it exits: a node that
// restarted holds nothing until it syncs again, and a node that synced
// once is counted even if it fell behind since, so a wipe is declared
// only when truly no running process has any of it.
func (s *sim) wipeCheck(n *simNode) {
	if n.core == nil || !n.core.Synced() {
		return // n held nothing: it wipes nothing
	}
	if n.disk != nil {
		return // its data directory holds the state: nothing is wiped
	}
	for _, m := range s.nodes {
		if m != n && m.state != nodeCrashed && m.core.Synced() {
			return
		}
	}
	s.wipes++
	s.logf("every node that held the lock state lost it: mutual exclusion starts over (wipe %d)", s.wipes)
}

// checkDecided runs after every event of n: a token n issued since the
// last look (answers may be written later, held for acknowledgements, so
// the order tokens are decided in is checked here, not on the wire).
func (s *sim) checkDecided(n *simNode) {
	tok := n.core.Engine().LastToken()
	who := n.addr + " (node " + strconv.Itoa(n.idx) + ")"
	last := s.lastToken[n.idx]
	if tok == last || tok == 0 {
		return
	}
	if tok < last {
		s.fail("%s issued token %d after its own %d", who, tok, last)
		return
	}
	s.lastToken[n.idx] = tok
	// Single lineage: larger than every token issued before anywhere,
	// unless another node served as active since this one became active.
	since := time.Duration(-1)
	for _, sp := range s.activity {
		if sp.node == n.idx && sp.till == 0 {
			since = sp.from
		}
	}
	for other, otherTok := range s.lastToken {
		if other == n.idx || otherTok <= tok {
			continue
		}
		overlap := false
		for _, sp := range s.activity {
			if sp.node == other && (sp.till == 0 || sp.till >= since) {
				overlap = true
			}
		}
		if !overlap {
			s.fail("token went backwards: %s issued %d below %d issued earlier by node %d, which was not active since %s became active", who, tok, otherTok, other, who)
			return
		}
	}
}

// checkAlways runs after every event.
func (s *sim) checkAlways() {
	for _, n := range s.nodes {
		if n.state != nodeUp || n.core == nil {
			continue
		}
		if n.core.Role() == Active && n.core.handoff != nil {
			s.fail("node %d is active with a handoff pending", n.idx)
		}
	}
}

// failoverTimer times the failover after a crash of the active.
type failoverTimer struct {
	from   time.Duration
	events int // s.events at the crash: another fault ends the timing
	of     int // the node that crashed
}

// timeFailover starts timing the failover n's crash begins, when n is
// the serving active and the others are up, synced, following it and
// reachable: the ordinary kill -9 of the active.
func (s *sim) timeFailover(n *simNode) {
	s.failover = nil
	if n.state != nodeUp || !n.core.serving() || len(s.blocked) > 0 || len(s.nodes) < 3 {
		return
	}
	for _, m := range s.nodes {
		if s.denied[m.idx] > s.now {
			return // its peers could not follow it
		}
		if m != n && (m.state != nodeUp || m.core.Role() != Standby || !m.core.Synced() || m.core.Active() != n.addr) {
			return
		}
		if m != n && !m.hearsAll(s) {
			// A peer that just started is not heard yet: it is waited
			// for (mustWait), and dials to it take their own time.
			return
		}
	}
	s.failover = &failoverTimer{from: s.now, events: s.events, of: n.idx}
}

// hearsAll reports whether n hears every other node that is up.
func (n *simNode) hearsAll(s *sim) bool {
	now := n.clock()
	for _, p := range n.core.peers {
		if m := s.nodes[s.byAddr(p.addr)]; m.state == nodeUp && !p.alive(now, n.core.cfg.FailureTimeout) {
			return false
		}
	}
	return true
}

// failoverBound is how long a crash of the active may leave the cluster
// without a serving node when every standby was up, synced and
// following it: the peers see the crash at once (connections refused),
// and one of them takes the role within a few heartbeats. Two standbys
// that each leave the role to the other would take a failure timeout.
func (s *sim) failoverBound() time.Duration { return s.cfg.failure * 3 / 4 }

// checkFailover fails a crash of the active that left no node serving
// for longer than failoverBound.
func (s *sim) checkFailover() {
	f := s.failover
	if f == nil {
		return
	}
	if s.events != f.events {
		s.failover = nil // another fault or a restart: the timing is off
		return
	}
	for _, m := range s.nodes {
		if m.state == nodeUp && m.core.serving() {
			s.failover = nil
			return
		}
	}
	if s.now-f.from > s.failoverBound() {
		s.fail("no node took the role within %s of the crash of the active node %d at %.4fs", s.failoverBound(), f.of, f.from.Seconds())
		s.failover = nil
	}
}

// checkQuiet runs once everything has healed and settled.
func (s *sim) checkQuiet() {
	var active []*simNode
	for _, n := range s.nodes {
		if n.state != nodeUp {
			s.fail("node %d is not up at the end", n.idx)
			return
		}
		switch n.core.Role() {
		case Active:
			active = append(active, n)
		case Joining, HandingOff:
			s.fail("node %d is still %s at the end", n.idx, n.core.Role())
		}
	}
	if len(active) != 1 {
		s.fail("%d actives at the end, want 1", len(active))
		return
	}
	a := active[0]
	want := holdersOf(a)
	for _, n := range s.nodes {
		if n == a {
			continue
		}
		if n.core.Active() != a.addr || !n.core.Synced() {
			s.fail("node %d follows %q (synced %v), not the active %s", n.idx, n.core.Active(), n.core.Synced(), a.addr)
			continue
		}
		soon := append(endingSoon(a), endingSoon(n)...)
		ending := func(h string) bool { return slices.Contains(soon, h) }
		if got := holdersOf(n); !slices.Equal(slices.DeleteFunc(got, ending), slices.DeleteFunc(slices.Clone(want), ending)) {
			s.fail("node %d holds %v, the active %v", n.idx, got, want)
		}
	}
	if !s.handoffsByCommand() && a.idx != 0 {
		s.fail("node %d is active at the end; the first of --peers (node 0) should have taken the role back", a.idx)
	}
	s.checkWatcher(a)
	for _, c := range s.clients {
		if c.busy && s.now-c.sentAt > 4*time.Second {
			s.fail("%s still waits for an answer to %q sent at %.4fs", c.name(), c.req, c.sentAt.Seconds())
		}
	}
}

func (s *sim) handoffsByCommand() bool {
	for _, l := range s.trace {
		if strings.Contains(l, "lockctl handoff") {
			return true
		}
	}
	return s.commandHandoffs > 0
}

func holdersOf(n *simNode) []string {
	var out []string
	for _, h := range n.core.Engine().Snapshot(n.clock()).Holders {
		out = append(out, h.Key+"="+strconv.FormatUint(h.Token, 10))
	}
	return out
}

// endingSoon lists n's holders whose lease ends within the next 300ms:
// under asynchronous replication the record of such a lease's expiry on
// the active may still be on its way to a standby, whose lease ends a
// little later than the active's.
func endingSoon(n *simNode) []string {
	var out []string
	for _, h := range n.core.Engine().Snapshot(n.clock()).Holders {
		if h.LeaseLeft < 300*time.Millisecond {
			out = append(out, h.Key+"="+strconv.FormatUint(h.Token, 10))
		}
	}
	return out
}

// holds reports whether token holds key on n now.
func (n *simNode) holds(key string, token uint64) bool {
	hs, _, _ := n.core.Engine().InspectN(n.clock(), key, 0)
	for _, h := range hs {
		if h.Token == token {
			return true
		}
	}
	return false
}

// The checker forgives a grant that overlaps an earlier one only when
// every node that held the lock state lost its memory between the two,
// and not when one that held it still runs, even frozen. Each case plays
// a calm three-node cluster until node 0 is active and both standbys are
// in sync, tells client 0 it holds k1, takes nodes down, and has a node
// tell client 1 it holds k1 too.
func TestSimCheckerForgivesOnlyAWipedState(t *testing.T) {
	cases := []struct {
		name   string
		faults func(s *sim)
		grant  int // the node that grants k1 to client 1
		wiped  bool
	}{
		{"a standby in sync survives", func(s *sim) {
			s.nodes[0].exit("crash")
			s.nodes[1].exit("crash")
		}, 2, false},
		{"a frozen standby in sync survives", func(s *sim) {
			s.nodes[2].state = nodeFrozen
			s.nodes[0].exit("crash")
			s.nodes[1].exit("crash")
			s.restart(s.nodes[0])
		}, 0, false},
		{"every node that held the state exits", func(s *sim) {
			s.nodes[2].state = nodeFrozen
			s.nodes[0].exit("stopped after SIGINT")
			s.nodes[1].exit("crash")
			s.nodes[2].exit("crash")
			s.restart(s.nodes[2])
		}, 2, true},
		{"the only node up restarted before the others exited", func(s *sim) {
			s.nodes[0].exit("crash")
			s.restart(s.nodes[0])
			s.nodes[1].exit("crash")
			s.nodes[2].exit("crash")
		}, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(1, simOptions{script: []simFault{}, cfg: func(c *simConfig) {
				c.nodes, c.clients, c.keys, c.faults = 3, 0, 2, 0
				c.calm, c.async = true, false
			}})
			s.runUntil(time.Second)
			if s.nodes[0].core.Role() != Active || !s.nodes[1].core.Synced() || !s.nodes[2].core.Synced() {
				t.Fatalf("the cluster did not settle:\n%s", s.report())
			}
			for i := range 2 {
				s.clients = append(s.clients, &simClient{s: s, idx: i, held: make(map[string]heldLock)})
			}
			s.tellGranted(s.nodes[0], s.clients[0], "k1", 1001)
			tc.faults(s)
			s.tellGranted(s.nodes[tc.grant], s.clients[1], "k1", 1002)
			if got := s.wipes == 1; got != tc.wiped {
				t.Errorf("wiped %v, want %v", got, tc.wiped)
			}
			if reported := len(s.failures) > 0; reported == tc.wiped {
				t.Errorf("violation reported %v, want %v:\n%s", reported, !tc.wiped, s.report())
			}
		})
	}
}

// tellGranted has n answer client c's acquire of key with token, as if
// the core had granted it, through the checker's hooks.
func (s *sim) tellGranted(n *simNode, c *simClient, key string, token uint64) {
	conn := &simConn{s: s, kind: kindClient, from: -1 - c.idx, to: n.idx, open: true}
	c.conn, c.target, c.busy, c.key, c.lease, c.sentAt = conn, n.idx, true, key, 5*time.Second, s.now
	line := []byte("A " + key + " " + strconv.FormatUint(token, 10) + "\n")
	s.checkOutgoing(n, conn, line)
	c.answer(conn, line)
}

// simWatcher watches k0 (L) on the node it believes active, as the
// official client does: it follows M, subscribes again after a drop, and
// probes a silent connection with S. Every L line must read as a queue;
// at the end of the quiet period it must be subscribed on the active and
// its last state must be the active's.
type simWatcher struct {
	s       *sim
	idx     int // its dialler number, after the clients'
	conn    *simConn
	target  int
	dialing bool
	last    proto.Queue
	lastAt  time.Duration // when last was read
	have    bool
	heard   time.Duration // when the connection last read a line
	probed  bool
	moves   int
}

const watchedKey = "k0"

func (w *simWatcher) connect() {
	s := w.s
	if w.dialing {
		return
	}
	w.dialing = true
	if w.target < 0 || w.target >= len(s.nodes) {
		w.target = s.rng.IntN(len(s.nodes))
	}
	s.dial(-1-w.idx, w.target, kindClient, func(conn *simConn, err error) {
		w.dialing = false
		if err != nil {
			w.target = s.rng.IntN(len(s.nodes))
			s.at(time.Duration(1+s.rng.IntN(300))*time.Millisecond, w.connect)
			return
		}
		w.conn, w.have, w.heard, w.probed = conn, false, s.now, false
		conn.onLine = func(line []byte) { w.line(conn, line) }
		conn.onClose = func(string) { w.dropped(conn) }
		s.logf("watcher -> node %d: L %s", conn.to, watchedKey)
		conn.toServer([]byte("L " + watchedKey + "\n"))
		s.at(time.Second, func() { w.probe(conn) })
	})
}

// probe sends S on a connection silent for a second, and drops it when
// nothing came back for two.
func (w *simWatcher) probe(conn *simConn) {
	s := w.s
	if w.conn != conn {
		return
	}
	switch {
	case s.now-w.heard >= 2*time.Second:
		s.logf("watcher gives up on its silent connection to node %d", conn.to)
		conn.close(0, "silent")
		w.dropped(conn)
		return
	case s.now-w.heard >= time.Second && !w.probed:
		w.probed = true
		conn.toServer([]byte("S -\n"))
	}
	s.at(500*time.Millisecond, func() { w.probe(conn) })
}

func (w *simWatcher) dropped(conn *simConn) {
	if w.conn != conn {
		return
	}
	w.conn, w.have = nil, false
	w.target = w.s.rng.IntN(len(w.s.nodes))
	w.s.at(time.Duration(1+w.s.rng.IntN(300))*time.Millisecond, w.connect)
}

func (w *simWatcher) line(conn *simConn, line []byte) {
	s := w.s
	if conn != w.conn {
		return
	}
	w.heard, w.probed = s.now, false
	a, err := proto.ParseAnswer(line)
	if err != nil {
		s.fail("watcher: unreadable line %q", line)
		return
	}
	switch a.Kind {
	case proto.OpStatus:
	case proto.OpWatch:
		q, err := proto.ParseQueue(a)
		if err != nil || a.Key != watchedKey {
			s.fail("watcher: L line %q: %v", strings.TrimSpace(string(line)), err)
			return
		}
		w.last, w.lastAt, w.have, w.moves = q, s.now, true, 0
	case proto.KindMoved:
		s.logf("watcher <- node %d: %s", conn.to, strings.TrimSpace(string(line)))
		w.moves++
		w.target = s.byAddr(a.Fields[0])
		conn.close(0, "moved")
		w.conn, w.have = nil, false
		pause := time.Duration(min(w.moves, 10)) * 20 * time.Millisecond
		s.at(pause, w.connect)
	default:
		s.fail("watcher: unexpected line %q", strings.TrimSpace(string(line)))
	}
}

// watchNewsLag bounds how long the news of a lease that ran out takes to
// reach the watcher: a tick, and the wire.
const watchNewsLag = 100 * time.Millisecond

// checkWatcher: at the end, the watch is on the active and shows its
// state of the key.
func (s *sim) checkWatcher(a *simNode) {
	w := s.watcher
	if w == nil {
		return
	}
	if w.conn == nil || w.conn.to != a.idx || !w.have {
		s.fail("watcher is not subscribed on the active node %d at the end (conn %v, state %v)", a.idx, w.conn != nil, w.have)
		return
	}
	q := a.core.queueOf(a.clock(), watchedKey)
	tokens := func(q proto.Queue) []uint64 {
		var out []uint64
		for _, h := range q.Holders {
			out = append(out, h.Token)
		}
		slices.Sort(out)
		return out
	}
	// A lease that ran out in the last moments: its news may still be
	// on its way (the core notices at its next tick, the line takes its
	// time on the wire). The line was rendered before it arrived (the
	// wire, a data directory's sync), so the lease it shows ended up to
	// that much before lastAt+LeaseLeft.
	for _, h := range w.last.Holders {
		if ends := w.lastAt + h.LeaseLeft; ends-watchNewsLag <= s.now && ends > s.now-watchNewsLag {
			return
		}
	}
	if q.Held != w.last.Held || !slices.Equal(tokens(q), tokens(w.last)) || q.Waiting != w.last.Waiting {
		s.fail("watcher's last state of %s is %+v, the active's %+v", watchedKey, w.last, q)
	}
}

// otherActive is a node other than n that is active, running or not
// (frozen, cut off), or -1.
func (s *sim) otherActive(n *simNode) int {
	for _, a := range s.activity {
		if a.node != n.idx && a.till == 0 {
			return a.node
		}
	}
	return -1
}

// heardAll reports whether n's core heard every peer since its pause
// began (the pause ended on fresh news, not on a failure timeout).
func (n *simNode) heardAll() bool {
	for _, p := range n.core.peers {
		if !p.news {
			return false
		}
	}
	return true
}
