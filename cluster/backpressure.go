package cluster

import "context"

// Back-pressure: the waits for a connection's writer to write what it
// holds. A connection whose unread answers pass readPauseAt is not read
// again until they fall below readResumeAt, so a client that sends
// without reading cannot make the node queue more; a producer that must
// not outrun its connection (a snapshot) waits for room the same way.
const (
	readPauseAt  = 1 << 20
	readResumeAt = 256 << 10
)

// waitDrained holds the reader while its client has readPauseAt bytes
// or more unread, until they fall below readResumeAt: a client that
// sends and does not read stops being read, instead of making the node
// queue without end. A stream's backlog is the active's doing, not the
// standby's: its reader never pauses. It reports false once the
// connection is finished.
func (w *outWriter) waitDrained(ctx context.Context) bool {
	for {
		w.mu.Lock()
		q, closed, stream := w.queued, w.closed, w.stream
		var ch chan struct{}
		if !closed && q >= readPauseAt && !stream {
			ch = w.drainedLocked()
		}
		w.mu.Unlock()
		switch {
		case closed:
			return false
		case q < readPauseAt || stream:
			return true
		}
		w.writeHeld()
		select {
		case <-ch:
			w.mu.Lock()
			q, closed = w.queued, w.closed
			w.mu.Unlock()
			if closed {
				return false
			}
			if q < readResumeAt {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// waitRoom waits until less than readResumeAt bytes are unwritten, for a
// producer that must not outrun the connection (a snapshot being sent).
// It reports false once the connection is finished.
func (w *outWriter) waitRoom(ctx context.Context) bool {
	for {
		w.mu.Lock()
		q, closed := w.queued, w.closed
		var ch chan struct{}
		if !closed && q >= readResumeAt {
			ch = w.drainedLocked()
		}
		w.mu.Unlock()
		if closed {
			return false
		}
		if q < readResumeAt {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// wakeDrained wakes every goroutine waiting for room. mu is held.
func (w *outWriter) wakeDrained() {
	if w.drained != nil {
		close(w.drained)
		w.drained = nil
	}
}

// drainedLocked returns the channel the next wakeDrained closes, made
// now if none is: most connections never wait for room, and a channel
// made for each would weigh on every idle connection. mu is held.
func (w *outWriter) drainedLocked() chan struct{} {
	if w.drained == nil {
		w.drained = make(chan struct{})
	}
	return w.drained
}
