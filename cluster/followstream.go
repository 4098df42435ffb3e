package cluster

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// followStream is the replication stream this node reads from the active
// the core follows: dial, send the core's hello, feed every record to the
// core, write what the core replies on it; reopen a heartbeat after it
// ends, until the core follows another node or none.
type followStream struct {
	n      *Node
	target string
	ctx    context.Context
	cancel context.CancelFunc

	// Guarded by n.mu.
	replies [][]byte // what the core replied on the stream, to write
	ended   error    // the core ended the stream (Out.StreamEnd)
	nc      net.Conn
}

func newFollowStream(n *Node, target string) *followStream {
	ctx, cancel := context.WithCancel(n.ctx)
	return &followStream{n: n, target: target, ctx: ctx, cancel: cancel}
}

// stop ends the stream once what was replied on it is written. n.mu is held.
func (f *followStream) stop() { f.cancel() }

// reply queues b to be written on the stream. n.mu is held.
func (f *followStream) reply(b []byte) { f.replies = append(f.replies, b) }

func (f *followStream) run() {
	n := f.n
	defer n.wg.Done()
	for f.ctx.Err() == nil {
		err := f.once()
		n.mu.Lock()
		f.flushReplies()
		n.core.StreamEnded(n.now(), f.target, err)
		n.stepLocked()
		n.mu.Unlock()
		if !sleepCtx(f.ctx, n.cfg.Heartbeat) {
			return
		}
	}
}

// end records why the core ended the stream: the reader feeds it no
// more lines. n.mu is held.
func (f *followStream) end(err error) {
	if f.ended == nil {
		f.ended = err
	}
}

// flushReplies writes what the core replied on the stream, in the order
// it replied, and returns the first write error. n.mu is held: the lines
// are short (a hello, an acknowledgement per batch, a confirmation) and
// the socket's buffer takes them.
func (f *followStream) flushReplies() error {
	var first error
	if f.nc != nil {
		for _, b := range f.replies {
			f.nc.SetWriteDeadline(time.Now().Add(f.n.cfg.FailureTimeout))
			if _, err := f.nc.Write(b); err != nil && first == nil {
				first = err
			}
		}
	}
	f.replies = nil
	return first
}

func (f *followStream) once() error {
	n := f.n
	nc, r, err := n.dialPeer(f.ctx, f.target)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(f.ctx, func() { nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	n.mu.Lock()
	f.nc, f.ended = nc, nil
	n.core.StreamOpened(n.now(), f.target)
	n.stepLocked()
	err = f.flushReplies()
	ended := f.ended
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		f.flushReplies()
		f.nc = nil
		n.mu.Unlock()
	}()
	if ended != nil {
		return ended
	}
	if err != nil {
		return err
	}
	lines := make([][]byte, 0, 256)
	for {
		// Silence longer than the failure timeout means the active is
		// gone even if the socket is not (the active writes a W mark
		// every heartbeat).
		nc.SetReadDeadline(time.Now().Add(n.cfg.FailureTimeout))
		line, err := r.ReadSlice('\n')
		if err != nil {
			if f.ctx.Err() != nil {
				return errors.New("no longer following " + f.target)
			}
			return err
		}
		lines = append(lines[:0], append([]byte(nil), line...))
		for len(lines) < cap(lines) && r.Buffered() > 0 {
			buf, _ := r.Peek(r.Buffered())
			if !containsNL(buf) {
				break
			}
			l, _ := r.ReadSlice('\n')
			lines = append(lines, append([]byte(nil), l...))
		}
		n.mu.Lock()
		now := n.now()
		for _, l := range lines {
			a, err := proto.ParseAnswer(l)
			if err != nil {
				f.end(err)
				break
			}
			n.core.StreamRecord(now, f.target, a)
			n.stepLocked()
			if f.ended != nil {
				break
			}
		}
		if f.ended == nil {
			// Acknowledged in a batch: one line however many records.
			n.core.StreamAck(now, f.target)
			n.stepLocked()
		}
		err = f.flushReplies()
		ended := f.ended
		n.mu.Unlock()
		if ended != nil {
			return ended
		}
		if err != nil {
			return err
		}
		if f.ctx.Err() != nil {
			return nil
		}
	}
}

func containsNL(b []byte) bool {
	for _, c := range b {
		if c == '\n' {
			return true
		}
	}
	return false
}
