package cluster

import (
	"context"
	"errors"
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
	// out writes the open stream, nil between two: the replies are
	// queued as the Ready that holds them is carried out, and written
	// once it is, as a connection's answers are (outwriter.go).
	out *outWriter
	// ended: why the core ended the stream (ActStreamEnd), or why its
	// replies could not be queued: the reader feeds it no more lines.
	ended error
	// flushes: the writers the stream's reader writes after the records
	// it fed the core (its own replies among them).
	flushes flushList
}

func newFollowStream(n *Node, target string) *followStream {
	ctx, cancel := context.WithCancel(n.ctx)
	return &followStream{n: n, target: target, ctx: ctx, cancel: cancel}
}

// stop ends the stream.
func (f *followStream) stop() { f.cancel() }

// reply queues b, what the core replied on the stream (a hello, an
// acknowledgement per batch, a handoff's confirmation), as the Ready that
// holds it is carried out, in the order the core replied; direct, when
// the goroutine carrying it out writes after it.
func (f *followStream) reply(b []byte, direct *flushList) {
	f.mu.Lock()
	w := f.out
	if f.ended != nil {
		w = nil
	}
	f.mu.Unlock()
	if w != nil && !w.queue(b, direct) {
		f.end(errors.New("stream to " + f.target + " closed"))
	}
}

// limitClosed: the active read too little of the replies.
func (f *followStream) limitClosed(hit int, why string) {
	f.n.limitHit(hit)
	f.end(errors.New(why))
}

// watchRoom: a stream carries no watch news.
func (f *followStream) watchRoom() {}

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
	// The replies are written as a connection's answers are: by this
	// reader after the records it fed (f.unlock), or by the writer
	// goroutine; none while a Ready is carried out. At the end the
	// writer writes what is left (a handoff's confirmation), then closes.
	w := &outWriter{}
	sock, direct := socketOf(nc, rawOf(nc), false)
	w.init(&n.output, f, sock, direct)
	w.ready()
	f.mu.Lock()
	f.out, f.ended = w, nil
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.out = nil
		f.mu.Unlock()
		w.flushAndClose()
	}()
	stop := context.AfterFunc(f.ctx, func() { nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	n.mu.Lock()
	n.core.StreamOpened(n.now(), f.target)
	f.unlock()
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
				f.unlock()
				return err
			}
			// A record the core cannot apply ends the stream: it
			// applies none after it.
			n.core.StreamRecord(now, f.target, a)
		}
		// Acknowledged in a batch: one line however many records.
		n.core.StreamAck(now, f.target)
		f.unlock()
		if err := f.endedBy(); err != nil {
			return err
		}
		if f.ctx.Err() != nil {
			return nil
		}
	}
}

// unlock lets go of the node mutex, carries out what the stream's
// events asked, and writes the replies (and any answers) they queued.
func (f *followStream) unlock() {
	f.n.unlock(&carry{direct: &f.flushes})
	f.flushes.flush()
}

func containsNL(b []byte) bool {
	for _, c := range b {
		if c == '\n' {
			return true
		}
	}
	return false
}
