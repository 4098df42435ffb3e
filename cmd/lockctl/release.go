package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto/client"
)

// releaseCommand frees a lock by its token; lockd grants it at once to the
// head of the key's queue.
type releaseCommand struct {
	key   string
	token string
}

func (c *releaseCommand) Command() *cli.Command {
	return &cli.Command{
		Name:      "release",
		Usage:     "free a lock, given the token acquire printed",
		UsageText: "lockctl release --key KEY --token TOKEN",
		Description: "Frees the lock if TOKEN still holds KEY; the first waiter in the key's\n" +
			"queue is granted it at once. Any connection may release: the token alone\n" +
			"names the holder. Prints nothing on success (with --json:\n" +
			"{\"key\":...,\"token\":\"...\",\"released\":true}).\n\n" +
			"Examples:\n" +
			"   lockctl release --key deploy --token 7360982537641984001\n" +
			"   lockctl release --key deploy --token \"$token\" || echo 'lease had expired'\n\n" +
			exitCodesHelp(helpExitOK,
				exitLine("1", "the token does not hold the key (released already, lease expired, never granted)"),
				helpExitUsage, helpExitUnavailable, helpExitNoAnswer, helpExitSignal),
		Flags: []cli.Flag{
			keyFlag(&c.key),
			tokenFlag(&c.token),
		},
		Action: c.Run,
	}
}

func (c *releaseCommand) Run(cCtx *cli.Context) error {
	const name = "release"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := firstError(noArgs(cCtx), checkKey(name, c.key)); err != nil {
		return err
	}
	token, err := parseToken(name, c.token)
	if err != nil {
		return err
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	// The client re-sends the release until a node answers, for up to
	// --timeout; a second more lets it say why it gave up.
	ctx, cancel := context.WithTimeout(ctx, g.Timeout+time.Second)
	defer cancel()
	cl, err := g.lockClient()
	if err != nil {
		return err
	}
	defer cl.Close()

	if err := cl.Release(ctx, c.key, token); err != nil {
		if errors.Is(err, client.ErrNotHeld) {
			return &exitError{code: exitFailed,
				what: fmt.Sprintf("token %d does not hold %q", token, c.key),
				try:  "it was released already, its lease expired, or it was never granted: there is nothing to release",
				err:  err}
		}
		return clientFailure(ctx, g, fmt.Sprintf("releasing %q", c.key), err)
	}
	if g.JSON {
		return printJSON(g.Stdout, struct {
			Key      string `json:"key"`
			Token    uint64 `json:"token,string"`
			Released bool   `json:"released"`
		}{c.key, token, true})
	}
	return nil
}
