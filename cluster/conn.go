package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// maxBatch bounds how many requests one mutex acquisition applies, so one
// busy connection cannot starve the others.
const maxBatch = 256

// conn is one accepted connection: a client, a peer's heartbeat link, or a
// standby's replication stream.
type conn struct {
	n        *Node
	id       uint64
	nc       net.Conn
	remote   string
	ip       string // remote IP, for --max-conns-per-ip
	tls      bool
	accepted time.Time

	// authed: role is Client or more (read by the reader without n.mu).
	authed atomic.Bool

	// Guarded by n.mu.
	role     auth.Role
	hs       auth.Handshake
	gone     bool
	refusals int  // requests refused before it authenticated
	evicted  bool // closed to make room for a new connection
	// For metrics (metrics.go): peer, it carries peer messages, not
	// client requests; pending, its client requests not answered at once.
	peer    bool
	pending map[string]pendingQueue

	// For the request duration (reader only): batches read, and when the
	// batch being applied was read (since n.base), if it is timed.
	batches uint32
	readAt  time.Duration
	timed   bool

	outMu  sync.Mutex
	queued int // bytes accepted and not yet written: out and the write in flight
	// drained is closed, and forgotten, when queued falls below
	// readResumeAt or the connection finishes: every goroutine waiting
	// for room wakes. Made when one is to wait (drainedLocked).
	drained chan struct{}
	out     []byte
	spare   []byte // the other buffer: out and spare swap on each write
	writing bool   // a goroutine is writing: the others leave it to it
	// inline counts the goroutines that will flush c after the batch
	// they apply (direct.go): while one will, the writer is not woken.
	inline int
	raw    *rawIO // c.nc's socket, for raw reads and writes; nil: none
	// direct, set by the reader only while it applies a batch (to
	// flushes), collects the other connections it writes the batch's
	// answers to (direct.go).
	direct  *flushList
	flushes flushList
	wr      writerState // the writer goroutine, if one runs (writer.go)
	closed  bool        // no more writes
	// stream: a replication stream, whose snapshot may be larger than
	// the flood limit of client connections.
	stream bool
}

func newConn(n *Node, id uint64, nc net.Conn) *conn {
	c := &conn{n: n, id: id, nc: nc, remote: nc.RemoteAddr().String()}
	c.ip = c.remote
	if h, _, err := net.SplitHostPort(c.remote); err == nil {
		c.ip = h
	}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.raw = newRawIO(rc)
		}
	}
	c.role = n.gate.open
	c.authed.Store(c.role >= auth.Client)
	c.accepted = time.Now()
	return c
}

// handshakeTLS runs the server side of TLS on c, bounded by the
// authentication timeout, and gives c the role of its client certificate.
func (c *conn) handshakeTLS(cfg *tls.Config) bool {
	n := c.n
	tc := tls.Server(c.nc, cfg)
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Limits.AuthTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		n.refusedLog.log(n.log, "TLS handshake failed", "remote", c.remote, "err", err.Error())
		c.nc.Close()
		return false
	}
	n.mu.Lock()
	c.nc = tc
	if r := auth.CertRole(tc.ConnectionState()); r > c.role {
		c.role = r
		c.authed.Store(r >= auth.Client)
	}
	n.mu.Unlock()
	return true
}

func (c *conn) readLoop() {
	if c.tls && !c.handshakeTLS(c.n.tlsConfig) {
		c.n.dropConn(c)
		c.n.wg.Done()
		return
	}
	// A writer starts once c.nc is the connection it writes to.
	c.writerReady()
	dr := &deadlineReader{c: c, nc: c.nc, start: c.accepted}
	dr.br = &lineReader{rd: dr}
	c.readOn(dr)
}

// readOn waits for c's first bytes on a shallow stack, then reads and
// applies c's requests until the connection ends, or until it has
// rested (rest.go): then a new goroutine goes on with them. The
// goroutine that sees the end forgets c and counts the reader done.
func (c *conn) readOn(dr *deadlineReader) {
	dr.br.await(dr.nc)
	if c.serve(dr) {
		go c.readOn(dr)
		return
	}
	dr.br.release()
	c.n.dropConn(c)
	c.n.wg.Done()
}

