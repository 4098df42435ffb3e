package client

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// maxAnswerLen bounds one answer line. The longest legal one is a K answer
// listing proto.MaxListKeys keys of proto.MaxKeyLen bytes.
const maxAnswerLen = 1 << 20

type connState uint8

const (
	stateDialing connState = iota // a dial attempt is under way
	stateUp                       // connected: requests may be sent
	stateDown                     // waiting to re-dial
)

// conn is one persistent connection slot to an address. Its run goroutine
// dials, reads answers and re-dials after a drop; its writeLoop goroutine
// writes queued requests, coalescing everything queued since its last
// write into one write.
type conn struct {
	c    *Client
	addr string

	// Guarded by c.mu: the view choose needs.
	state   connState
	gen     uint64 // successful dials so far; names the current connection
	lastErr error
	dialNow chan struct{} // cap 1: dial at once instead of after Redial

	wake chan struct{} // cap 1: there are bytes in wbuf

	// lastRead is when the connection last read a line (UnixNano): the
	// liveness check's evidence that the node is alive.
	lastRead atomic.Int64

	mu      sync.Mutex // guards what follows: the live connection and its requests
	nc      net.Conn
	wbuf    []byte
	seq     uint64
	pending map[pendingKey]*fifo
	spare   []*fifo
	// refs numbers the acquires sent here (proto's ref=R): an answer
	// that carries one goes to its acquire whatever was sent before it.
	refs uint64
	// noRef: the node refused a ref= (an older release): acquires go
	// without one here, matched by (op, key) in the order sent.
	noRef bool
	// watching are the watches subscribed (or subscribing) here, by key:
	// every L line of a key goes to its watch, and an M of a watched key
	// that answers no request moves the watch.
	watching map[string]*watchGroup
	// answered is the largest seq answered so far. An M answering a
	// request older than it came after the node had served a later one:
	// the node had taken the request in (queued it) rather than
	// redirecting it at once.
	answered uint64
	probes   int       // keep-alive requests outstanding
	probeAt  time.Time // when the oldest of them was sent (or one last came back)
	deadErr  error     // why the liveness check closed the connection
}

// pendingKey is what an answer echoes of its request.
type pendingKey struct {
	op  proto.Op
	key string
}

// fifo holds the outstanding requests of one (op, key) in send order.
type fifo struct {
	calls []*call
	head  int
}

// matchOps are the ops whose requests an M answer may answer, as
// proto's table of ops says: every op the client sends but S, which
// every node answers itself.
var matchOps = func() (ops []proto.Op) {
	for _, op := range proto.Ops() {
		if op.Redirected() {
			ops = append(ops, op)
		}
	}
	return ops
}()

// probeLabel is the label of the keep-alive S requests.
const probeLabel = proto.WordNone

func newConn(c *Client, addr string) *conn {
	return &conn{
		c:       c,
		addr:    addr,
		dialNow: make(chan struct{}, 1),
		wake:    make(chan struct{}, 1),
		pending: make(map[pendingKey]*fifo),
	}
}

// dialNowLocked cuts short the wait before the next dial. c.mu is held.
func (cn *conn) dialNowLocked() {
	if cn.state != stateDown {
		return
	}
	cn.state = stateDialing
	select {
	case cn.dialNow <- struct{}{}:
	default:
	}
}

func (cn *conn) closeNet() {
	cn.mu.Lock()
	if cn.nc != nil {
		cn.nc.Close()
	}
	cn.mu.Unlock()
}

// run owns the connection's life: dial, read until it drops, fail what
// was outstanding, wait Redial (or a call's demand), dial again.
func (cn *conn) run() {
	c := cn.c
	defer c.wg.Done()
	dropped := false
	for {
		nc, br, err := c.open(c.ctx, cn.addr)
		if err == nil {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				nc.Close()
				return
			}
			cn.gen++
			cn.state = stateUp
			cn.lastErr = nil
			c.everUp = true
			cn.lastRead.Store(time.Now().UnixNano())
			cn.mu.Lock()
			cn.nc = nc
			cn.deadErr = nil
			cn.probes = 0
			cn.mu.Unlock()
			c.notifyLocked()
			c.mu.Unlock()
			if dropped {
				c.log.Info("lockd connection restored", "addr", cn.addr)
			} else {
				c.log.Debug("lockd connection up", "addr", cn.addr)
			}
			err = cn.readLoop(br)
			nc.Close()
			dropped = true
			cn.mu.Lock()
			dead := cn.deadErr
			cn.mu.Unlock()
			switch {
			case c.ctx.Err() != nil:
				err = ErrClosed
			case dead != nil:
				err = dead
				c.log.Warn("lockd node stopped answering; connection dropped", "addr", cn.addr, "err", err)
			default:
				err = fmt.Errorf("connection to %s lost: %w", cn.addr, err)
				c.log.Info("lockd connection lost", "addr", cn.addr, "err", err)
			}
			cn.down(err)
		} else {
			if c.ctx.Err() != nil {
				err = ErrClosed
			} else {
				c.log.Debug("lockd dial failed", "addr", cn.addr, "err", err)
			}
			cn.down(err)
		}
		t := time.NewTimer(c.opts.Redial)
		select {
		case <-t.C:
		case <-cn.dialNow:
		case <-c.ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		if cn.state != stateDialing {
			cn.state = stateDialing
			c.notifyLocked()
		}
		select {
		case <-cn.dialNow:
		default:
		}
		c.mu.Unlock()
	}
}

