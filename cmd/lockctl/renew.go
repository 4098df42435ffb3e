package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto/client"
)

// renewCommand restarts a held lock's lease from now, for scripts that
// keep a lock across steps without `lockctl hold`.
type renewCommand struct {
	key   string
	token string
	lease time.Duration
}

func (c *renewCommand) Command() *cli.Command {
	return &cli.Command{
		Name:      "renew",
		Usage:     "restart a held lock's lease from now",
		UsageText: "lockctl renew --key KEY --token TOKEN [--lease 30s]",
		Description: "Tells lockd that TOKEN's holder is alive: the lease starts again from now\n" +
			"with the given length. Renew well before the lease ends (every third of it\n" +
			"is a good rhythm). Prints nothing on success (with --json:\n" +
			"{\"key\":...,\"token\":\"...\",\"lease_seconds\":...}).\n\n" +
			"Examples:\n" +
			"   lockctl renew --key deploy --token \"$token\" --lease 5m\n" +
			"   while step; do lockctl renew --key etl --token \"$token\" || exit 1; done\n\n" +
			exitCodesHelp(helpExitOK,
				exitLine("1", "the token does not hold the key any more: the lock is gone, acquire it again"),
				helpExitUsage, helpExitUnavailable, helpExitNoAnswer, helpExitSignal),
		Flags: []cli.Flag{
			keyFlag(&c.key),
			tokenFlag(&c.token),
			leaseFlag(&c.lease, defaultLease),
		},
		Action: c.Run,
	}
}

func (c *renewCommand) Run(cCtx *cli.Context) error {
	const name = "renew"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := firstError(noArgs(cCtx), checkKey(name, c.key), checkLease(name, c.lease)); err != nil {
		return err
	}
	token, err := parseToken(name, c.token)
	if err != nil {
		return err
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	cl, err := g.lockClient()
	if err != nil {
		return err
	}
	defer cl.Close()

	if err := cl.Renew(ctx, c.key, token, c.lease); err != nil {
		if errors.Is(err, client.ErrNotHeld) {
			return &exitError{code: exitFailed,
				what: fmt.Sprintf("token %d does not hold %q any more", token, c.key),
				try:  "the lock was released or its lease expired; acquire it again",
				err:  err}
		}
		return clientFailure(ctx, g, fmt.Sprintf("renewing %q", c.key), err)
	}
	if g.JSON {
		return printJSON(g.Stdout, lockJSON{Key: c.key, Token: token, LeaseSeconds: seconds(c.lease)})
	}
	return nil
}
