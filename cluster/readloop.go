package cluster

import (
	"bufio"
	"bytes"
	"errors"
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
// rested (rest.go): then a new goroutine goes on with them. The
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