// down marks the connection unusable first, so that choose skips it, then
// fails every request still outstanding on it with err.
func (cn *conn) down(err error) {
	c := cn.c
	c.mu.Lock()
	cn.state = stateDown
	cn.lastErr = err
	if err != ErrClosed {
		c.lastErr = err
	}
	if c.active == cn.addr && !c.upLocked(cn.addr) {
		// Calls go round the other nodes until one names the active
		// again, instead of waiting for this one to come back.
		c.active = ""
	}
	c.notifyLocked()
	c.mu.Unlock()

	cn.mu.Lock()
	cn.nc = nil
	pending := cn.pending
	cn.pending = make(map[pendingKey]*fifo)
	cn.wbuf = cn.wbuf[:0]
	watching := cn.watching
	cn.watching = nil
	cn.mu.Unlock()
	for _, g := range watching {
		g.lost(cn, "")
	}
	for _, q := range pending {
		for _, cl := range q.calls[q.head:] {
			if !cl.probe {
				cl.deliver(result{err: err})
			}
		}
	}
}

// send queues cl's request on the connection and registers it for its
// answer. The request and its registration happen under one lock, so the
// send order and the matching order are the same.
func (cn *conn) send(cl *call) error {
	cn.mu.Lock()
	if cn.nc == nil {
		cn.mu.Unlock()
		return fmt.Errorf("connection to %s is down", cn.addr)
	}
	cn.queueLocked(cl)
	cn.mu.Unlock()
	cn.wakeWriter()
	return nil
}

// queueLocked registers cl and appends its request to the write buffer.
func (cn *conn) queueLocked(cl *call) {
	cn.seq++
	cl.seq = cn.seq
	k := pendingKey{cl.req.op, cl.req.key}
	q := cn.pending[k]
	if q == nil {
		if n := len(cn.spare); n > 0 {
			q = cn.spare[n-1]
			cn.spare = cn.spare[:n-1]
		} else {
			q = new(fifo)
		}
		cn.pending[k] = q
	}
	if q.head > 0 && len(q.calls) == cap(q.calls) {
		n := copy(q.calls, q.calls[q.head:])
		clear(q.calls[n:])
		q.calls = q.calls[:n]
		q.head = 0
	}
	q.calls = append(q.calls, cl)
	if cl.req.op == proto.OpAcquire && !cn.noRef {
		cn.refs++
		cl.ref = cn.refs
	}
	cn.wbuf = cl.req.appendTo(cn.wbuf, cl.ref)
}