// serve reads and applies c's requests until the connection ends, and
// reports false; or until its reader is to rest, with nothing buffered,
// and reports true.
func (c *conn) serve(dr *deadlineReader) bool {
	r := dr.br
	var bb *batchBuf // from batches, while lines are being gathered
	var batch []item
	defer func() {
		if bb != nil {
			clear(bb.items[:cap(bb.items)])
			putBatch(bb)
		}
	}()
	for {
		line, err := r.ReadSlice()
		if err == errRest {
			return true
		}
		if errors.Is(err, bufio.ErrBufferFull) || len(bytes.TrimRight(line, "\r\n")) > proto.MaxLineLen {
			c.closeLineTooLong()
			return false
		}
		// Only an error is looked into: bound escapes to errors.As,
		// and was allocated for every line read.
		if bound, ok := readBound(err); ok {
			c.closeOverBound(bound, batch)
			return false
		}
		if err != nil {
			// A last line without its '\n' is not a request: the
			// grammar ends every line, and a half line may be a cut one.
			if len(batch) > 0 {
				c.n.apply(c, batch)
			}
			return false
		}
		dr.lineDone()
		if bb == nil {
			bb = batches.Get().(*batchBuf)
			batch = bb.items[:0]
		}
		batch = appendParsed(batch, line)
		if len(batch) < maxBatch && r.hasLine() {
			continue
		}
		// The reader writes its own answers when the writer is idle: one
		// goroutine switch less per request for the common
		// request-answer client. Not over TLS: a write that times out
		// leaves a TLS connection unusable.
		if c.batches%timedBatches == 0 {
			c.readAt, c.timed = time.Since(c.n.base), true
		}
		c.batches++
		if c.tls {
			c.n.apply(c, batch)
		} else {
			c.applyDirect(batch)
		}
		clear(batch)
		batch = batch[:0]
		if r.Buffered() == 0 {
			bb.items = batch
			putBatch(bb)
			bb, batch = nil, nil
		}
		if !c.waitDrained() {
			return false
		}
	}
}

// waitDrained holds the reader while the client has more than
// readPauseAt bytes of answers unread, until they fall below
// readResumeAt: a client that sends and does not read stops being read,
// instead of making the node queue without end. It reports false once
// the connection is finished.
func (c *conn) waitDrained() bool {
	for {
		c.outMu.Lock()
		q, closed, stream := c.queued, c.closed, c.stream
		var ch chan struct{}
		if !closed && q >= readPauseAt && !stream {
			ch = c.drainedLocked()
		}
		c.outMu.Unlock()
		switch {
		case closed:
			return false
		case q < readPauseAt || stream:
			// A stream's backlog is the active's doing, not the
			// standby's: its reader never pauses.
			return true
		}
		select {
		case <-ch:
			c.outMu.Lock()
			q, closed = c.queued, c.closed
			c.outMu.Unlock()
			if closed {
				return false
			}
			if q < readResumeAt {
				return true
			}
		case <-c.n.ctx.Done():
			return false
		}
	}
}

// waitRoom waits until c has less than readResumeAt bytes unsent, for a
// producer that must not outrun the connection (a snapshot being sent).
// It reports false once the connection is finished.
func (c *conn) waitRoom() bool {
	for {
		c.outMu.Lock()
		q, closed := c.queued, c.closed
		var ch chan struct{}
		if !closed && q >= readResumeAt {
			ch = c.drainedLocked()
		}
		c.outMu.Unlock()
		if closed {
			return false
		}
		if q < readResumeAt {
			return true
		}
		select {
		case <-ch:
		case <-c.n.ctx.Done():
			return false
		}
	}
}

// wakeDrained wakes every goroutine waiting for c to drain. c.outMu is held.
func (c *conn) wakeDrained() {
	if c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
}

// drainedLocked returns the channel the next wakeDrained closes, made
// now if none is: most connections never wait for room, and a channel
// each was 96 bytes of every idle connection. c.outMu is held.
func (c *conn) drainedLocked() chan struct{} {
	if c.drained == nil {
		c.drained = make(chan struct{})
	}
	return c.drained
}

// account moves c's count of unsent bytes, and the node's, by d.
// c.outMu is held.
func (c *conn) account(d int) {
	was := c.queued
	c.queued += d
	c.n.outBytes.Add(int64(d))
	if d < 0 && was >= readResumeAt && c.queued < readResumeAt {
		c.wakeDrained()
	}
}

// inlineWriteBudget is how long the reader may block writing its own
// answers before it leaves them to the writer goroutine, on a connection
// that offers no non-blocking write (direct.go).
const inlineWriteBudget = time.Millisecond

