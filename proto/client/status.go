package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// statusTimeout bounds Status when ctx has no deadline of its own.
const statusTimeout = 5 * time.Second

// Status asks the node at addr how it sees itself and the cluster. It
// needs no Client: it dials addr, sends S, reads the answer and closes the
// connection. Any node answers, active or not. When ctx has no deadline,
// Status gives up after 5 seconds.
func Status(ctx context.Context, addr string) (proto.Status, error) {
	return StatusWith(ctx, addr, Options{})
}

// StatusWith is Status over a connection set up as opts says (TLS,
// secret, dial timeout); the rest of opts is unused.
func StatusWith(ctx context.Context, addr string, opts Options) (proto.Status, error) {
	addr = strings.TrimSpace(addr)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return proto.Status{}, fmt.Errorf("status: address %q is not HOST:PORT (%v); write it like 127.0.0.1:7070", addr, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, statusTimeout)
		defer cancel()
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = defaultDialTimeout
	}
	st, err := status(ctx, addr, &opts)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrNoAnswer) {
		return st, fmt.Errorf("status %s: %w", addr, ctx.Err())
	}
	return st, err
}

func status(ctx context.Context, addr string, opts *Options) (proto.Status, error) {
	d := net.Dialer{Timeout: opts.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return proto.Status{}, fmt.Errorf("status: %w", unavailable([]string{addr}, err))
	}
	nc, r, err := secure(ctx, nc, addr, opts)
	if err != nil {
		return proto.Status{}, fmt.Errorf("status: %w", unavailable([]string{addr}, err))
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := nc.Write([]byte("S " + proto.WordNone + "\n")); err != nil {
		return proto.Status{}, fmt.Errorf("status: %w", unavailable([]string{addr}, err))
	}
	line, err := r.ReadSlice('\n')
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != context.Canceled {
		return proto.Status{}, fmt.Errorf("status %s: %w: it took the connection, but answered nothing in time (%w)", addr, ErrNoAnswer, err)
	}
	if err != nil {
		return proto.Status{}, fmt.Errorf("status %s: no answer (%w); check that a lockd node, not another service, listens there", addr, err)
	}
	a, err := proto.ParseAnswer(line)
	if err != nil {
		return proto.Status{}, fmt.Errorf("status %s: %w: %w; check that a lockd node, not another service, listens there", addr, ErrNotLockd, err)
	}
	switch a.Kind {
	case proto.OpStatus:
		st, err := proto.ParseStatus(a)
		if err != nil {
			return st, fmt.Errorf("status %s: %w; check that client and server versions match", addr, err)
		}
		return st, nil
	case proto.KindError:
		return proto.Status{}, serverError(a)
	}
	return proto.Status{}, fmt.Errorf("status %s: %w: answered %q, not a status; check that a lockd node listens there", addr, ErrNotLockd, a.Kind.String()+" "+a.Key)
}
