package cluster

import "sync"

// A connection's output.
//
// One outWriter per connection owns everything written to it: the bytes
// queued and their count against the limits, the goroutines that write
// them, the reader's pause while its client reads too little, and the
// close. Every connection the node writes more than a heartbeat to has
// one: a client's, a peer's accepted here (its heartbeat link, the
// stream to a standby: conn.go), and the stream a standby follows
// (followstream.go). The heartbeat link this node dials to each peer
// (heartbeats.go) has none: it writes one line per heartbeat from its own
// goroutine, and a heartbeat not yet written is replaced by the next,
// since only the latest state counts, where an outWriter keeps every
// byte. The node hands an outWriter bytes (queue); it writes them to an
// outSocket (outsocket.go): the raw socket on Linux, net.Conn over TLS
// and elsewhere, a fake in the tests.
//
// States, under mu; every change of state is in this file:
//
//   - idle: nothing queued, nobody writing, no writer goroutine; the
//     buffers are back in the pool (buffers.go's idleOut).
//   - promised: bytes queued that a goroutine promised to write after
//     its batch (inline > 0, flushList), or that its reader holds back
//     (holding); the writer goroutine is not woken for them.
//   - queued: bytes queued for the writer goroutine (wr.running, or
//     wr.woken before wr.ready: it starts once ready is called).
//   - writing: one goroutine writes what out held (writing); queue
//     appends to out meanwhile, and nobody else writes.
//   - closed: queue refuses; the writer writes what is left, then
//     closes the socket.
//   - done: the socket is closed, or is being closed by the goroutine
//     that saw the end (wr.done); no writer starts again.
//
// Who writes. One goroutine at a time writes, and one that finds another
// writing leaves what it queued to it: the writer sees it before it lets
// go. The writers are:
//
//   - A goroutine that carried out a Ready (carry.go), once it let go of
//     the node mutex: for every connection the Ready queued bytes for
//     while nobody wrote it or had promised to, it promised to write
//     them (flushList.promise), and it does after the Ready, the other
//     connections' first (a grant is the next holder's wait), then its
//     own reader's. A reader that reads on after a read of several
//     requests holds its own answers back (holdBack) to write them with
//     those of its next reads (writeHeld). Each is one non-blocking
//     write (tryWrite): what the socket does not take goes to the writer
//     goroutine, before what was queued meanwhile, so a client that does
//     not read never blocks the goroutine of another.
//   - The writer goroutine, started when bytes are queued that nobody
//     promised to write (an answer outside any batch, the rest of a
//     direct write, every answer over TLS) and to close. It writes with
//     blocking writes until nothing is queued, and returns: an idle
//     connection holds no goroutine. One runs at a time (wr.running); a
//     signal while it runs (wr.woken) makes it look again before it
//     returns, so no byte is queued after its last look without a writer.
//
// Without direct writes (TLS; systems other than Linux) nobody promises
// to write another connection; a TLS reader holds none back (readloop.go):
// a TLS record cannot be written in part and resumed by another goroutine.
//
// Locks. mu guards the fields below it but holding and flushes, the
// reader's own; at, owner and direct are set once, sock only before ready
// (useSocket). No write happens with mu held, and only the writer
// goroutine's owner.watchRoom takes the node mutex: the rest may be called
// under it or while a Ready is carried out. The waits for room are in
// backpressure.go.
type outWriter struct {
	at    *outShared
	owner outOwner
	// direct: goroutines other than the writer may write sock without
	// blocking (tryWrite): a plain TCP connection on Linux.
	direct bool
	sock   outSocket

	mu     sync.Mutex
	out    []byte
	spare  []byte // the other buffer: out and spare swap on each write
	queued int    // bytes accepted and not yet written: out and the write in flight
	// drained is closed, and forgotten, when queued falls below
	// readResumeAt or the connection closes: every goroutine waiting for
	// room wakes. Made when one is to wait (drainedLocked).
	drained chan struct{}
	// inline counts the goroutines that promised to write after their
	// batch (and the reader holding its answers back).
	inline  int
	writing bool // a goroutine writes: the others leave it to it
	closed  bool // no more bytes are queued
	shed    bool // drop out and spare once idle, grown or not (shedOut)
	// watchDue: watch news waits for everything queued to be written
	// (watchWhenDrained).
	watchDue bool
	// stream: a replication stream, whose snapshot may be larger than
	// a client's limit, and whose reader never pauses.
	stream bool
	wr     writerState

	// The reader's own: its answers are held back (holdBack), and the
	// connections whose answers it writes after its batch.
	holding bool
	flushes flushList
}

// writerState is the writer goroutine's state.
type writerState struct {
	ready   bool // the socket is the one to write to: a writer may start
	running bool // a writer goroutine runs, or is starting
	woken   bool // signalled since the writer last looked
	done    bool // closed, or will be by the goroutine writing: none starts again
}

// holdMax bounds the answers a reader holds back for one write.
const holdMax = 4 << 10

