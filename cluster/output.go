package cluster

import (
	"strconv"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
)

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
	if why, hit := c.overLimit(); why != "" {
		c.closeLocked()
		c.outMu.Unlock()
		c.n.limitHit(hit)
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

// send queues the line fn writes: for the shell's own answers (limits,
// authentication); the core's come through write.
func (c *conn) send(fn func([]byte) []byte) { c.write(fn(nil)) }

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
			// Watch news waited for c to write what it had: the writer
			// asks the core for it (WatchRoom), a reader leaves it to
			// the writer, as it must not wait for the node mutex here.
			pull := c.watchDue && !closed
			if pull && !inline {
				c.watchDue = false
			}
			c.outMu.Unlock()
			if closed {
				c.closeSocket()
				// Wake the writer goroutine too: if it deferred to this
				// goroutine's write, it must see the end and return.
				c.signal()
				return false
			}
			switch {
			case pull && inline:
				c.signal()
			case pull:
				c.n.watchSlice(c)
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

// overLimit says why c may not queue what it holds, and the limit it
// hit; "" when it may. c.outMu is held.
func (c *conn) overLimit() (string, int) {
	lim := &c.n.cfg.Limits
	if c.stream {
		if c.queued > maxStreamBuffer {
			return "replication stream more than " + byteSize(maxStreamBuffer) + " behind: the standby must sync again", limStreamBuffer
		}
		return "", 0
	}
	if c.queued > lim.MaxConnOutput {
		return "more than " + byteSize(int64(lim.MaxConnOutput)) + " of answers unread (lockd --max-conn-output)", limMaxConnOutput
	}
	if c.queued > 64<<10 && c.n.outBytes.Load() > lim.MaxOutput {
		return "the node holds more than " + byteSize(lim.MaxOutput) + " of unread answers (lockd --max-output), this connection " + byteSize(int64(c.queued)), limMaxOutput
	}
	return "", 0
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

// byteSize writes a size the way the flags take it: 8MiB, 512MiB, 1GiB.
func byteSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return strconv.FormatInt(b>>30, 10) + "GiB"
	case b >= 1<<20:
		return strconv.FormatInt(b>>20, 10) + "MiB"
	case b >= 1<<10:
		return strconv.FormatInt(b>>10, 10) + "KiB"
	}
	return strconv.FormatInt(b, 10) + "B"
}

// watchDrain carries out ActWatchDrain: c was sent watch news, and the
// core is told (WatchSlice) once c has written what it holds, to send the
// latest state of what changed meanwhile. A connection that reads slower
// than its keys change thus holds one state of each at most, never every
// state in between. applyMu is held.
func (n *Node) watchDrain(id core.ConnID) {
	c := n.conns[uint64(id)]
	if c == nil {
		return
	}
	c.outMu.Lock()
	drained := c.queued == 0 || c.closed
	if !drained {
		c.watchDue = true
	}
	c.outMu.Unlock()
	if drained {
		n.feedback = append(n.feedback, feedback{watch: c})
	}
}

// watchSlice has the core send c the watch news that waited for room.
func (n *Node) watchSlice(c *conn) {
	n.mu.Lock()
	if !c.gone {
		n.core.WatchSlice(n.now(), core.ConnID(c.id))
	}
	n.unlock(nil)
}
