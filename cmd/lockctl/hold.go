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
	key      string
	lease    time.Duration
	wait     lockWait
	nonblock bool
	limit    int
}

func (c *holdCommand) Command() *cli.Command {
	return &cli.Command{
		Name:      "hold",
		Usage:     "take a lock and keep it until Ctrl-C or SIGTERM",
		UsageText: "lockctl hold --key KEY [--lease 30s] [-w DURATION | -n] [--limit N]",
		Description: "Acquires KEY, prints the token as acquire does, then renews the lease every\n" +
			"third of it. SIGINT (Ctrl-C) or SIGTERM releases the lock and exits 0. If\n" +
			"lockd says the token no longer holds the key, or no renewal gets through\n" +
			"before the lease ends, hold exits 5: from then on someone else may hold it.\n\n" +
			waitHelp + limitHelp +
			"Examples:\n" +
			"   lockctl hold --key maintenance          # in one terminal; Ctrl-C to let go\n" +
			"   lockctl hold --key db-migrate --lease 10s > token & holder=$!\n" +
			"   ...; kill $holder; wait $holder\n\n" +
			exitCodesHelp(
				exitLine("0", "held, then released after SIGINT or SIGTERM"),
				helpExitFailed, helpExitUsage, helpExitTimeout,
				exitLine("4", "no lockd node could be reached, to acquire or to release at the end"),
				helpExitLost, helpExitNoAnswer,
				exitLine("130", "interrupted by SIGINT (143: SIGTERM) while still waiting for the lock")),
		Flags: append(append([]cli.Flag{
			keyFlag(&c.key),
			leaseFlag(&c.lease, defaultLease),
		}, waitFlags(&c.wait, &c.nonblock)...), limitFlag(&c.limit)),
		Action: c.Run,
	}
}

func (c *holdCommand) Run(cCtx *cli.Context) error {
	const name = "hold"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := firstError(noArgs(cCtx), checkKey(name, c.key), checkLease(name, c.lease), checkWait(name, &c.wait, c.nonblock), checkLimit(name, c.limit)); err != nil {
		return err
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	cl, err := g.lockClient()
	if err != nil {
		return err
	}
	defer cl.Close()

	lock, err := acquireShowingWait(ctx, g, cl, lockAsk{c.key, c.lease, c.wait, c.limit})
	if err != nil {
		return err
	}
	k := keepLease(cl, c.key, lock.Token, c.lease, time.Now())
	defer k.stop()
	if err := printLock(g, lock); err != nil {
		return err
	}
	if g.TTY && !g.JSON {
		what := fmt.Sprintf("%q", c.key)
		if c.limit > 1 {
			what = fmt.Sprintf("one of the %d places of %q", c.limit, c.key)
		}
		fmt.Fprintf(g.Stderr, "lockctl: holding %s, renewing every %s; Ctrl-C releases it\n", what, roundedDuration(c.lease/3))
	}

	select {
	case lost := <-k.lost:
		return lost.exit("take it again with `lockctl hold`")
	case <-ctx.Done():
	}
	k.stop()
	if lost := k.lostNow(); lost != nil {
		return lost.exit("take it again with `lockctl hold`")
	}
	switch err := releaseAtEnd(g, cl, c.key, lock.Token); {
	case err == nil:
		// Say that the lock is free now: on a terminal in words, and
		// with --json as a last object (a script may be reading).
		switch {
		case g.JSON:
			return printJSON(g.Stdout, struct {
				Key      string `json:"key"`
				Token    uint64 `json:"token"`
				Released bool   `json:"released"`
			}{c.key, lock.Token, true})
		case g.TTY:
			fmt.Fprintf(g.Stderr, "lockctl: released %q (token %d)\n", c.key, lock.Token)
		}
		return nil
	case errors.Is(err, client.ErrNotHeld):
		return (&lostError{key: c.key, token: lock.Token, err: err,
			reason: "lockd no longer knew the token when hold released it (a failover may have dropped the grant)"}).
			exit("take it again with `lockctl hold`")
	case errors.Is(err, client.ErrUnavailable):
		e := unreachable(g, err)
		e.what = fmt.Sprintf("could not release %q: %s", c.key, e.what)
		e.try = fmt.Sprintf("lockd frees it when its lease ends, within %s", c.lease)
		return e
	default:
		return clientFailure(context.Background(), g, fmt.Sprintf("releasing %q", c.key), err)
	}
}

// releaseTimeout bounds a release at the end of a bench cycle; the client
// re-sends a release for 5 seconds when no connection is up.
const releaseTimeout = 6 * time.Second

// releaseAtEnd gives a lock back when hold or exec finishes. It has its own
// context: the one whose cancel announced the end is already done. The
// client re-sends the release for up to --timeout; a second more lets it
// say why it gave up.
func releaseAtEnd(g *globals, cl *client.Client, key string, token uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.Timeout+time.Second)
	defer cancel()
	return cl.Release(ctx, key, token)
}

