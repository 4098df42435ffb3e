package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto/client"
)

// acquireCommand takes a lock once and prints its token. The lock outlives
// lockctl: `lockctl release` frees it, or lockd does when the lease ends.
type acquireCommand struct {
	key      string
	lease    time.Duration
	wait     lockWait
	nonblock bool
}

func (c *acquireCommand) Command() *cli.Command {
	return &cli.Command{
		Name:      "acquire",
		Usage:     "take a lock and print its fencing token",
		UsageText: "lockctl acquire --key KEY [--lease 30s] [-w DURATION | -n]",
		Description: "Waits in the key's FIFO queue until the lock is granted, prints the token\n" +
			"(a number that grows with every grant) and exits, leaving the lock held.\n" +
			"Release it with that token, or let the lease end. With --json it prints\n" +
			"{\"key\":...,\"token\":...,\"lease_seconds\":...}.\n\n" +
			waitHelp +
			"Examples:\n" +
			"   token=$(lockctl acquire --key deploy --lease 5m --wait 1m) || exit\n" +
			"   ./deploy.sh --fencing-token \"$token\"\n" +
			"   lockctl release --key deploy --token \"$token\"\n\n" +
			exitCodesHelp(helpExitOK, helpExitFailed, helpExitUsage, helpExitTimeout,
				helpExitUnavailable, helpExitNoAnswer, helpExitSignal),
		Flags: append([]cli.Flag{
			keyFlag(&c.key),
			leaseFlag(&c.lease, defaultLease),
		}, waitFlags(&c.wait, &c.nonblock)...),
		Action: c.Run,
	}
}

func (c *acquireCommand) Run(cCtx *cli.Context) error {
	const name = "acquire"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := firstError(noArgs(cCtx), checkKey(name, c.key), checkLease(name, c.lease), checkWait(name, &c.wait, c.nonblock)); err != nil {
		return err
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	cl, err := g.client(client.Options{})
	if err != nil {
		return err
	}
	defer cl.Close()

	lock, err := acquireShowingWait(ctx, g, cl, c.key, c.lease, c.wait)
	if err != nil {
		return err
	}
	return printLock(g, c.key, lock.Token, c.lease)
}

// acquireShowingWait asks for the lock with the wait indicator shown on a
// terminal, and maps a failure to its exit code.
func acquireShowingWait(ctx context.Context, g *globals, cl *client.Client, key string, lease time.Duration, wait lockWait) (client.Lock, error) {
	waiting := startWaiting(ctx, g, key)
	lock, err := cl.Acquire(ctx, key, lease, wait.wire())
	waiting()
	if err != nil {
		return lock, acquireFailure(ctx, g, key, wait, err)
	}
	return lock, nil
}

// acquireFailure explains a failed acquire; hold and exec share it.
func acquireFailure(ctx context.Context, g *globals, key string, wait lockWait, err error) error {
	if errors.Is(err, client.ErrTimeout) {
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
	return clientFailure(ctx, g, fmt.Sprintf("acquiring %q", key), err)
}

// waitHelp is the paragraph on --wait and --nonblock that acquire, hold
// and exec share.
const waitHelp = "-w/--wait and -n/--nonblock mean what they mean to flock(1): no --wait waits\n" +
	"forever, --wait 10 (or 10s, 2m) gives up after that long, and --wait 0 or -n\n" +
	"fails at once if the lock is held. This is the one place lockctl differs from\n" +
	"the protocol, where a wait of 0 means forever: for \"at once\" lockctl sends\n" +
	"the smallest wait there is, 0.001 s, so a lock freed within that millisecond\n" +
	"is still granted.\n\n"

// lockJSON is a held lock as acquire, renew and hold print it with --json.
type lockJSON struct {
	Key          string  `json:"key"`
	Token        uint64  `json:"token"`
	LeaseSeconds float64 `json:"lease_seconds"`
}

// printLock writes a granted lock: the bare token, so that
// token=$(lockctl acquire ...) works, or one JSON object.
func printLock(g *globals, key string, token uint64, lease time.Duration) error {
	if g.JSON {
		return printJSON(g.Stdout, lockJSON{Key: key, Token: token, LeaseSeconds: seconds(lease)})
	}
	_, err := fmt.Fprintln(g.Stdout, token)
	return err
}