func (w *outWriter) init(at *outShared, owner outOwner, sock outSocket, direct bool) {
	w.at, w.owner, w.sock, w.direct = at, owner, sock, direct
}

// useSocket replaces the socket before the writer is ready: the TLS
// connection over the one accepted.
func (w *outWriter) useSocket(sock outSocket) {
	w.mu.Lock()
	w.sock = sock
	w.mu.Unlock()
}

// ready says the socket is the one to write to: a signal that came
// before starts the writer now.
func (w *outWriter) ready() {
	w.mu.Lock()
	w.wr.ready = true
	start := w.wr.woken && w.wr.wake()
	w.mu.Unlock()
	if start {
		w.startWriter()
	}
}

// isReady reports whether ready was called.
func (w *outWriter) isReady() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wr.ready
}

// queue queues b, and reports false when the connection is closed, or
// closes over a limit now: b is lost. With f, and nobody writing, the
// goroutine of f promises to write b after its batch; else the writer
// goroutine is woken.
func (w *outWriter) queue(b []byte, f *flushList) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	was := len(w.out)
	if cap(w.out) == 0 {
		w.out = outBuf()
	}
	w.out = append(w.out, b...)
	w.account(len(w.out) - was)
	if why, hit := w.overLimit(); why != "" {
		w.closeLocked()
		sock := w.sock
		w.mu.Unlock()
		w.owner.limitClosed(hit, why)
		sock.close()
		w.signal()
		return false
	}
	wake := was == 0 && w.inline == 0 && !f.promise(w)
	w.mu.Unlock()
	if wake {
		w.signal()
	}
	return true
}

// overLimit says why the connection may not queue what it holds, and the
// limit it hit; "" when it may. mu is held.
func (w *outWriter) overLimit() (string, int) {
	if w.stream {
		if w.queued > maxStreamBuffer {
			return "replication stream more than " + byteSize(maxStreamBuffer) + " behind: the standby must sync again", limStreamBuffer
		}
		return "", 0
	}
	lim := w.at.lim
	if w.queued > lim.MaxConnOutput {
		return "more than " + byteSize(int64(lim.MaxConnOutput)) + " of answers unread (lockd --max-conn-output)", limMaxConnOutput
	}
	if w.queued > 64<<10 && w.at.bytes.Load() > lim.MaxOutput {
		return "the node holds more than " + byteSize(lim.MaxOutput) + " of unread answers (lockd --max-output), this connection " + byteSize(int64(w.queued)), limMaxOutput
	}
	return "", 0
}

// account moves the count of unwritten bytes, the connection's and the
// node's, by d, and wakes the waits for room when it falls below
// readResumeAt. mu is held.
func (w *outWriter) account(d int) {
	was := w.queued
	w.queued += d
	w.at.bytes.Add(int64(d))
	if d < 0 && was >= readResumeAt && w.queued < readResumeAt {
		w.wakeDrained()
	}
}

// flush writes everything queued, unless another goroutine is writing
// already (it will see what was added meanwhile). It reports false once
// the connection is finished. inline: the caller is not the writer
// goroutine and must not block (the reader must not block on a client
// that is not reading yet, one that sends a large batch before reading
// any answer, or neither side would read again): it writes what the
// socket takes at once, and leaves the rest to the writer goroutine.
func (w *outWriter) flush(inline bool) bool {
	for {
		w.mu.Lock()
		if w.writing {
			w.mu.Unlock()
			return true
		}
		sock := w.sock
		if len(w.out) == 0 {
			closed := w.closed
			w.wr.done = w.wr.done || closed
			// Watch news waited for everything to be written: the
			// writer asks for it (owner.watchRoom), which takes the
			// node mutex; an inline writer must not wait for it here,
			// and wakes the writer instead.
			pull := w.watchDue && !closed
			if pull && !inline {
				w.watchDue = false
			}
			w.mu.Unlock()
			if closed {
				sock.close()
				// Wake the writer goroutine too: if it deferred to this
				// goroutine's write, it must see the end and return.
				w.signal()
				return false
			}
			switch {
			case pull && inline:
				w.signal()
			case pull:
				w.owner.watchRoom()
			}
			return true
		}
		w.writing = true
		buf := w.out
		w.out = w.spare[:0]
		w.spare = nil
		w.mu.Unlock()
		var n int
		var err error
		if inline {
			n, err = sock.tryWrite(buf)
		} else {
			n, err = sock.write(buf)
		}
		w.mu.Lock()
		w.writing = false
		if inline && err == errWouldBlock {
			if w.wr.done {
				// Closed meanwhile over a limit (closeLocked), which
				// dropped what was queued and starts no writer: the rest
				// is dropped too, and no longer counted.
				w.account(-len(buf))
				w.mu.Unlock()
				return false
			}
			// The rest goes first, before what was queued meanwhile.
			w.out = append(append([]byte(nil), buf[n:]...), w.out...)
			w.account(-n)
			w.mu.Unlock()
			w.signal()
			return true
		}
		w.account(-len(buf))
		if cap(buf) <= 1<<20 {
			w.spare = buf[:0]
		}
		w.idleOut()
		if err != nil {
			w.closeLocked()
			w.mu.Unlock()
			sock.close()
			w.signal()
			return false
		}
		w.mu.Unlock()
	}
}