func (cn *conn) wakeWriter() {
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// probeLocked queues a keep-alive: S, which every node answers at once
// whatever its role, without touching any lock.
func (cn *conn) probeLocked(now time.Time) {
	cn.queueLocked(&call{req: request{op: proto.OpStatus, key: probeLabel}, probe: true})
	if cn.probes == 0 {
		cn.probeAt = now
	}
	cn.probes++
}

// probeAfter queues a keep-alive right behind a request just sent, so
// that the answer to the request, if it is an M, tells whether the node
// redirected it at once or had taken it in first (see answered).
func (cn *conn) probeAfter() {
	cn.mu.Lock()
	if cn.nc == nil {
		cn.mu.Unlock()
		return
	}
	cn.probeLocked(time.Now())
	cn.mu.Unlock()
	cn.wakeWriter()
}

// checkLive is the liveness check of one connection, run every tick: a
// connection that has read nothing for a while sends a keep-alive, and
// one whose keep-alive went unanswered while nothing at all was read for
// FailureTimeout is closed, which fails its calls over to the other
// connections as a drop does. A connection waiting on requests probes
// after a quarter of FailureTimeout of silence, an idle one after a
// whole one; a keep-alive gets at least half of FailureTimeout to come
// back.
func (cn *conn) checkLive(now time.Time) {
	ft := cn.c.opts.FailureTimeout
	silent := now.Sub(time.Unix(0, cn.lastRead.Load()))
	cn.mu.Lock()
	if cn.nc == nil || cn.deadErr != nil {
		cn.mu.Unlock()
		return
	}
	switch {
	case cn.probes > 0:
		if now.Sub(cn.probeAt) < ft/2 || silent < ft {
			cn.mu.Unlock()
			return
		}
		nc := cn.nc
		cn.deadErr = fmt.Errorf("%w: %s answered nothing, not even a keep-alive, for %s (the failure timeout is %s)",
			ErrNoAnswer, cn.addr, silent.Round(time.Millisecond), ft)
		cn.mu.Unlock()
		// The reader sees the close and fails what was outstanding.
		nc.Close()
		return
	case silent >= ft || (silent >= ft/4 && len(cn.pending) > 0):
		cn.probeLocked(now)
		cn.mu.Unlock()
		cn.wakeWriter()
		return
	}
	cn.mu.Unlock()
}

// acquiring reports whether an acquire of key is outstanding here.
func (cn *conn) acquiring(key string) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	q := cn.pending[pendingKey{proto.OpAcquire, key}]
	return q != nil && q.head < len(q.calls)
}

// popLocked takes the oldest outstanding request of (op, key).
func (cn *conn) popLocked(op proto.Op, key string) *call {
	k := pendingKey{op, key}
	q := cn.pending[k]
	if q == nil {
		return nil
	}
	cl := q.calls[q.head]
	q.calls[q.head] = nil
	q.head++
	if q.head == len(q.calls) {
		delete(cn.pending, k)
		q.calls = q.calls[:0]
		q.head = 0
		if len(cn.spare) < 64 {
			cn.spare = append(cn.spare, q)
		}
	}
	return cl
}

// popRefLocked takes the outstanding acquire of key sent with ref, or
// returns nil.
func (cn *conn) popRefLocked(key string, ref uint64) *call {
	q := cn.pending[pendingKey{proto.OpAcquire, key}]
	if q == nil {
		return nil
	}
	for i := q.head; i < len(q.calls); i++ {
		if q.calls[i].ref != ref {
			continue
		}
		if i == q.head {
			return cn.popLocked(proto.OpAcquire, key)
		}
		cl := q.calls[i]
		copy(q.calls[i:], q.calls[i+1:])
		q.calls[len(q.calls)-1] = nil
		q.calls = q.calls[:len(q.calls)-1]
		return cl
	}
	return nil
}

// refusedRef reports whether a is an older node's refusal of the ref=
// word, and if so stops sending refs on cn.
func (cn *conn) refusedRef(cl *call, a proto.Answer) bool {
	if cl.ref == 0 || a.Kind != proto.KindError || !strings.Contains(a.ErrorText(), `"ref=`) || !strings.Contains(a.ErrorText(), "want limit=N or id=ID after the wait") {
		return false
	}
	cn.mu.Lock()
	cn.noRef = true
	cn.mu.Unlock()
	cn.c.log.Warn("lockd node does not read ref= (an older release): acquires to it go without refs", "addr", cn.addr)
	return true
}

// answerRef is the ref an answer to an acquire carries, 0 when none.
func answerRef(a proto.Answer) uint64 {
	r := a.Ref()
	if r == "" {
		return 0
	}
	v, err := strconv.ParseUint(r, 36, 64)
	if err != nil {
		return 0
	}
	return v
}

// popAnyLocked takes the oldest outstanding request on key, whatever its
// op: the one an M answer belongs to.
func (cn *conn) popAnyLocked(key string) *call {
	var best *call
	for _, op := range matchOps {
		if q := cn.pending[pendingKey{op, key}]; q != nil {
			if cl := q.calls[q.head]; best == nil || cl.seq < best.seq {
				best = cl
			}
		}
	}
	if best == nil {
		return nil
	}
	return cn.popLocked(best.req.op, key)
}

