package cluster

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Direct writes.
//
// An answer is normally written by its connection's writer goroutine,
// started or woken when the answer buffer turns non-empty. For the answers a batch
// produces that costs a goroutine switch each, and on the path of a
// handoff it sits between the release and the next holder's grant: the
// release is read, the grant queued for the waiter's connection, the
// waiter's writer woken, and only once it runs does the grant leave.
//
// So the goroutine that applies a batch writes what the batch produced
// itself once it has let go of the node mutex, on every connection whose
// writer was idle: first the other connections (a grant to a waiter is
// the next holder's wait), then its own answers (or, while it reads on
// after a read of several requests, with those of the next read:
// applyDirect's hold). Each such write is one
// non-blocking write(2): what the socket does not take at once is left
// to the connection's writer goroutine, so a client that does not read
// never blocks the goroutine of another. Over TLS every answer goes
// through the writer goroutine (a TLS record cannot be written in part
// and resumed by another goroutine).
//
// Raw reads and writes. On Linux a plain TCP connection's reads and the
// direct writes are raw read(2) and write(2) on the non-blocking socket
// (rawio_linux.go: the reader's push), waiting on Go's poller as
// net.Conn does but without the scheduler's syscall entry and exit: that
// bookkeeping wakes the scheduler's monitor thread after every idle
// spell and hands Ps between threads during slow loopback writes, and on
// a small machine costs more than lockd's own work per request.

// flushList collects, while a batch is applied under the node mutex, the
// connections whose answers the applying goroutine writes after it.
type flushList struct {
	conns []*conn
}

// promise makes f write c's answers after the batch, if no goroutine is
// writing c or has promised to: c's writer is then not woken. c.outMu is
// held.
func (f *flushList) promise(c *conn) bool {
	if f == nil || c.tls || c.raw == nil || c.writing || c.inline > 0 {
		return false
	}
	c.inline++
	f.conns = append(f.conns, c)
	return true
}

// applyDirect applies a batch read on c and writes the answers it
// produced: the other connections' first, then c's own, unless hold is
// set: then c's own stay queued, to go out in one write with those of
// the batches read next, when the reader writes them (writeHeld).
func (c *conn) applyDirect(batch []item, hold bool) {
	if !c.holding {
		c.outMu.Lock()
		c.inline++
		c.outMu.Unlock()
		c.holding = true
	}
	c.direct = &c.flushes
	c.n.apply(c, batch)
	c.direct = nil
	c.flushes.flush()
	if !hold {
		c.writeHeld()
	}
}

// holdMax bounds the answers a reader holds back for one write.
const holdMax = 4 << 10

// writeHeld writes the answers applyDirect held back, if any. The reader
// calls it before it waits on the poller or for room, before a key
// listing's scan, and when it stops; a batch it applies meanwhile waits
// for the node mutex only as long as another batch holds it.
func (c *conn) writeHeld() {
	if c.holding {
		c.holding = false
		c.endInline()
	}
}

// holdsMuch reports whether c holds back holdMax bytes of answers or more.
func (c *conn) holdsMuch() bool {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	return len(c.out) >= holdMax
}

// flush writes the answers promised, then forgets the list.
func (f *flushList) flush() {
	for i, c := range f.conns {
		c.endInline()
		f.conns[i] = nil
	}
	f.conns = f.conns[:0]
}

// endInline gives up a promise to write c's answers, and writes them.
// The promise goes first: whatever is queued after it wakes the writer,
// whatever was queued before it is written here.
func (c *conn) endInline() {
	c.outMu.Lock()
	c.inline--
	c.outMu.Unlock()
	c.flush(true)
}

// errWouldBlock says a non-blocking write wrote less than it was given:
// the socket is full, the rest is for the writer goroutine.
var errWouldBlock = errors.New("socket buffer full")

// writeOut writes buf to c's socket. inline: the caller is not c's writer
// goroutine and must not block; it writes what the socket takes now, in
// one write(2), and reports errWouldBlock with the count written when
// that is not all. Otherwise the write blocks for at most 30 seconds.
func (c *conn) writeOut(buf []byte, inline bool) (int, error) {
	if !inline {
		c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		return c.nc.Write(buf)
	}
	if c.raw == nil || c.tls {
		c.nc.SetWriteDeadline(time.Now().Add(inlineWriteBudget))
		n, err := c.nc.Write(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = errWouldBlock
		}
		return n, err
	}
	w := &c.raw.wr
	w.buf = buf
	err := c.raw.conn.Write(w.fn)
	n, werr := w.n, w.err
	w.buf = nil
	switch {
	case err != nil:
		// A write deadline the writer goroutine set long ago has passed
		// (the poller refuses before writing): the writer sets a new one.
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, errWouldBlock
		}
		return 0, err
	case werr == errWouldBlock:
		return 0, errWouldBlock
	case werr != nil:
		return 0, werr
	case n < len(buf):
		return n, errWouldBlock
	}
	return n, nil
}

// rawIO is a connection's socket for raw reads and writes (Linux only:
// newRawIO returns nil elsewhere, and the connection reads and writes
// through net.Conn), with the write function RawConn calls made once: a
// closure per call would cost an allocation per write. wr belongs to
// whichever goroutine is writing c (conn.writing); the reader reads in
// push (rawio_linux.go).
type rawIO struct {
	conn syscall.RawConn
	wr   rawCall
	// empty counts the reads that found nothing to read: after each the
	// reader waits on the poller. A reader that waits only once it
	// emptied the socket makes few (push, rawio_linux.go).
	empty atomic.Uint64
}

// rawCall is a write's call: its buffer, and what write(2) returned.
type rawCall struct {
	buf []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}
