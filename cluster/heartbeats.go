package cluster

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

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
			if isAuthErr(err) {
				// It answered: it runs, and may serve.
				n.core.PeerDenied(n.now(), l.peer, why)
			} else {
				n.core.PeerDown(n.now(), l.peer, why)
			}
			n.unlock(nil)
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
		n.unlock(nil)
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
			n.unlock(nil)
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

func shortErr(err error) string {
	if err == nil {
		return "closed"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused"
	}
	return err.Error()
}
