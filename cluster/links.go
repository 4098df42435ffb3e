package cluster

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
)

// link is the heartbeat link this node keeps to one peer: it dials,
// writes the heartbeats the core sends (Out.Beat), reads the answers into
// HeardBeat, and reports failures with PeerDown. It redials at once when
// the link breaks, and a heartbeat later when a dial fails.
type link struct {
	n    *Node
	peer string

	mu      sync.Mutex
	pending []byte // the latest heartbeat not yet written
	wake    chan struct{}
	lastErr string // why the last dial failed, logged once per change
}

func newLink(n *Node, peer string) *link {
	return &link{n: n, peer: peer, wake: make(chan struct{}, 1)}
}

// queue hands the link the heartbeat to write next; one not yet written
// is replaced, since only the latest state matters.
func (l *link) queue(b []byte) {
	l.mu.Lock()
	l.pending = append(l.pending[:0], b...)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *link) take() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.pending
	l.pending = nil
	return b
}

func (l *link) run() {
	n := l.n
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		nc, r, err := n.dialPeer(n.ctx, l.peer)
		if err != nil {
			if n.ctx.Err() != nil {
				return
			}
			why := shortErr(err)
			if isAuthErr(err) && why != l.lastErr {
				n.log.Warn("peer link refused", "peer", l.peer, "err", why)
			}
			l.lastErr = why
			n.mu.Lock()
			n.core.PeerDown(n.now(), l.peer, why)
			n.rearmLocked()
			n.mu.Unlock()
			if !sleepCtx(n.ctx, n.cfg.Heartbeat) {
				return
			}
			continue
		}
		l.lastErr = ""
		err = l.serve(nc, r)
		nc.Close()
		if n.ctx.Err() != nil {
			return
		}
		n.mu.Lock()
		n.core.PeerDown(n.now(), l.peer, shortErr(err))
		n.rearmLocked()
		n.mu.Unlock()
	}
}

// serve writes heartbeats and reads their answers until the link fails.
func (l *link) serve(nc net.Conn, r *bufio.Reader) error {
	n := l.n
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-n.ctx.Done():
		case <-stop:
		}
		nc.Close()
	}()
	readErr := make(chan error, 1)
	go func() {
		for {
			nc.SetReadDeadline(time.Now().Add(n.cfg.FailureTimeout))
			line, err := r.ReadSlice('\n')
			if err != nil {
				readErr <- err
				return
			}
			a, err := proto.ParseAnswer(line)
			if err != nil || a.Kind != proto.OpBeat {
				continue
			}
			bt, err := proto.ParseBeatAnswer(a)
			if err != nil {
				n.refusedLog.log(n.log, "malformed heartbeat answer", "peer", l.peer, "err", err.Error())
				continue
			}
			n.mu.Lock()
			n.core.HeardBeat(n.now(), l.peer, bt)
			n.rearmLocked()
			n.mu.Unlock()
		}
	}()
	for {
		select {
		case <-l.wake:
			if b := l.take(); b != nil {
				nc.SetWriteDeadline(time.Now().Add(n.cfg.FailureTimeout))
				if _, err := nc.Write(b); err != nil {
					return err
				}
			}
		case err := <-readErr:
			return err
		case <-n.ctx.Done():
			return n.ctx.Err()
		}
	}
}

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
	replies [][]byte // to write on the stream before it closes (O)
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
		n.rearmLocked()
		n.mu.Unlock()
		if !sleepCtx(f.ctx, n.cfg.Heartbeat) {
			return
		}
	}
}

// flushReplies writes what the core replied on the stream. n.mu is held:
// the lines are short and the socket's buffer takes them.
func (f *followStream) flushReplies() {
	if f.nc != nil {
		for _, b := range f.replies {
			f.nc.SetWriteDeadline(time.Now().Add(f.n.cfg.FailureTimeout))
			f.nc.Write(b)
		}
	}
	f.replies = nil
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
	hello := n.core.StreamOpened(n.now(), f.target)
	f.nc = nc
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		f.flushReplies()
		f.nc = nil
		n.mu.Unlock()
	}()
	if hello == nil {
		return errors.New("no longer following " + f.target)
	}
	if _, err := nc.Write(hello); err != nil {
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
			if err == nil {
				err = n.core.StreamRecord(now, f.target, a)
			}
			if err != nil {
				f.flushReplies()
				n.rearmLocked()
				n.mu.Unlock()
				return err
			}
		}
		f.flushReplies()
		ack := n.core.StreamAck(f.target)
		n.rearmLocked()
		n.mu.Unlock()
		if ack != nil {
			// Acknowledged in a batch: one line however many records.
			nc.SetWriteDeadline(time.Now().Add(n.cfg.FailureTimeout))
			if _, err := nc.Write(ack); err != nil {
				return err
			}
		}
		if f.ctx.Err() != nil {
			return nil
		}
	}
}

// ask carries out Out.Ask: a request to peer on a connection of its own,
// and its one-line answer back to the core.
func (n *Node) ask(id uint64, peer string, b []byte, timeout time.Duration) {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(n.ctx, timeout)
	defer cancel()
	a, err := n.askOnce(ctx, peer, b)
	if errors.Is(err, syscall.ECONNREFUSED) {
		err = core.ErrRefused
	}
	if n.ctx.Err() != nil {
		return
	}
	n.mu.Lock()
	n.core.Answered(n.now(), id, a, err)
	n.rearmLocked()
	n.mu.Unlock()
}

func (n *Node) askOnce(ctx context.Context, peer string, b []byte) (proto.Answer, error) {
	nc, r, err := n.dialPeer(ctx, peer)
	if err != nil {
		return proto.Answer{}, err
	}
	defer nc.Close()
	dl, _ := ctx.Deadline()
	nc.SetDeadline(dl)
	if _, err := nc.Write(b); err != nil {
		return proto.Answer{}, err
	}
	line, err := r.ReadSlice('\n')
	if err != nil {
		return proto.Answer{}, err
	}
	return proto.ParseAnswer(line)
}

func containsNL(b []byte) bool {
	for _, c := range b {
		if c == '\n' {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// isAuthErr reports whether a dial failed past TCP: in TLS or the peer
// secret, which is a configuration to fix rather than a node down.
func isAuthErr(err error) bool {
	var pe *peerAuthError
	return errors.As(err, &pe)
}

func shortErr(err error) string {
	if err == nil {
		return "closed"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused"
	}
	return err.Error()
}
