//go:build linux

package cluster

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// newRawIO prepares raw reads and writes on rc, nc's socket.
func newRawIO(nc net.Conn, rc syscall.RawConn) *rawIO {
	r := &rawIO{nc: nc, conn: rc}
	r.wr.fn = func(fd uintptr) bool {
		r.wr.n, r.wr.err = rawWrite(fd, r.wr.buf)
		if r.wr.err == syscall.EAGAIN {
			r.wr.err = errWouldBlock
		}
		return true // never wait: the rest is the writer goroutine's
	}
	return r
}

// rawRead is read(2) without the scheduler's syscall bookkeeping, as
// rawWrite: the socket is non-blocking, so it returns at once, EAGAIN
// when there is nothing to read.
func rawRead(fd uintptr, b []byte) (int, error) { return rawRW(syscall.SYS_READ, fd, b) }

// rawWrite is write(2) on a non-blocking socket without telling the
// scheduler: it cannot block, and entering a syscall the scheduler's way
// wakes its monitor thread when the process was idle and lets it hand
// the P to another thread when the write is slow, which on a small
// machine costs more than the write itself.
func rawWrite(fd uintptr, b []byte) (int, error) { return rawRW(syscall.SYS_WRITE, fd, b) }

// rawRW makes the read or write system call trap on fd with b, again
// when a signal interrupted it.
func rawRW(trap, fd uintptr, b []byte) (int, error) {
	for {
		r, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		switch e {
		case 0:
			return int(r), nil
		case syscall.EINTR:
			continue
		}
		return 0, e
	}
}

// push reads c's socket with raw reads inside one RawRead call, and
// applies each read's whole lines before it reads again.
//
// A read that did not fill its buffer emptied the socket, and whatever
// arrives after it makes the poller report the socket ready (it is edge
// triggered). So after a read of one request the reader waits on the
// poller at once, where a reader that returns from RawRead must read
// once more and see EAGAIN first: each new RawRead call forgets the
// readiness the poller noted before it. For a client that sends a
// request and waits for its answer that empty read would be a third of
// its system calls. After a read of several requests the reader reads again
// first: a pipelining client has most often sent more meanwhile, and a
// read is cheaper than going to sleep and being woken; the answers of
// such reads go out together, in one write before the reader waits
// (outWriter.holdBack).
//
// While it is inside RawRead the reader holds the socket's read lock,
// and a close of the socket waits for that lock: rawIO.close closes from
// a goroutine of its own.
func (b *batcher) push() bool {
	c, dr, r := b.c, b.dr, b.dr.br
	b.hold = true
	// The lines the wait for the first bytes (await) left buffered.
	ok := b.drain()
	c.out.writeHeld()
	if !ok {
		return false
	}
	fn := b.readable
	for {
		if err := r.err; err != nil {
			r.err = nil
			return b.end(err, r.pending())
		}
		dr.arm()
		b.stopped = false
		err := c.raw.conn.Read(fn)
		switch {
		case b.stopped:
			return b.ended
		case isTimeout(err):
			if err := dr.expired(); err != nil {
				return b.end(err, r.pending())
			}
		default:
			return b.end(err, r.pending())
		}
	}
}

// readable is push's function for RawRead: it reads until the socket is
// empty, applying what it read, and reports false to wait for the poller
// or true when the reader is to stop (b.stopped, b.ended).
func (b *batcher) readable(fd uintptr) bool {
	r := b.dr.br
	for {
		p := r.space()
		if len(p) == 0 { // drain closes a connection whose buffer fills
			b.stop(b.tooLong())
			return true
		}
		n, err := rawRead(fd, p)
		if err == syscall.EAGAIN {
			b.c.raw.empty.Add(1)
			b.c.out.writeHeld()
			b.dr.arm()
			return false
		}
		if err == nil && n == 0 {
			err = io.EOF
		}
		if err != nil {
			b.stop(b.end(err, r.pending())) // end writes what is held
			return true
		}
		r.commit(p, n)
		lines := b.lines
		if !b.drain() {
			b.stop(false) // serve's done writes what is held
			return true
		}
		// A client that sent one request waits for its answer: nothing
		// more comes until it has it. One that sent several pipelines,
		// and has likely sent more while they were applied: read again
		// rather than go to sleep and be woken for them, and write the
		// answers of both reads together.
		if n < len(p) && b.lines-lines <= 1 {
			b.c.out.writeHeld()
			b.dr.arm()
			return false
		}
	}
}

// unread is how many bytes wait in the socket, not read yet (FIONREAD);
// 0 when that cannot be told.
func (r *rawIO) unread() int {
	n := 0
	r.conn.Control(func(fd uintptr) {
		var v int32
		if _, _, e := syscall.RawSyscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v))); e == 0 {
			n = int(v)
		}
	})
	return n
}
