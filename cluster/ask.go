package cluster

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
)

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
	n.unlock(nil)
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
