package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// maxBatch bounds how many requests one mutex acquisition applies, so one
// busy connection cannot starve the others.
const maxBatch = 256

func (c *conn) readLoop() {
	if c.tls && !c.handshakeTLS(c.n.tlsConfig) {
		c.n.dropConn(c)
		c.n.wg.Done()
		return
	}
	// A writer starts once c.nc is the connection it writes to.
	c.out.ready()
	dr := &deadlineReader{c: c, nc: c.nc, start: c.accepted}
	dr.br = &lineReader{rd: dr}
	c.readOn(dr)
}

// readOn waits for c's first bytes on a shallow stack, then reads and
// applies c's requests until the connection ends, or until it has
// rested (readtimeout.go): then a new goroutine goes on with them. The
// goroutine that sees the end forgets c and counts the reader done.
func (c *conn) readOn(dr *deadlineReader) {
	if c.authed.Load() {
		dr.br.await(dr.nc)
	} else {
		// Noted as the bytes leave the socket: once they have, an
		// eviction would no longer see them there (hasSpoken).
		dr.br.await(spokeConn{dr.nc, c})
	}
	if c.serve(dr) {
		c.out.shedOut()
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
	b.c.out.writeHeld()
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
		c.n.apply(c, b.batch, nil)
	} else {
		c.n.apply(c, b.batch, c.out.holdBack())
		c.out.afterBatch(b.hold)
	}
	clear(b.batch)
	b.batch = b.batch[:0]
	if b.dr.br.Buffered() == 0 {
		b.bb.items = b.batch
		putBatch(b.bb)
		b.bb, b.batch = nil, nil
	}
	if b.hold && c.out.holdsMuch() {
		c.out.writeHeld()
	}
	return c.out.waitDrained(c.n.ctx)
}

// tooLong answers a line longer than the grammar allows and closes c.
func (b *batcher) tooLong() bool {
	b.c.closeLineTooLong()
	return false
}

// closeLineTooLong ends c, whose client sent a line longer than the
// grammar allows.
func (c *conn) closeLineTooLong() {
	c.n.limitHit(limLineLength)
	c.send(func(b []byte) []byte {
		return proto.AppendError(b, proto.WordNone, '?', "line longer than 4096 bytes; closing this connection")
	})
	c.flushAndClose()
}

// end is what a read that failed with err means, rest being the bytes
// it left unfinished: true for a reader to rest, false once the
// connection is finished.
func (b *batcher) end(err error, rest []byte) bool {
	c := b.c
	c.out.writeHeld()
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
		c.n.apply(c, b.batch, nil)
	}
	return false
}

// The reader's buffers: a line reader whose buffer comes from a pool
// while bytes are buffered (buffers.go says why), and the batches of
// parsed lines.

// readBufSize is a read buffer's size: room for the longest line and
// more, as bufio's was.
const readBufSize = 2 * proto.MaxLineLen

// idleReadSize is how much a connection with nothing buffered reads
// without a buffer of the pool: most single requests fit.
const idleReadSize = 128

var readBufs = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// lineReader reads a connection's lines as bufio.Reader's ReadSlice
// does, into a buffer from readBufs that it holds only while bytes are
// buffered: a connection blocked waiting for its client's next request
// reads into the small array of its own, and a line ends up in the
// pool's buffer only once there is one to read.
type lineReader struct {
	rd    io.Reader
	buf   *[readBufSize]byte // nil while nothing is buffered
	r, w  int                // buf[r:w] is buffered
	err   error              // what await's read ended with, for the next fill
	small [idleReadSize]byte
}

// Buffered counts the bytes read and not yet returned.
func (lr *lineReader) Buffered() int { return lr.w - lr.r }

// hasLine reports whether a whole line is buffered.
func (lr *lineReader) hasLine() bool {
	return lr.buf != nil && bytes.IndexByte(lr.buf[lr.r:lr.w], '\n') >= 0
}

// ReadSlice returns the next line, '\n' included, valid until the next
// call. As bufio.Reader's: a line longer than the buffer returns
// bufio.ErrBufferFull with the buffer's bytes; an error before a '\n'
// returns the bytes buffered with it.
func (lr *lineReader) ReadSlice() ([]byte, error) {
	for {
		if lr.buf != nil {
			if i := bytes.IndexByte(lr.buf[lr.r:lr.w], '\n'); i >= 0 {
				line := lr.buf[lr.r : lr.r+i+1]
				lr.r += i + 1
				return line, nil
			}
			if lr.r == 0 && lr.w == len(lr.buf) {
				lr.r = lr.w
				return lr.buf[:], bufio.ErrBufferFull
			}
		}
		if err := lr.fill(); err != nil {
			var rest []byte
			if lr.buf != nil {
				rest = lr.buf[lr.r:lr.w]
				lr.r = lr.w
			}
			return rest, err
		}
	}
}