// flush writes everything queued, unless another goroutine is writing
// already (it will see what was added meanwhile). It reports false once
// the connection is finished. inline is set when the reader calls it: the
// reader must not block on a client that is not reading yet (one that
// sends a large batch before reading any answer), or neither side would
// read again; what it cannot write at once goes to the writer goroutine.
func (c *conn) flush(inline bool) bool {
	for {
		c.outMu.Lock()
		if c.writing {
			c.outMu.Unlock()
			return true
		}
		if len(c.out) == 0 {
			closed := c.closed
			c.wr.done = c.wr.done || closed
			c.outMu.Unlock()
			if closed {
				c.nc.Close()
				// Wake the writer goroutine too: if it deferred to this
				// goroutine's write, it must see the end and return.
				c.signal()
				return false
			}
			return true
		}
		c.writing = true
		buf := c.out
		c.out = c.spare[:0]
		c.spare = nil
		c.outMu.Unlock()
		n, err := c.writeOut(buf, inline)
		c.outMu.Lock()
		c.writing = false
		if inline && err == errWouldBlock {
			// The rest goes first, before what was queued meanwhile.
			c.out = append(append([]byte(nil), buf[n:]...), c.out...)
			c.account(-n)
			c.outMu.Unlock()
			c.signal()
			return true
		}
		c.account(-len(buf))
		if cap(buf) <= 1<<20 {
			c.spare = buf[:0]
		}
		c.idleOut()
		if err != nil {
			c.closeLocked()
			c.outMu.Unlock()
			c.nc.Close()
			c.signal()
			return false
		}
		c.outMu.Unlock()
	}
}

// send queues the line fn writes: for the shell's own answers (limits,
// authentication); the core's come through write.
func (c *conn) send(fn func([]byte) []byte) { c.write(fn(nil)) }

// overLimit says why c may not queue what it holds, or "". c.outMu is held.
func (c *conn) overLimit() string {
	lim := &c.n.cfg.Limits
	if c.stream {
		if c.queued > maxStreamBuffer {
			return "replication stream more than " + byteSize(maxStreamBuffer) + " behind: the standby must sync again"
		}
		return ""
	}
	if c.queued > lim.MaxConnOutput {
		return "more than " + byteSize(int64(lim.MaxConnOutput)) + " of answers unread (lockd --max-conn-output)"
	}
	if c.queued > 64<<10 && c.n.outBytes.Load() > lim.MaxOutput {
		return "the node holds more than " + byteSize(lim.MaxOutput) + " of unread answers (lockd --max-output), this connection " + byteSize(int64(c.queued))
	}
	return ""
}

// closeLocked marks c finished and drops what it has not written.
// c.outMu is held.
func (c *conn) closeLocked() {
	c.account(-len(c.out))
	c.out = nil
	c.closed = true
	c.wr.done = true // the caller closes c.nc
	c.wakeDrained()
}

// write queues b, and reports false when c is closed: b is lost.
func (c *conn) write(b []byte) bool { return c.queue(b, nil) }

// queue is write; when f is not nil and c's writer is idle, the goroutine
// of f writes b after its batch instead of c's writer (direct.go).
func (c *conn) queue(b []byte, f *flushList) bool {
	c.outMu.Lock()
	if c.closed {
		c.outMu.Unlock()
		return false
	}
	was := len(c.out)
	if cap(c.out) == 0 {
		c.out = outBuf()
	}
	c.out = append(c.out, b...)
	c.account(len(c.out) - was)
	if why := c.overLimit(); why != "" {
		c.closeLocked()
		c.outMu.Unlock()
		c.n.limitHit(outputLimit(why))
		c.n.refusedLog.log(c.n.log, "connection closed", "remote", c.remote, "why", why)
		c.nc.Close()
		c.signal()
		return false
	}
	wake := was == 0 && c.inline == 0 && !f.promise(c)
	c.outMu.Unlock()
	if wake {
		c.signal()
	}
	return true
}

// isClosed reports whether nothing more can be written to c: an answer
// for it would be lost.
func (c *conn) isClosed() bool {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	return c.closed
}

// flushAndClose writes what is queued, then closes.
func (c *conn) flushAndClose() {
	c.outMu.Lock()
	if !c.closed {
		c.closed = true
		c.wakeDrained()
	}
	c.outMu.Unlock()
	// Always signal the writer: whichever goroutine closed the
	// connection first, a writer writes what is queued and closes c.nc.
	c.signal()
}

// dropConn forgets c: its waiters leave their queues.
func (n *Node) dropConn(c *conn) {
	c.flushAndClose()
	c.nc.SetReadDeadline(time.Now())
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.gone {
		return
	}
	c.gone = true
	if c.evicted {
		n.evicting--
	}
	if n.perIP[c.ip]--; n.perIP[c.ip] <= 0 {
		delete(n.perIP, c.ip)
	}
	delete(n.conns, c.id)
	if n.connGone != nil {
		close(n.connGone)
		n.connGone = nil
	}
	n.core.ConnClosed(n.now(), core.ConnID(c.id))
	n.countCancelled(c)
	n.rearmLocked()
}