// isClosed reports whether nothing more can be queued: an answer for the
// connection would be lost.
func (w *outWriter) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// flushAndClose writes what is queued, then closes the socket.
func (w *outWriter) flushAndClose() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		w.wakeDrained()
	}
	w.mu.Unlock()
	// Always signal the writer: whichever goroutine closed first, a
	// writer writes what is queued and closes the socket.
	w.signal()
}

// closeLocked marks the connection finished and drops what it has not
// written; the caller closes the socket. mu is held.
func (w *outWriter) closeLocked() {
	w.account(-len(w.out))
	w.out = nil
	w.closed = true
	w.wr.done = true
	w.wakeDrained()
}

// closeSocket closes the socket at once, whatever is queued.
func (w *outWriter) closeSocket() {
	w.mu.Lock()
	sock := w.sock
	w.mu.Unlock()
	sock.close()
}

// signal wakes the writer goroutine, starting one if none runs.
func (w *outWriter) signal() {
	w.mu.Lock()
	start := w.wr.wake()
	w.mu.Unlock()
	if start {
		w.startWriter()
	}
}

// wake records a signal, and reports whether a writer is to be started.
func (s *writerState) wake() bool {
	s.woken = true
	if s.running || !s.ready || s.done {
		return false
	}
	s.running = true
	return true
}

// startWriter starts the writer goroutine, counted in the node's wait
// group by the goroutine that starts it: one counted itself (a reader,
// the timer loop), or the authentication timeout under the node mutex
// while the connection is not gone, or shutdown before it waits.
func (w *outWriter) startWriter() {
	w.at.wg.Add(1)
	go w.writeLoop()
}

func (w *outWriter) writeLoop() {
	defer w.at.wg.Done()
	for w.woken() {
		if !w.flush(false) {
			w.mu.Lock()
			w.wr.running = false
			w.mu.Unlock()
			return
		}
	}
}

// woken reports whether the writer was signalled since it last looked;
// if not, the writer is no longer running.
func (w *outWriter) woken() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.wr.woken {
		w.wr.running = false
		return false
	}
	w.wr.woken = false
	return true
}

// flushList collects, while a batch is applied under the node mutex, the
// writers the applying goroutine writes after it.
type flushList struct {
	ws []*outWriter
}

// promise makes f write w's bytes after the batch, if no goroutine is
// writing w or has promised to: w's writer goroutine is then not woken.
// w.mu is held.
func (f *flushList) promise(w *outWriter) bool {
	if f == nil || !w.direct || w.writing || w.inline > 0 {
		return false
	}
	w.inline++
	f.ws = append(f.ws, w)
	return true
}

// flush writes what was promised, then forgets the list.
func (f *flushList) flush() {
	for i, w := range f.ws {
		w.endInline()
		f.ws[i] = nil
	}
	f.ws = f.ws[:0]
}

// endInline gives up a promise and writes. The promise goes first:
// whatever is queued after it wakes the writer, whatever was queued
// before it is written here.
func (w *outWriter) endInline() {
	w.mu.Lock()
	w.inline--
	w.mu.Unlock()
	w.flush(true)
}

// holdBack, called by the reader before it applies a batch, holds the
// batch's answers for its own connection back until writeHeld, and
// returns the list of the others' it is to write after the batch.
func (w *outWriter) holdBack() *flushList {
	if !w.holding {
		w.mu.Lock()
		w.inline++
		w.mu.Unlock()
		w.holding = true
	}
	return &w.flushes
}

// afterBatch writes, after a batch, the other connections' answers it
// promised, then its own unless hold: they go with the next batch's.
func (w *outWriter) afterBatch(hold bool) {
	w.flushes.flush()
	if !hold {
		w.writeHeld()
	}
}

// writeHeld writes the answers held back, if any. The reader calls it
// before it waits on the poller or for room, before a key listing's
// scan, and when it stops.
func (w *outWriter) writeHeld() {
	if w.holding {
		w.holding = false
		w.endInline()
	}
}

// holdsMuch reports whether holdMax bytes or more are held back.
func (w *outWriter) holdsMuch() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.out) >= holdMax
}

// setStream marks a replication stream (see stream).
func (w *outWriter) setStream() {
	w.mu.Lock()
	w.stream = true
	w.mu.Unlock()
}

// watchWhenDrained reports whether everything queued is written (or the
// connection closed); if not, the writer calls owner.watchRoom once it
// is. A connection that reads slower than its keys change thus holds
// one state of each at most, never every state in between.
func (w *outWriter) watchWhenDrained() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued == 0 || w.closed {
		return true
	}
	w.watchDue = true
	return false
}
