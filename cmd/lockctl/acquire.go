package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// acquireCommand takes a lock once and prints its token. The lock outlives
// lockctl: `lockctl release` frees it, or lockd does when the lease ends.
type acquireCommand struct {
	lockFlags
}

func (c *acquireCommand) Command() *cli.Command {
	return &cli.Command{
		Name:  "acquire",
		Usage: "take a lock and print its fencing token",
		UsageText: "lockctl acquire --key KEY [--key KEY]... [--shared] [--lease 30s]\n" +
			"       [-w DURATION | -n] [--limit N]",
		Description: "Waits in the key's FIFO queue until the lock is granted, prints the token\n" +
			"(a number that grows with every grant) and exits, leaving the lock held.\n" +
			"Release it with that token, or let the lease end. With --json it prints\n" +
			"{\"key\":...,\"token\":\"...\",\"lease_seconds\":...,\"limit\":...,\"id\":...}: in JSON\n" +
			"a token is a string of decimal digits, because a token is a 64-bit number\n" +
			"that jq 1.6 and JavaScript, reading numbers as doubles, would round;\n" +
			"--token takes it back with or without its quotes. Several --key print one\n" +
			"token a line, in the order of --key (with --json, an array of objects).\n\n" +
			waitHelp + limitHelp + keysHelp +
			"Examples:\n" +
			"   token=$(lockctl acquire --key deploy --lease 5m --wait 1m) || exit\n" +
			"   ./deploy.sh --fencing-token \"$token\"\n" +
			"   lockctl release --key deploy --token \"$token\"\n" +
			"   token=$(lockctl acquire --key builds --limit 3)   # one of 3 places\n\n" +
			exitCodesHelp(helpExitOK, helpExitFailed, helpExitUsage, helpExitTimeout,
				helpExitUnavailable, helpExitNoAnswer, helpExitSignal),
		Flags:  c.flags(false),
		Action: c.Run,
	}
}

func (c *acquireCommand) Run(cCtx *cli.Context) error {
	const name = "acquire"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := firstError(noArgs(cCtx), c.check(name, false, 0)); err != nil {
		return err
	}
	shortLeaseWarning(g.Stderr, c.lease, g.FailureTimeout)
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	cl, err := g.lockClient()
	if err != nil {
		return err
	}
	defer cl.Close()

	locks, err := acquireShowingWait(ctx, g, cl, c.ask())
	if err != nil {
		return err
	}
	return printLocks(g, locks)
}

// lockAsk is what acquire, hold and exec ask lockd for.
type lockAsk struct {
	key    string // the first of keys
	lease  time.Duration
	wait   lockWait
	limit  int // --limit: 1 for a lock
	keys   []string
	shared bool
}

// options are the client options of the ask, but for its wait.
func (a lockAsk) options() []client.AcquireOption {
	opts := []client.AcquireOption{client.Limit(a.limit)}
	if a.shared {
		opts = append(opts, client.Shared())
	}
	return opts
}

// names are the keys asked for, for messages.
func (a lockAsk) names() string {
	if len(a.keys) == 0 {
		return keysText([]string{a.key})
	}
	return keysText(a.keys)
}

// set reports whether the ask is for several keys at once.
func (a lockAsk) set() bool { return len(a.keys) > 1 }

// acquireShowingWait asks for the lock with the wait indicator shown on a
// terminal, and maps a failure to its exit code.
func acquireShowingWait(ctx context.Context, g *globals, cl *client.Client, ask lockAsk) (client.Locks, error) {
	waiting := startWaiting(ctx, g, ask.key)
	var locks client.Locks
	err := noNodeYet(ctx, g, ask, func() error {
		var err error
		if ask.set() {
			locks, err = cl.AcquireAll(ctx, ask.keys, ask.lease, ask.wait.wire(), ask.options()...)
		} else {
			var lock client.Lock
			lock, err = cl.AcquireWith(ctx, ask.key, ask.lease, ask.wait.wire(), ask.options()...)
			locks = client.Locks{lock}
		}
		return err
	})
	waiting()
	if err != nil {
		return nil, acquireFailure(ctx, g, cl, ask, err)
	}
	return locks, nil
}

