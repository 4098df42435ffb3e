package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// breaks holds what the rules broken on purpose (LOCKD_GODRIVER_BREAK)
// need beyond the client's Options. The Go client cannot be made to
// break some rules through its Options (it matches by (op, key), moves
// acquires, follows M, goes round-robin whatever they say), so for those
// the driver breaks them on the client's behalf, in what it tells the
// harness and which connections it sends on, as a client that breaks
// the rule would behave towards its caller.
type breaks struct {
	name string

	// fifo: the ids of the calls to a node still unanswered, oldest first.
	fifoMu sync.Mutex
	fifo   []int64

	// nomove: the acquires in flight, cancelled when a connection drops.
	moveMu   sync.Mutex
	inflight map[*inflightCall]struct{}

	// noroundrobin: the idle client that keeps the other connections.
	ballast *client.Client

	// drops counts the connections the client reported dropped (under
	// nomove and lostrelease).
	drops atomic.Int64
}

// wait is the wait an acquire is sent with: under impatient, a second
// instead of forever, which runs out in an outage of a few seconds.
func (b *breaks) wait(d time.Duration) time.Duration {
	if b.name == "impatient" && d == 0 {
		return time.Second
	}
	return d
}

type inflightCall struct {
	cancel  context.CancelFunc
	dropped bool
}

// nodeCalls are the commands that are one request to a node, whose
// results fifo hands out in arrival order.
var nodeCalls = []string{"acquire", "try", "release", "renew", "queue", "keys"}

// fifoStart notes a call to a node as sent.
func (b *breaks) fifoStart(cmd command) {
	if b.name != "fifo" || !slices.Contains(nodeCalls, cmd.Cmd) {
		return
	}
	b.fifoMu.Lock()
	b.fifo = append(b.fifo, cmd.ID)
	b.fifoMu.Unlock()
}

// fifoID is the id a call's result is written under: under fifo, the
// oldest call still unanswered, whatever its op and key.
func (b *breaks) fifoID(cmd command) int64 {
	if b.name != "fifo" || !slices.Contains(nodeCalls, cmd.Cmd) {
		return cmd.ID
	}
	b.fifoMu.Lock()
	defer b.fifoMu.Unlock()
	if len(b.fifo) == 0 {
		return cmd.ID
	}
	id := b.fifo[0]
	b.fifo = b.fifo[1:]
	return id
}

// acquireCtx is the context of an acquire; under nomove, a dropped
// connection cancels it before the client can move it, and done says
// whether it did.
func (b *breaks) acquireCtx(ctx context.Context) (context.Context, func() bool) {
	if b.name != "nomove" {
		return ctx, func() bool { return false }
	}
	ctx, cancel := context.WithCancel(ctx)
	ic := &inflightCall{cancel: cancel}
	b.moveMu.Lock()
	b.inflight[ic] = struct{}{}
	b.moveMu.Unlock()
	return ctx, func() bool {
		b.moveMu.Lock()
		defer b.moveMu.Unlock()
		delete(b.inflight, ic)
		cancel()
		return ic.dropped
	}
}

// dropHandler is the client's Logger under nomove: the client logs a
// dropped connection before it fails the calls that were on it over to
// another connection, so cancelling them here keeps them from moving.
type dropHandler struct{ b *breaks }

func (h dropHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h dropHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h dropHandler) WithGroup(string) slog.Handler            { return h }

func (h dropHandler) Handle(_ context.Context, r slog.Record) error {
	switch r.Message {
	case "lockd connection lost", "lockd node stopped answering; connection dropped":
		h.b.drops.Add(1)
		h.b.moveMu.Lock()
		for ic := range h.b.inflight {
			ic.dropped = true
			ic.cancel()
		}
		h.b.moveMu.Unlock()
	}
	return nil
}

// errBroken is what an acquire broken on purpose fails with.
func errBroken(b, why string, kind error) error {
	return fmt.Errorf("LOCKD_GODRIVER_BREAK=%s: %s: %w", b, why, kind)
}

// notFollowed says, under nofollow, that an acquire served by a node
// the client learnt from an M (one not among the addresses it was
// given) fails instead, as a client that does not follow M fails: its
// grant is released.
func (b *breaks) notFollowed(c *client.Client, given []string, key string, token uint64) error {
	if b.name != "nofollow" {
		return nil
	}
	active := c.Active()
	if active == "" || slices.Contains(given, active) {
		return nil
	}
	c.ReleaseToken(context.Background(), key, token)
	return errBroken(b.name, "a redirect is not followed", &client.ServerError{Op: proto.OpAcquire, Key: key, Msg: "not the active node: the active is at " + active})
}

// apply changes opts for a break that the client's Options can express,
// and sets up what the others need. It returns an error for an unknown
// name.
func (b *breaks) apply(opts *client.Options, addrs []string) error {
	switch b.name {
	case "":
	case "conns1":
		opts.ConnsPerAddr = 1
	case "norelease":
		opts.ReleaseFor = time.Nanosecond
	case "noredial":
		opts.Redial = time.Minute
	case "deaf":
		opts.FailureTimeout = time.Minute
	case "fifo", "nofollow", "nostale", "impatient", "textstatus":
	case "anylease":
		// A failure timeout so short that any lease is long enough.
		opts.FailureTimeout = 10 * time.Millisecond
	case "quickdisagree":
		// A failure timeout so short that three of them end before ten
		// redirects do: the client gives up after ten, as a client that
		// counts redirects and does not time them would.
		opts.FailureTimeout = 10 * time.Millisecond
	case "lostrelease":
		opts.Logger = slog.New(dropHandler{b})
	case "nomove":
		b.inflight = map[*inflightCall]struct{}{}
		opts.Logger = slog.New(dropHandler{b})
	case "noroundrobin":
		// Every call over one connection; an idle client beside it keeps
		// the others the client was asked for, so the node still sees them.
		n := opts.ConnsPerAddr
		if n == 0 && len(addrs) == 1 {
			n = 2
		}
		opts.ConnsPerAddr = 1
		if n > 1 {
			bo := *opts
			bo.ConnsPerAddr = n - 1
			c, err := client.New(addrs, bo)
			if err != nil {
				return err
			}
			b.ballast = c
		}
	default:
		return invalidError{"LOCKD_GODRIVER_BREAK=" + strconv.Quote(b.name) + " names no rule; use conns1, norelease, noredial, deaf, fifo, nomove, nofollow, noroundrobin, lostrelease, nostale, impatient, anylease, quickdisagree or textstatus"}
	}
	return nil
}

func (b *breaks) close() {
	if b.ballast != nil {
		b.ballast.Close()
	}
}
