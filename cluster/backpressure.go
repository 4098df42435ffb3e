package cluster

// Read-side backpressure: a connection whose unread answers pass
// readPauseAt is not read again until they fall below readResumeAt, so a
// client that sends without reading cannot make the node queue more.
const (
	readPauseAt  = 1 << 20
	readResumeAt = 256 << 10
)

// waitDrained holds the reader while the client has more than
// readPauseAt bytes of answers unread, until they fall below
// readResumeAt: a client that sends and does not read stops being read,
// instead of making the node queue without end. It reports false once
// the connection is finished.
func (c *conn) waitDrained() bool {
	for {
		c.outMu.Lock()
		q, closed, stream := c.queued, c.closed, c.stream
		var ch chan struct{}
		if !closed && q >= readPauseAt && !stream {
			ch = c.drainedLocked()
		}
		c.outMu.Unlock()
		switch {
		case closed:
			return false
		case q < readPauseAt || stream:
			// A stream's backlog is the active's doing, not the
			// standby's: its reader never pauses.
			return true
		}
		c.writeHeld()
		select {
		case <-ch:
			c.outMu.Lock()
			q, closed = c.queued, c.closed
			c.outMu.Unlock()
			if closed {
				return false
			}
			if q < readResumeAt {
				return true
			}
		case <-c.n.ctx.Done():
			return false
		}
	}
}

// waitRoom waits until c has less than readResumeAt bytes unsent, for a
// producer that must not outrun the connection (a snapshot being sent).
// It reports false once the connection is finished.
func (c *conn) waitRoom() bool {
	for {
		c.outMu.Lock()
		q, closed := c.queued, c.closed
		var ch chan struct{}
		if !closed && q >= readResumeAt {
			ch = c.drainedLocked()
		}
		c.outMu.Unlock()
		if closed {
			return false
		}
		if q < readResumeAt {
			return true
		}
		select {
		case <-ch:
		case <-c.n.ctx.Done():
			return false
		}
	}
}

// wakeDrained wakes every goroutine waiting for c to drain. c.outMu is held.
func (c *conn) wakeDrained() {
	if c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
}

// drainedLocked returns the channel the next wakeDrained closes, made
// now if none is: most connections never wait for room, and a channel
// made for each would weigh on every idle connection. c.outMu is held.
func (c *conn) drainedLocked() chan struct{} {
	if c.drained == nil {
		c.drained = make(chan struct{})
	}
	return c.drained
}

// account moves c's count of unsent bytes, and the node's, by d.
// c.outMu is held.
func (c *conn) account(d int) {
	was := c.queued
	c.queued += d
	c.n.outBytes.Add(int64(d))
	if d < 0 && was >= readResumeAt && c.queued < readResumeAt {
		c.wakeDrained()
	}
}