// noNodeYet runs try, the acquire ask describes. Started while
// every node is down (a cluster restarting at once), the client waits
// for one as for the lock, to the end of the wait; so that a person or
// a cron log learns why nothing happens, lockctl says so once on stderr
// when no node listens a moment after the start. Without a bound (no
// --wait) or with -n the client does not wait for a node it never
// reached: a wrong --addr must not hang lockctl.
func noNodeYet(ctx context.Context, g *globals, ask lockAsk, try func() error) error {
	if !ask.wait.set || ask.wait.atOnce() {
		return try()
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(noNodeAfter)
		defer t.Stop()
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := nothingListens(g.Addrs); err != nil {
			warn(g.Stderr, fmt.Sprintf("no lockd node answers at %s yet (%s)", printable(g.AddrList), networkCause(err)),
				fmt.Sprintf("waiting for one until the wait of %s ends", ask.wait.d))
		}
	}()
	err := try()
	close(stop)
	<-done
	return err
}

// noNodeAfter is how long an acquire runs before lockctl checks whether
// any node listens: a node restarting is usually back sooner.
const noNodeAfter = 250 * time.Millisecond

// nothingListens dials every address and returns the last refusal when
// every dial was refused; nil when a node listens at one of them, or a
// dial failed otherwise (the client's own error says more then).
func nothingListens(addrs []string) error {
	var last error
	for _, addr := range addrs {
		nc, err := net.DialTimeout("tcp", addr, noNodeAfter)
		if err == nil {
			nc.Close()
			return nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		last = err
	}
	return last
}

// acquireFailure explains a failed acquire; hold and exec share it.
func acquireFailure(ctx context.Context, g *globals, cl queuer, ask lockAsk, err error) error {
	key, wait := ask.key, ask.wait
	if errors.Is(err, client.ErrLimitMismatch) {
		return limitMismatch(ctx, g, cl, ask, err)
	}
	if errors.Is(err, client.ErrTimeout) && ask.set() {
		if wait.atOnce() {
			return &exitError{code: exitTimeout,
				what: fmt.Sprintf("one of %s at least is held by another client, and none was taken (not waiting: --nonblock)", keysText(ask.keys)),
				try:  "wait for them with --wait DURATION, or see who holds them with `lockctl queues`",
				err:  err}
		}
		return &exitError{code: exitTimeout,
			what: fmt.Sprintf("one of %s at least was still held after waiting %s, and none was taken", keysText(ask.keys), wait.d),
			try:  "wait longer with --wait (leave it out to wait forever), or see who holds them with `lockctl queues`",
			err:  err}
	}
	if errors.Is(err, client.ErrTimeout) {
		if ask.limit > 1 {
			if wait.atOnce() {
				return &exitError{code: exitTimeout,
					what: fmt.Sprintf("all %d places of %q are held (not waiting: --nonblock)", ask.limit, key),
					try:  "wait for one with --wait DURATION, or see who holds them with `lockctl queues`",
					err:  err}
			}
			return &exitError{code: exitTimeout,
				what: fmt.Sprintf("all %d places of %q were still held after waiting %s", ask.limit, key, wait.d),
				try:  "wait longer with --wait (leave it out to wait forever), or see who holds them with `lockctl queues`",
				err:  err}
		}
		if wait.atOnce() {
			return &exitError{code: exitTimeout,
				what: fmt.Sprintf("%q is held by another client (not waiting: --nonblock)", key),
				try:  "wait for it with --wait DURATION, or see who holds it with `lockctl queues`",
				err:  err}
		}
		return &exitError{code: exitTimeout,
			what: fmt.Sprintf("%q was still held after waiting %s", key, wait.d),
			try:  "wait longer with --wait (leave it out to wait forever), or see who holds it with `lockctl queues`",
			err:  err}
	}
	return clientFailure(ctx, g, "acquiring "+ask.names(), err)
}

// limitMismatch explains an acquire refused because the key exists with
// another limit: what the key allows, asked of lockd itself rather than
// read from the refusal's words, and what to do.
func limitMismatch(ctx context.Context, g *globals, cl queuer, ask lockAsk, err error) error {
	asked := "a lock (no --limit)"
	if ask.limit > 1 {
		asked = fmt.Sprintf("--limit %d", ask.limit)
	}
	e := &exitError{code: exitFailed, err: err,
		try: "every user of a key must give the same --limit; a key takes the limit of the acquire that creates it and keeps it while anyone holds or waits for it"}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.Timeout)
	defer cancel()
	q, qerr := cl.Queue(qctx, ask.key)
	// Q tells a held key's limit; a key only waited on, for the instant
	// between a place freeing and its grant, does not say.
	switch {
	case qerr == nil && q.Held && q.Limit > 1:
		e.what = fmt.Sprintf("%q is a semaphore of %d places, and this acquire asked for %s", ask.key, q.Limit, asked)
		e.try = fmt.Sprintf("use --limit %d as its other users do; %s", q.Limit, e.try)
	case qerr == nil && q.Held:
		e.what = fmt.Sprintf("%q is a lock (limit 1), and this acquire asked for %s", ask.key, asked)
		e.try = "leave --limit out, as its other users do; " + e.try
	default:
		// Freed since, or lockd could not say: its own words will do.
		words := err.Error()
		var srv *client.ServerError
		if errors.As(err, &srv) {
			words = srv.Msg
		}
		e.what = fmt.Sprintf("lockd refused acquiring %q with %s: %s", ask.key, asked, words)
	}
	return e
}