// keeper renews a held lock in the background, every third of its lease,
// for hold and exec. It reports on lost, at most once, when the lock is
// gone: lockd answered notheld, refused the renewal, or no renewal got
// through before the lease (as lockctl last knew it) ended.
type keeper struct {
	lost   chan *lostError
	cancel context.CancelFunc
	done   chan struct{}
}

// lostError says why a kept lock is gone; exit turns it into exit code 5.
type lostError struct {
	key    string
	token  uint64
	reason string
	err    error
}

func (l *lostError) exit(try string) *exitError {
	return &exitError{code: exitLost,
		what: fmt.Sprintf("lost the lock on %q (token %d): %s", l.key, l.token, l.reason),
		try:  try, err: l.err}
}

// keepLease starts renewing. granted is when the lease last started as far
// as lockctl can tell: the moment the grant or renewal was sent or seen.
func keepLease(cl *client.Client, key string, token uint64, lease time.Duration, granted time.Time) *keeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &keeper{lost: make(chan *lostError, 1), cancel: cancel, done: make(chan struct{})}
	go k.run(ctx, cl, key, token, lease, granted)
	return k
}

// stop ends the renewals and waits until none is in flight.
func (k *keeper) stop() {
	k.cancel()
	<-k.done
}

// lostNow returns a loss already reported, without waiting.
func (k *keeper) lostNow() *lostError {
	select {
	case l := <-k.lost:
		return l
	default:
		return nil
	}
}

func (k *keeper) run(ctx context.Context, cl *client.Client, key string, token uint64, lease time.Duration, granted time.Time) {
	defer close(k.done)
	every := lease / 3
	// After a failed renewal, try again soon, but not in a tight loop.
	retry := min(max(every/10, 10*time.Millisecond), time.Second)
	end := granted.Add(lease)
	timer := time.NewTimer(time.Until(granted.Add(every)))
	defer timer.Stop()
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if !time.Now().Before(end) {
			reason := "no renewal got through before the lease ended"
			if lastErr != nil {
				reason += " (" + renewTrouble(lastErr) + ")"
			}
			k.lost <- &lostError{key: key, token: token, reason: reason, err: lastErr}
			return
		}
		sent := time.Now()
		rctx, rcancel := context.WithDeadline(ctx, end)
		err := cl.Renew(rctx, key, token, lease)
		rcancel()
		if ctx.Err() != nil {
			return
		}
		var srv *client.ServerError
		switch {
		case err == nil:
			end = sent.Add(lease)
			lastErr = nil
			timer.Reset(time.Until(sent.Add(every)))
			continue
		case errors.Is(err, client.ErrNotHeld):
			k.lost <- &lostError{key: key, token: token, err: err,
				reason: "lockd says the token no longer holds it (its lease expired, or a failover dropped the grant)"}
			return
		case errors.As(err, &srv):
			k.lost <- &lostError{key: key, token: token, err: err,
				reason: "lockd refused to renew it: " + srv.Msg}
			return
		}
		lastErr = err
		timer.Reset(min(retry, time.Until(end)))
	}
}

// renewTrouble says in a few words why renewals did not get through.
func renewTrouble(err error) string {
	switch {
	case errors.Is(err, client.ErrUnavailable):
		return "lockd unreachable: " + networkCause(err)
	case errors.Is(err, context.DeadlineExceeded):
		return "lockd did not answer"
	}
	return err.Error()
}
