package cluster

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// What an outWriter (outwriter.go) stands on: the socket it writes
// (outSocket), what it tells its connection (outOwner), and what it
// shares with the node's other writers (outShared).

// outSocket is where an outWriter writes: the raw socket (rawIO) of a
// plain TCP connection on Linux, or a net.Conn (TLS, other systems).
type outSocket interface {
	// write writes b whole, blocking for at most writeTimeout: the
	// writer goroutine's write.
	write(b []byte) (int, error)
	// tryWrite writes what the socket takes now, without blocking (the
	// raw socket), or within inlineWriteBudget (a net.Conn), and
	// reports errWouldBlock with the count written when that is not
	// all. On a net.Conn only the connection's own reader calls it.
	tryWrite(b []byte) (int, error)
	// close closes the socket; it may do so after it returns.
	close()
}

// outShared is what the writers of a node's connections share.
type outShared struct {
	bytes atomic.Int64  // unread bytes of every connection (--max-output)
	shed  atomic.Uint64 // bytes of buffers dropped as readers rested (trim.go)
	lim   *Limits
	wg    *sync.WaitGroup // counts the writer goroutines
}

// outOwner is what a writer tells its connection.
type outOwner interface {
	// limitClosed: the writer closed the connection over a limit.
	limitClosed(hit int, why string)
	// watchRoom: what was queued when watch news waited is written
	// (watchWhenDrained). Only the writer goroutine calls it.
	watchRoom()
}

// writeTimeout bounds a write of the writer goroutine: a client that
// reads nothing for that long is gone.
const writeTimeout = 30 * time.Second

// inlineWriteBudget is how long the reader may block writing its own
// answers before it leaves them to the writer goroutine, on a connection
// that offers no non-blocking write.
const inlineWriteBudget = time.Millisecond

// errWouldBlock says a non-blocking write wrote less than it was given:
// the socket is full, the rest is for the writer goroutine.
var errWouldBlock = errors.New("socket buffer full")

// netSocket writes through net.Conn.
type netSocket struct{ nc net.Conn }

func (s netSocket) write(b []byte) (int, error) {
	s.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return s.nc.Write(b)
}

func (s netSocket) tryWrite(b []byte) (int, error) {
	s.nc.SetWriteDeadline(time.Now().Add(inlineWriteBudget))
	n, err := s.nc.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errWouldBlock
	}
	return n, err
}

func (s netSocket) close() { s.nc.Close() }

// rawIO is a connection's socket for raw reads and writes (Linux only:
// newRawIO returns nil elsewhere, and the connection reads and writes
// through net.Conn), with the write function RawConn calls made once: a
// closure per call would cost an allocation per write. Its reader reads
// in push (rawio_linux.go); wr belongs to whichever goroutine writes
// (outWriter.writing).
//
// Raw reads and writes are read(2) and write(2) on the non-blocking
// socket, waiting on Go's poller as net.Conn does but without the
// scheduler's syscall entry and exit: that bookkeeping wakes the
// scheduler's monitor thread after every idle spell and hands Ps between
// threads during slow loopback writes, and on a small machine costs more
// than lockd's own work per request.
type rawIO struct {
	nc   net.Conn
	conn syscall.RawConn
	wr   rawCall
	// empty counts the reads that found nothing to read: after each the
	// reader waits on the poller. A reader that waits only once it
	// emptied the socket makes few (push, rawio_linux.go).
	empty atomic.Uint64
}

// rawOf returns nc's raw socket, or nil: not a plain TCP connection, or
// not on Linux.
func rawOf(nc net.Conn) *rawIO {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return newRawIO(nc, rc)
		}
	}
	return nil
}

// socketOf is what a writer writes nc through, and whether goroutines
// other than its writer may write it (outWriter.direct): the raw socket,
// but over TLS (tls, or raw nil).
func socketOf(nc net.Conn, raw *rawIO, tls bool) (outSocket, bool) {
	if raw != nil && !tls {
		return raw, true
	}
	return netSocket{nc}, false
}

// rawCall is a write's call: its buffer, and what write(2) returned.
type rawCall struct {
	buf []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

// write is the writer goroutine's: a blocking write through net.Conn.
func (r *rawIO) write(b []byte) (int, error) { return netSocket{r.nc}.write(b) }

// tryWrite is one write(2), which never waits.
func (r *rawIO) tryWrite(buf []byte) (int, error) {
	w := &r.wr
	w.buf = buf
	err := r.conn.Write(w.fn)
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

// close closes the socket from a goroutine of its own: the reader may be
// inside a raw read of it (push), holding the socket's read lock, and a
// close waits until the lock is let go; called by the reader itself, or
// by a goroutine holding the node mutex the reader waits for, it would
// wait for ever. The close wakes the reader, whose read then returns.
func (r *rawIO) close() { go r.nc.Close() }
