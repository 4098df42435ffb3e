package cluster

import (
	"bufio"
	"bytes"
	"io"
	"sync"

	"github.com/lockd-io/lockd/proto"
)

// A connection's buffers are taken only while it has something to read
// or to write, from pools the node's connections share: an idle
// connection holds none. A buffer of each kind kept per connection would
// be most of what an idle client costs the node.

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
// bounds' (rest.go): a timeout is left to them, on the next fill.
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
// the stack of every reader blocked in a read (rest.go).
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

// outBufSize is the size of an output buffer of the pool: the answers to
// a full batch of requests (maxBatch) fit.
const outBufSize = 8 << 10

var outBufs = sync.Pool{New: func() any { return new([outBufSize]byte) }}

// outBuf returns an empty output buffer of the pool.
func outBuf() []byte { return outBufs.Get().(*[outBufSize]byte)[:0] }

// idleOut gives the buffers back to the pool once nothing is queued nor
// being written. A buffer that grew past the pool's size stays while
// the connection is busy (it needed it, and would grow it again), until
// its reader rests (shedOut). mu is held.
func (w *outWriter) idleOut() {
	if len(w.out) > 0 || w.writing {
		return
	}
	w.out = putOut(w.out)
	w.spare = putOut(w.spare)
	if w.shed {
		w.shed = false
		if shed := cap(w.out) + cap(w.spare); shed > 0 {
			w.at.shed.Add(uint64(shed))
			w.out, w.spare = nil, nil
		}
	}
}

// shedOut drops the buffers a backlog grew, as the reader rests: an idle
// connection holds none, however many answers it once had waiting (over
// TLS, where every answer is queued, a backlog grows them to a MiB or
// more). If a write is in flight, its writer drops them once it is done.
func (w *outWriter) shedOut() {
	w.mu.Lock()
	w.shed = true
	w.idleOut()
	w.mu.Unlock()
}

// putOut returns b's array to the pool if it is one of the pool's size,
// and what the connection keeps of b: nil, or b.
func putOut(b []byte) []byte {
	if cap(b) != outBufSize {
		return b
	}
	outBufs.Put((*[outBufSize]byte)(b[:outBufSize]))
	return nil
}
