//go:build linux

package cluster

import (
	"syscall"
	"unsafe"
)

// newRawIO prepares raw reads and writes on rc.
func newRawIO(rc syscall.RawConn) *rawIO {
	r := &rawIO{conn: rc}
	r.rd.fn = func(fd uintptr) bool {
		r.rd.n, r.rd.err = rawRead(fd, r.rd.buf)
		return r.rd.err != syscall.EAGAIN // EAGAIN: wait for the poller
	}
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
// the P to another thread when the write is slow, which on the 2-core
// benchmark machine costs more than the write itself.
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
