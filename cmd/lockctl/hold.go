package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto/client"
)

// holdCommand takes a lock and keeps it, renewing the lease, until it is
// told to stop; then it gives the lock back.
type holdCommand struct {
	lockFlags
}

func (c *holdCommand) Command() *cli.Command {
	return &cli.Command{
		Name:  "hold",
		Usage: "take a lock and keep it until Ctrl-C or SIGTERM",
		UsageText: "lockctl hold --key KEY [--key KEY]... [--shared] [--lease 30s]\n" +
			"       [-w DURATION | -n] [--limit N]",
		Description: "Acquires KEY, prints the token as acquire does, then renews the lease every\n" +
			"third of it. SIGINT (Ctrl-C) or SIGTERM releases the lock and exits 0. If\n" +
			"lockd says the token no longer holds the key, or no renewal gets through\n" +
			"before the lease ends, hold exits 5: from then on someone else may hold it.\n\n" +
			waitHelp + limitHelp + keysHelp +
			"Examples:\n" +
			"   lockctl hold --key maintenance      # in one terminal; Ctrl-C lets go\n" +
			"   lockctl hold --key config --shared  # a reader: others read beside it\n" +
			"   lockctl hold --key db-migrate --lease 10s > token & holder=$!\n" +
			"   ...; kill $holder; wait $holder\n\n" +
			exitCodesHelp(
				exitLine("0", "held, then released after SIGINT or SIGTERM"),
				helpExitFailed, helpExitUsage, helpExitTimeout,
				exitLine("4", "no lockd node could be reached, to acquire or to release at the end"),
				helpExitLost, helpExitNoAnswer,
				exitLine("130", "interrupted by SIGINT (143: SIGTERM) while still waiting for the lock")),
		Flags:  c.flags(true),
		Action: c.Run,
	}
}

func (c *holdCommand) Run(cCtx *cli.Context) error {
	const name = "hold"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := firstError(noArgs(cCtx), c.check(name, true, g.FailureTimeout)); err != nil {
		return err
	}
	ask := c.ask()
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	cl, err := g.lockClient()
	if err != nil {
		return err
	}
	defer cl.Close()

	held, err := holdShowingWait(ctx, g, cl, ask)
	if err != nil {
		return err
	}
	defer func() {
		// On the ways out that do not release below: a lost lock that
		// lockd may still count is freed for the next waiter, without
		// waiting long for that.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = held.Release(ctx)
	}()
	lock, locks := held.Lock(), locksOf(held)
	if err := printLocks(g, locks); err != nil {
		return err
	}
	if g.TTY && !g.JSON {
		what := ask.names()
		switch {
		case c.limit > 1:
			what = fmt.Sprintf("one of the %d places of %s", c.limit, what)
		case c.shared:
			what += " as a reader"
		}
		fmt.Fprintf(g.Stderr, "lockctl: holding %s, renewing every %s; Ctrl-C releases it\n", what, roundedDuration(c.lease/3))
	}

	select {
	case <-held.Done():
		return heldLost(held).exit("take it again with `lockctl hold`")
	case <-ctx.Done():
	}
	if held.Err() != nil {
		return heldLost(held).exit("take it again with `lockctl hold`")
	}
	switch err := releaseHeld(g, held); {
	case err == nil:
		// Say that the lock is free now: on a terminal in words, and
		// with --json as a last object (a script may be reading).
		switch {
		case g.JSON:
			for _, l := range locks {
				if err := printJSON(g.Stdout, struct {
					Key      string `json:"key"`
					Token    uint64 `json:"token,string"`
					Released bool   `json:"released"`
				}{l.Key, l.Token, true}); err != nil {
					return err
				}
			}
		case g.TTY && len(locks) > 1:
			fmt.Fprintf(g.Stderr, "lockctl: released %s\n", ask.names())
		case g.TTY:
			fmt.Fprintf(g.Stderr, "lockctl: released %q (token %d)\n", ask.key, lock.Token)
		}
		return nil
	case errors.Is(err, client.ErrNotHeld):
		return (&lostError{key: ask.key, token: lock.Token, err: err,
			reason: "lockd no longer knew the token when hold released it (a failover may have dropped the grant)"}).
			exit("take it again with `lockctl hold`")
	case errors.Is(err, client.ErrUnavailable):
		e := unreachable(g, err)
		e.what = fmt.Sprintf("could not release %s: %s", ask.names(), e.what)
		e.try = fmt.Sprintf("lockd frees it when its lease ends, within %s", c.lease)
		return e
	default:
		return clientFailure(context.Background(), g, "releasing "+ask.names(), err)
	}
}

// releaseTimeout bounds a release at the end of a bench cycle; the client
// re-sends a release for 5 seconds when no connection is up.
const releaseTimeout = 6 * time.Second

// holdShowingWait is Client.Hold with the wait indicator of acquire, and
// acquire's explanations when the lock cannot be taken; hold and exec
// share it, so that both renew through the client's one implementation.
func holdShowingWait(ctx context.Context, g *globals, cl *client.Client, ask lockAsk) (keeper, error) {
	waiting := startWaiting(ctx, g, ask.key)
	var held keeper
	err := noNodeYet(ctx, g, ask, func() error {
		opts := ask.options()
		if ask.wait.set {
			opts = append(opts, client.Wait(ask.wait.d))
		}
		var err error
		if ask.set() {
			held, err = cl.HoldAll(ctx, ask.keys, ask.lease, opts...)
		} else {
			held, err = cl.Hold(ctx, ask.key, ask.lease, opts...)
		}
		return err
	})
	waiting()
	if err != nil {
		return nil, acquireFailure(ctx, g, cl, ask, err)
	}
	return held, nil
}

// releaseHeld gives a held lock back when hold or exec finishes. It has
// its own context: the one whose cancel announced the end is already
// done. The client re-sends the release for up to --timeout; a second
// more lets it say why it gave up.
func releaseHeld(g *globals, held keeper) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.Timeout+time.Second)
	defer cancel()
	return held.Release(ctx)
}

// lostError says why a held lock is gone; exit turns it into exit code 5.
type lostError struct {
	key    string
	token  uint64
	reason string
	err    error
	of     string // " (one of ...)" for a key of a set
}

func (l *lostError) exit(try string) *exitError {
	return &exitError{code: exitLost,
		what: fmt.Sprintf("lost the lock on %q (token %d)%s: %s", l.key, l.token, l.of, l.reason),
		try:  try, err: l.err}
}

// heldLost says in lockctl's words why a hold is done; of a set, which
// key ended it.
func heldLost(held keeper) *lostError {
	err := held.Err()
	key, token, of := setLost(held)
	l := &lostError{key: key, token: token, err: err, of: of}
	var srv *client.ServerError
	switch {
	case errors.As(err, &srv):
		l.reason = "lockd refused to renew it: " + srv.Msg
	case errors.Is(err, client.ErrNotHeld):
		l.reason = "lockd says the token no longer holds it (its lease expired, or a failover dropped the grant)"
	case errors.Is(err, client.ErrExpired):
		l.reason = "no renewal got through before the lease ended (" + renewTrouble(err) + ")"
	default:
		l.reason = err.Error()
	}
	return l
}

// renewTrouble says in a few words why renewals did not get through.
func renewTrouble(err error) string {
	switch {
	case errors.Is(err, client.ErrUnavailable):
		return "lockd unreachable: " + networkCause(err)
	case errors.Is(err, client.ErrExpired), errors.Is(err, context.DeadlineExceeded):
		return "lockd did not answer"
	}
	return err.Error()
}
