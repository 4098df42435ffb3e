package cluster

import (
	"sync"
)

// A connection's buffers are taken only while it has something to read
// or to write, from pools the node's connections share: an idle
// connection holds none. A buffer of each kind kept per connection would
// be most of what an idle client costs the node. The read side's are
// with the reader (readloop.go); here are the output buffers.

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