// await blocks until nc has bytes to read, reading them straight from
// nc into the small array, with nothing buffered: a goroutine blocked
// here has only a few frames on its stack, where one blocked under the
// reader's loop has the loop's (conn.serve) and the read bounds' too,
// and a stack of twice the size. The read deadline armed is the read
// bounds' (readtimeout.go): a timeout is left to them, on the next fill.
func (lr *lineReader) await(nc io.Reader) {
	if lr.r != lr.w {
		return
	}
	lr.release()
	n, err := nc.Read(lr.small[:])
	lr.took(n)
	if err != nil && !isTimeout(err) {
		lr.err = err
	}
}

// took moves n bytes read into the small array to a buffer of the pool.
func (lr *lineReader) took(n int) {
	if n > 0 {
		lr.buf = readBufs.Get().(*[readBufSize]byte)
		lr.r, lr.w = 0, copy(lr.buf[:], lr.small[:n])
	}
}

// fill reads once. With nothing buffered, the buffer goes back to the
// pool first and the read goes to the small array; what it gets is
// copied into a buffer of the pool.
func (lr *lineReader) fill() error {
	if err := lr.err; err != nil {
		lr.err = nil
		return err
	}
	if lr.r == lr.w {
		lr.release()
		n, err := lr.rd.Read(lr.small[:])
		lr.took(n)
		if n == 0 && err == nil {
			return io.ErrNoProgress
		}
		return err
	}
	if lr.r > 0 {
		lr.w = copy(lr.buf[:], lr.buf[lr.r:lr.w])
		lr.r = 0
	}
	n, err := lr.rd.Read(lr.buf[lr.w:])
	lr.w += n
	if n == 0 && err == nil {
		return io.ErrNoProgress
	}
	return err
}

// space is where the next read goes, for a reader that reads into the
// lineReader itself (push): the small array when nothing is buffered,
// else the pool buffer's room after what is, moved to its start. It is
// empty when the buffer is full.
func (lr *lineReader) space() []byte {
	if lr.r == lr.w {
		lr.release()
		return lr.small[:]
	}
	if lr.r > 0 {
		lr.w = copy(lr.buf[:], lr.buf[lr.r:lr.w])
		lr.r = 0
	}
	return lr.buf[lr.w:]
}

// commit takes the n bytes read into p, which space returned.
func (lr *lineReader) commit(p []byte, n int) {
	if lr.buf == nil {
		lr.took(n)
		return
	}
	lr.w += n
}

// next returns the next whole line buffered, '\n' included, or nil.
func (lr *lineReader) next() []byte {
	if lr.buf == nil {
		return nil
	}
	i := bytes.IndexByte(lr.buf[lr.r:lr.w], '\n')
	if i < 0 {
		return nil
	}
	line := lr.buf[lr.r : lr.r+i+1]
	lr.r += i + 1
	return line
}

// pending returns the bytes buffered, a line begun.
func (lr *lineReader) pending() []byte {
	if lr.buf == nil {
		return nil
	}
	return lr.buf[lr.r:lr.w]
}

// release gives the buffer back to the pool; nothing must be buffered.
func (lr *lineReader) release() {
	if lr.buf != nil {
		readBufs.Put(lr.buf)
		lr.buf = nil
	}
	lr.r, lr.w = 0, 0
}

// batchBuf is the slice a connection's reader gathers a batch of parsed
// lines in: 16 items are 2 KB, taken from batches while lines come.
type batchBuf struct{ items []item }

var batches = sync.Pool{New: func() any { return &batchBuf{items: make([]item, 0, 16)} }}

// appendParsed appends line, parsed, to batch, whose array grows by
// doubling to maxBatch items at most: append's own growth overshoots
// maxBatch, and an array larger than a full batch does not go back to
// batches (putBatch), so a pipelining client's reader would grow a new
// one for every full batch. Not inlined: a parsed request is large, and
// the copies of proto.Parse's result would sit in conn.serve's frame, on
// the stack of every reader blocked in a read (readtimeout.go).
//
//go:noinline
func appendParsed(batch []item, line []byte) []item {
	if len(batch) == cap(batch) {
		grown := make([]item, len(batch), min(max(2*cap(batch), 16), maxBatch))
		copy(grown, batch)
		batch = grown
	}
	req, perr := proto.Parse(line)
	return append(batch, item{req, perr})
}

// putBatch returns bb, whose items are cleared, to batches; bb may be
// nil. A slice grown to a full batch goes back too: a pipelining client
// fills one at every read, and would otherwise grow a new one each time.
func putBatch(bb *batchBuf) {
	if bb != nil && cap(bb.items) <= maxBatch {
		batches.Put(bb)
	}
}