// writeLoop writes what send queued. While one write is in flight, later
// requests pile up in wbuf and leave in the next single write.
func (cn *conn) writeLoop() {
	c := cn.c
	defer c.wg.Done()
	var buf []byte
	for {
		select {
		case <-cn.wake:
		case <-c.ctx.Done():
			return
		}
		// Let the callers that are ready to run queue their requests
		// too, so that under load one write carries many.
		runtime.Gosched()
		cn.mu.Lock()
		nc := cn.nc
		buf, cn.wbuf = cn.wbuf, buf[:0]
		cn.mu.Unlock()
		if nc == nil || len(buf) == 0 {
			continue
		}
		if _, err := nc.Write(buf); err != nil {
			// The read side sees the close and fails what is outstanding.
			nc.Close()
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// readLoop reads answers and hands each to its request until the
// connection fails.
func (cn *conn) readLoop(r *bufio.Reader) error {
	var long []byte
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
				if len(long) > maxAnswerLen {
					return fmt.Errorf("node sent an answer longer than %d bytes", maxAnswerLen)
				}
			}
			line = long
		}
		if err != nil {
			return err
		}
		cn.lastRead.Store(time.Now().UnixNano())
		a, err := proto.ParseAnswer(line)
		if err != nil {
			return fmt.Errorf("node sent a line the client cannot read: %w", err)
		}
		if err := cn.dispatch(a); err != nil {
			return err
		}
	}
}

// dispatch matches a to the oldest outstanding request with the same
// (op, key): T answers A, E names its op, M answers whatever op came first
// on the key.
func (cn *conn) dispatch(a proto.Answer) error {
	var cl *call
	landed := false
	cn.mu.Lock()
	if a.Kind == proto.OpWatch {
		g := cn.watching[a.Key]
		cl = cn.popLocked(proto.OpWatch, a.Key)
		cn.mu.Unlock()
		if g != nil {
			g.deliver(cn, a)
		}
		if cl != nil {
			cl.deliver(result{ans: a})
		}
		return nil
	}
	if ref := answerRef(a); ref != 0 {
		cl = cn.popRefLocked(a.Key, ref)
		if cl != nil {
			a = a.WithoutRef()
		}
	} else if a.Kind == proto.KindMoved {
		cl = cn.popAnyLocked(a.Key)
		if cl == nil {
			if g := cn.watching[a.Key]; g != nil {
				// The active gave its role up: the watch moves.
				delete(cn.watching, a.Key)
				cn.mu.Unlock()
				addr, _ := movedTo(cn.addr, a)
				g.lost(cn, addr)
				return nil
			}
		}
	} else if op := a.ReqOp(); op != 0 {
		cl = cn.popLocked(op, a.Key)
	}
	if cl != nil {
		landed = cn.answered > cl.seq
		cn.answered = max(cn.answered, cl.seq)
		if cl.probe {
			cn.probes--
			cn.probeAt = time.Now()
		}
	}
	cn.mu.Unlock()
	if cl != nil && cl.probe {
		// Its work is done: the line proved the node alive.
		return nil
	}
	if cl == nil {
		if a.Kind == proto.KindError {
			// A request of ours will never be answered: the stream is out
			// of step, so start afresh and let the calls retry.
			return fmt.Errorf("node sent an error that matches no request: %s %s %s", a.Kind, a.Key, a.ErrorText())
		}
		cn.c.log.Warn("lockd answer matches no request", "addr", cn.addr, "kind", a.Kind.String(), "key", a.Key)
		return nil
	}
	if !cl.deliver(result{ans: a, landed: landed}) {
		cn.c.orphan(cl, a)
	}
	return nil
}

// Call states.
const (
	callWaiting int32 = iota
	callAnswered
	callAbandoned
)

// call is one request sent on one connection, waiting for its answer.
type call struct {
	req   request
	seq   uint64
	ref   uint64        // A: its ref=R on this connection
	cn    *conn         // where it was sent, and
	gen   uint64        // which connection of cn
	res   chan result   // cap 1; receives exactly one result
	kick  chan struct{} // optional: shared by the sends of one Release
	probe bool          // a keep-alive: nobody waits for its answer
	state atomic.Int32
}

type result struct {
	ans proto.Answer
	err error
	// landed: the node answered a request sent after this one first, so
	// an M answer came after the node had taken the request in.
	landed bool
}

func newCall(req *request, kick chan struct{}) *call {
	return &call{req: *req, res: make(chan result, 1), kick: kick}
}