// queuer asks for a key's queue: a client, or a fake in tests.
type queuer interface {
	Queue(ctx context.Context, key string) (proto.Queue, error)
}

// limitHelp is the paragraph on --limit that acquire, hold and exec
// share.
const limitHelp = "--limit N makes KEY a semaphore: up to N hold it at once, each with its own\n" +
	"token and lease, and the next waits its turn in the same FIFO queue. The\n" +
	"acquire that creates the key sets N; while anyone holds or waits for it, an\n" +
	"acquire with another --limit is refused (exit 1). `lockctl queues` shows\n" +
	"2/3 held and every holder.\n\n"

// waitHelp is the paragraph on --wait and --nonblock that acquire, hold
// and exec share.
const waitHelp = "-w/--wait and -n/--nonblock mean what they mean to flock(1): no --wait waits\n" +
	"forever, --wait 10 (or 10s, 2m) gives up after that long, and --wait 0 or -n\n" +
	"fails at once if the lock is held. This is the one place lockctl differs from\n" +
	"the protocol, where a wait of 0 means forever: for \"at once\" lockctl sends\n" +
	"the smallest wait there is, 0.001 s, so a lock freed within that millisecond\n" +
	"is still granted. While no node answers (a cluster restarting), lockctl\n" +
	"keeps trying until the wait ends, then exits 4; without --wait, one that\n" +
	"never reached a node exits 4 at once: a wrong --addr must not hang it.\n\n"

// lockJSON is a held lock as acquire, renew and hold print it with --json.
// Limit and ID are those of a grant: renew, which knows only the token,
// leaves them out.
type lockJSON struct {
	Key          string  `json:"key"`
	Token        uint64  `json:"token,string"`
	LeaseSeconds float64 `json:"lease_seconds"`
	Limit        int     `json:"limit,omitempty"`
	ID           string  `json:"id,omitempty"`
	Shared       bool    `json:"shared,omitempty"`
	Place        int     `json:"place,omitempty"`
}

// printLocks writes granted locks: the bare token, so that
// token=$(lockctl acquire ...) works, or one JSON object; several keys'
// tokens one a line, in order, or a JSON array.
func printLocks(g *globals, locks client.Locks) error {
	if g.JSON {
		out := make([]lockJSON, len(locks))
		for i, l := range locks {
			out[i] = lockJSON{Key: l.Key, Token: l.Token, LeaseSeconds: seconds(l.Lease), Limit: l.Limit, ID: l.ID, Shared: l.Shared, Place: l.Place}
		}
		if len(out) == 1 {
			return printJSON(g.Stdout, out[0])
		}
		return printJSON(g.Stdout, out)
	}
	for _, l := range locks {
		if _, err := fmt.Fprintln(g.Stdout, l.Token); err != nil {
			return err
		}
	}
	return nil
}
