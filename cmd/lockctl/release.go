package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto"
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
				exitLine("1", "the token does not hold the key: another token holds it (the error says whose), or it was released already, its lease expired, or it was never granted"),
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

	if err := cl.ReleaseToken(ctx, c.key, token); err != nil {
		if errors.Is(err, client.ErrNotHeld) {
			return notHeldError(ctx, cl, c.key, token, err)
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

// notHeldError says why a release was answered notheld. Someone else
// holding the key is the answer a person most needs (a token pasted from
// another run, a lease that ended and was granted again), so the active
// is asked who holds it; when it cannot say, the error lists the causes.
func notHeldError(ctx context.Context, cl *client.Client, key string, token uint64, cause error) error {
	what := fmt.Sprintf("token %d does not hold %q", token, key)
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	q, err := cl.Queue(qctx, key)
	switch {
	case err != nil:
		return &exitError{code: exitFailed, what: what, err: cause,
			try: "it was released already, its lease expired, or it was never granted: there is nothing to release"}
	case !q.Held:
		return &exitError{code: exitFailed, what: what + ": nobody holds it now", err: cause,
			try: "it was released already, or its lease expired: there is nothing to release"}
	}
	return &exitError{code: exitFailed, what: what + ": " + heldBy(holdersOf(q)), err: cause,
		try: "only the holder's token releases it (lockctl queues --key " + printable(key) + " shows the holders); " +
			"to take it when it is freed: lockctl acquire --key " + printable(key)}
}

// heldBy names the holders of a key: "it is held by token T (NAME)",
// the first three of a semaphore's and how many more.
func heldBy(hs []proto.QueueHolder) string {
	const shown = 3
	var parts []string
	for i, h := range hs {
		if i == shown {
			parts = append(parts, fmt.Sprintf("%d more", len(hs)-shown))
			break
		}
		p := fmt.Sprintf("token %d", h.Token)
		if n := h.Name(); n != "" {
			p += " (" + printable(n) + ")"
		}
		if h.LeaseLeft > 0 {
			p += ", lease left " + humanDuration(h.LeaseLeft)
		}
		parts = append(parts, p)
	}
	return "it is held by " + strings.Join(parts, "; ")
}