// deliver hands r to the caller. It reports false when the caller gave up
// on the call, so the answer is the reader's to deal with.
func (cl *call) deliver(r result) bool {
	cl.res <- r
	if !cl.state.CompareAndSwap(callWaiting, callAnswered) {
		return false
	}
	if cl.kick != nil {
		select {
		case cl.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// abandon gives up waiting. The request stays registered, so its answer,
// when it comes, is consumed without disturbing the matching of later
// requests. If the answer was delivered already, abandon returns it.
func (cl *call) abandon() (result, bool) {
	if cl.state.CompareAndSwap(callWaiting, callAbandoned) {
		return result{}, false
	}
	return <-cl.res, true
}

// request is one request line to send.
type request struct {
	op     proto.Op
	try    bool // A: wait "-", never queue
	shared bool // A: mode=shared, a reader
	// limit (A) is how many may hold the key at once (0 and 1: a lock).
	// Beside op it fills padding, so a semaphore's limit costs a lock's
	// request no memory.
	limit int32
	key   string
	token uint64        // R, N
	lease time.Duration // A, N
	wait  time.Duration // A: what is left of the wait at this send
	addr  string        // H
	// id (A) names the acquire on every send, so that a node that
	// granted it, or queued it, before the request had to move answers
	// that grant again, or keeps its place, instead of granting twice.
	id string
	// more (A) are the keys of a set after key, sent as key=K.
	more []string
	// value (A, N) is the holder's value, sent percent-encoded as
	// value=V; "" sends none.
	value string

	// A: the whole wait and when the request was first sent, to send
	// what is left of it when the request moves to another connection.
	waitTotal time.Duration
	start     time.Time
}

var errWaitElapsed = errors.New("wait elapsed before the request could be sent")

// prepare sets what changes from one send to the next.
func (r *request) prepare(now time.Time) error {
	if r.op != proto.OpAcquire || r.waitTotal <= 0 {
		return nil
	}
	if r.start.IsZero() {
		r.start = now
	}
	left := ceilMillis(r.waitTotal - now.Sub(r.start))
	if left <= 0 {
		return errWaitElapsed
	}
	r.wait = left
	return nil
}

// ceilMillis rounds d up to the wire's millisecond precision, so that a
// positive wait never turns into 0 (forever).
func ceilMillis(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}

// checkLine refuses a request whose line would be longer than lockd
// reads (proto.MaxLineLen: a node closes the connection on such a
// line): keys of a set, an id and a value, percent-encoded, add up. The
// line is measured as its longest send can be: with the whole wait and
// the longest ref.
func checkLine(op, label string, r *request) error {
	w := *r
	w.wait = ceilMillis(w.waitTotal)
	var buf [proto.MaxLineLen + 2]byte // on the stack: only its length counts
	n := len(w.appendTo(buf[:0], math.MaxUint64)) - 1
	if n <= proto.MaxLineLen {
		return nil
	}
	what := "its keys, id and value"
	if r.op == proto.OpRenew {
		what = "its key and value"
	}
	return argErrorf("%s %s: the request line would be %d bytes, longer than the %d a lockd request line may hold (%s, a value percent-encoded up to 3 bytes a byte): use fewer or shorter keys, or a shorter value", op, label, n, proto.MaxLineLen, what)
}

func (r *request) appendTo(b []byte, ref uint64) []byte {
	b = append(b, byte(r.op), ' ')
	b = append(b, r.key...)
	switch r.op {
	case proto.OpAcquire:
		b = append(b, ' ')
		b = proto.AppendSeconds(b, r.lease)
		b = append(b, ' ')
		if r.try {
			b = append(b, '-')
		} else {
			b = proto.AppendSeconds(b, r.wait)
		}
		for _, k := range r.more {
			b = append(b, " key="...)
			b = append(b, k...)
		}
		if r.shared {
			b = append(b, " mode=shared"...)
		}
		if r.limit > 1 {
			b = append(b, " limit="...)
			b = strconv.AppendInt(b, int64(r.limit), 10)
		}
		if r.id != "" {
			b = append(b, " id="...)
			b = append(b, r.id...)
		}
		if r.value != "" {
			b = append(b, " value="...)
			b = appendValue(b, r.value)
		}
		if ref != 0 {
			b = append(b, " ref="...)
			b = strconv.AppendUint(b, ref, 36)
		}
	case proto.OpWithdraw:
		b = append(b, ' ')
		b = append(b, r.id...)
	case proto.OpRelease:
		b = append(b, ' ')
		b = strconv.AppendUint(b, r.token, 10)
	case proto.OpRenew:
		b = append(b, ' ')
		b = strconv.AppendUint(b, r.token, 10)
		b = append(b, ' ')
		b = proto.AppendSeconds(b, r.lease)
		if r.value != "" {
			b = append(b, " value="...)
			b = appendValue(b, r.value)
		}
	case proto.OpHandoff:
		if r.addr != "" {
			b = append(b, ' ')
			b = append(b, r.addr...)
		}
	}
	return append(b, '\n')
}
