package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
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

	mu sync.Mutex
	nc net.Conn // the open stream, nil between two
	// ended: why the core ended the stream (ActStreamEnd), or why a
	// reply could not be written: the reader feeds it no more lines.
	ended error
}

func newFollowStream(n *Node, target string) *followStream {
	ctx, cancel := context.WithCancel(n.ctx)
	return &followStream{n: n, target: target, ctx: ctx, cancel: cancel}
}

// stop ends the stream.
func (f *followStream) stop() { f.cancel() }

// reply writes b, what the core replied on the stream (a hello, an
// acknowledgement per batch, a handoff's confirmation), as the Ready that
// holds it is carried out, in the order the core replied. The lines are
// short and the socket's buffer takes them.
func (f *followStream) reply(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nc == nil || f.ended != nil {
		return
	}
	f.nc.SetWriteDeadline(time.Now().Add(f.n.cfg.FailureTimeout))
	if _, err := f.nc.Write(b); err != nil {
		f.ended = err
	}
}

// end records why the core ended the stream.
func (f *followStream) end(err error) {
	f.mu.Lock()
	if f.ended == nil {
		f.ended = err
	}
	f.mu.Unlock()
}

// endedBy reports why the stream ended, if it did.
func (f *followStream) endedBy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

func (f *followStream) run() {
	n := f.n
	defer n.wg.Done()
	for f.ctx.Err() == nil {
		err := f.once()
		n.mu.Lock()
		n.core.StreamEnded(n.now(), f.target, err)
		n.unlock(nil)
		if !sleepCtx(f.ctx, n.cfg.Heartbeat) {
			return
		}
	}
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
	f.mu.Lock()
	f.nc, f.ended = nc, nil
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.nc = nil
		f.mu.Unlock()
	}()
	n.mu.Lock()
	n.core.StreamOpened(n.now(), f.target)
	n.unlock(nil)
	if err := f.endedBy(); err != nil {
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
				n.unlock(nil)
				return err
			}
			// A record the core cannot apply ends the stream: it
			// applies none after it.
			n.core.StreamRecord(now, f.target, a)
		}
		// Acknowledged in a batch: one line however many records.
		n.core.StreamAck(now, f.target)
		n.unlock(nil)
		if err := f.endedBy(); err != nil {
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
