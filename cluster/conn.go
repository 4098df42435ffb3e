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
	// While c has not authenticated: its place in n.unauth, and the
	// timer that closes it at --auth-timeout.
	strangerPrev, strangerNext *conn
	authTimer                  *time.Timer
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
	// holding: the reader holds back its own answers, to write them
	// with those of the batches it reads next (direct.go, writeHeld); it
	// counts in inline. Only the reader uses it.
	holding bool
	raw     *rawIO // c.nc's socket, for raw reads and writes; nil: none
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
		if r >= auth.Client {
			n.forgetStrangerLocked(c)
		}
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
	b := batcher{c: c, dr: dr}
	defer b.done()
	if c.raw != nil && !c.tls {
		return b.push()
	}
	return b.pull()
}

// batcher gathers the lines a connection's reader reads into batches,
// and applies each batch once no whole line is left buffered behind it
// (or it is full): so a batch is always applied before the reader reads
// again, and the parsed requests may point into the read buffer.
type batcher struct {
	c     *conn
	dr    *deadlineReader
	bb    *batchBuf // from batches, while lines are being gathered
	batch []item
	// stopped: push's read function stopped the reader, which ends
	// serve with ended.
	stopped, ended bool
	lines          int // lines taken, for push
	// hold: the answers of a batch wait for those of the next one (push,
	// while it reads on after a read of several requests).
	hold bool
}

// stop ends push's reading, serve to report ended.
func (b *batcher) stop(ended bool) { b.stopped, b.ended = true, ended }

// drain applies the whole lines buffered, and reports false once the
// connection is finished: a line that fills the buffer without its end
// finishes it too.
func (b *batcher) drain() bool {
	r := b.dr.br
	for line := r.next(); line != nil; line = r.next() {
		if !b.line(line, r.hasLine()) {
			return false
		}
	}
	switch r.Buffered() {
	case 0:
		r.release() // an idle connection holds no read buffer
	case readBufSize:
		return b.tooLong()
	}
	return true
}

// done writes the answers held back and gives the batch slice back.
func (b *batcher) done() {
	b.c.writeHeld()
	if b.bb != nil {
		clear(b.bb.items[:cap(b.bb.items)])
		putBatch(b.bb)
		b.bb, b.batch = nil, nil
	}
}

// pull reads lines through the deadline reader, each read waiting for
// data as net.Conn's Read does.
func (b *batcher) pull() bool {
	r := b.dr.br
	for {
		line, err := r.ReadSlice()
		if err != nil {
			return b.end(err, line)
		}
		if !b.line(line, r.hasLine()) {
			return false
		}
	}
}

// line takes one line read, '\n' included; more says another whole line
// is buffered behind it. It reports false once the connection is
// finished.
func (b *batcher) line(line []byte, more bool) bool {
	c := b.c
	if len(bytes.TrimRight(line, "\r\n")) > proto.MaxLineLen {
		return b.tooLong()
	}
	b.dr.lineDone()
	b.lines++
	if b.bb == nil {
		b.bb = batches.Get().(*batchBuf)
		b.batch = b.bb.items[:0]
	}
	b.batch = appendParsed(b.batch, line)
	if len(b.batch) < maxBatch && more {
		return true
	}
	// The reader writes its own answers when the writer is idle: one
	// goroutine switch less per request for the common request-answer
	// client. Not over TLS: a write that times out leaves a TLS
	// connection unusable.
	if c.batches%timedBatches == 0 {
		c.readAt, c.timed = time.Since(c.n.base), true
	}
	c.batches++
	if c.tls {
		c.n.apply(c, b.batch)
	} else {
		c.applyDirect(b.batch, b.hold)
	}
	clear(b.batch)
	b.batch = b.batch[:0]
	if b.dr.br.Buffered() == 0 {
		b.bb.items = b.batch
		putBatch(b.bb)
		b.bb, b.batch = nil, nil
	}
	if b.hold && c.holdsMuch() {
		c.writeHeld()
	}
	return c.waitDrained()
}

// tooLong answers a line longer than the grammar allows and closes c.
func (b *batcher) tooLong() bool {
	b.c.closeLineTooLong()
	return false
}

// end is what a read that failed with err means, rest being the bytes
// it left unfinished: true for a reader to rest, false once the
// connection is finished.
func (b *batcher) end(err error, rest []byte) bool {
	c := b.c
	c.writeHeld()
	if err == errRest {
		return true
	}
	if errors.Is(err, bufio.ErrBufferFull) || len(bytes.TrimRight(rest, "\r\n")) > proto.MaxLineLen {
		return b.tooLong()
	}
	// Only an error is looked into: bound escapes to errors.As, and was
	// allocated for every line read.
	if bound, ok := readBound(err); ok {
		c.closeOverBound(bound, b.batch)
		return false
	}
	// Otherwise the connection ended: a last line without its '\n' is
	// not a request, as the grammar ends every line and a half line may
	// be a cut one. (A batch is applied before every read; this one is
	// for safety.)
	if len(b.batch) > 0 {
		c.n.apply(c, b.batch)
	}
	return false
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
		c.writeHeld()
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
				c.closeSocket()
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
			if c.wr.done {
				// Closed meanwhile over a limit (closeLocked), which
				// dropped what was queued and starts no writer: the rest
				// is dropped too, and no longer counted.
				c.account(-len(buf))
				c.outMu.Unlock()
				return false
			}
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
			c.closeSocket()
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
		c.closeSocket()
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

// closeSocket closes c's socket. Its reader may be inside a raw read of
// it (push, rawio_linux.go), holding the socket's read lock, and a close
// waits until the lock is let go: called by the reader itself, or by a
// goroutine holding the node mutex the reader waits for, it would wait
// for ever. So on such a connection the close goes to a goroutine of its
// own; the close wakes the reader, whose read then returns.
func (c *conn) closeSocket() {
	if c.raw != nil && !c.tls {
		go c.nc.Close()
		return
	}
	c.nc.Close()
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
	n.forgetStrangerLocked(c)
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
