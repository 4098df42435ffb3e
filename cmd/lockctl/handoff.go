package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/survey"
	"github.com/lockd-io/lockd/proto/auth"
	"github.com/lockd-io/lockd/proto/client"
)

// handoffCommand moves the active role to another node on purpose, for
// maintenance of the active's machine or to test a failover.
type handoffCommand struct {
	to string
}

// handoffTimeout is how long handoff waits for the new active to serve
// when --timeout is not given.
const handoffTimeout = 10 * time.Second

// handoffPoll is how often handoff asks the new active whether it serves.
// Each question is one short connection; the gap is measured to this
// precision.
const handoffPoll = 5 * time.Millisecond

func (c *handoffCommand) Command() *cli.Command {
	return &cli.Command{
		Name:      "handoff",
		Usage:     "hand the active role on (to --to) and wait until it serves",
		UsageText: "lockctl handoff [--to ADDR] [--timeout 10s]",
		Description: "Asks the active node to hand its role to its successor: the caught-up\n" +
			"standby of highest priority, or the node named by --to. Locks and queues\n" +
			"move with the role. lockctl then waits until the new active answers as\n" +
			"active, and prints it with the gap: the time from sending the request to\n" +
			"that first answer.\n\n" +
			"The handoff is sticky: the old active stays a standby and does not take the\n" +
			"role back by priority until it restarts or a later handoff names it.\n\n" +
			"--json prints {\"from\":\"ADDR\"|null,\"to\":\"ADDR\",\"gap_ms\":12.3}.\n\n" +
			"Examples:\n" +
			"   lockctl handoff\n" +
			"   lockctl handoff --to 10.0.0.2:7070\n" +
			"   lockctl handoff --json | jq .gap_ms\n\n" +
			exitCodesHelp(helpExitOK,
				exitLine("1", "the handoff did not happen (lockd's reason is printed), or the new active"),
				exitLine("", "did not serve within --timeout"),
				helpExitUsage, helpExitUnavailable, helpExitNoAnswer, helpExitSignal),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Destination: &c.to,
				Usage: "hand the role to the node at `ADDR` (HOST:PORT, as written in its --peers, or a bare PORT for 127.0.0.1:PORT) instead of the successor"},
		},
		Action: c.Run,
	}
}

func (c *handoffCommand) Run(cCtx *cli.Context) error {
	const name = "handoff"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := noArgs(cCtx); err != nil {
		return err
	}
	if c.to != "" {
		c.to = nodeAddr(c.to)
		if _, _, err := net.SplitHostPort(c.to); err != nil {
			return usageError(name, "--to %q is not HOST:PORT (or a bare PORT)", c.to)
		}
	}
	timeout := g.timeoutOr(handoffTimeout)
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	before := survey.Run(ctx, g.Addrs, g.status)
	if before.Answered == 0 {
		return noNodeAnswered(g, before)
	}
	if c.to != "" && c.to == before.Active && len(before.Claims) == 1 {
		return fail(exitFailed, printable(c.to)+" is already active",
			"name another node with --to, or leave --to out to pick the successor")
	}
	cl, err := g.client(client.Options{Role: auth.Admin})
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := runHandoff(ctx, cl, g.status, c.to)
	if err != nil {
		return handoffFailure(ctx, g, timeout, err)
	}
	res.From = before.Active
	if g.JSON {
		out := handoffJSON{To: res.To, GapMs: millis(res.Gap)}
		if res.From != "" {
			out.From = &res.From
		}
		return printJSON(g.Stdout, out)
	}
	_, err = fmt.Fprintf(g.Stdout, "active is now %s (handoff took %s)\n", printable(res.To), shortDuration(res.Gap))
	return err
}

// handoffJSON is the --json shape of handoff.
type handoffJSON struct {
	From  *string `json:"from"`
	To    string  `json:"to"`
	GapMs float64 `json:"gap_ms"`
}

// handoffResult is a handoff that happened.
type handoffResult struct {
	From string        // the active before, "" when unknown
	To   string        // the active after
	Gap  time.Duration // from sending H to the first status answer of To as active
}

// handoffer is what runHandoff needs of a client.
type handoffer interface {
	Handoff(ctx context.Context, to string) (string, error)
}

// notServing is runHandoff's error when the handoff was accepted but the
// new active did not answer as active before ctx ended.
type notServing struct {
	to   string // as lockd named it
	last string // what it last said, its words escaped
}

func (e *notServing) Error() string {
	return fmt.Sprintf("lockd handed the role to %s, but it did not answer as active in time (last seen: %s)", printable(e.to), e.last)
}

// runHandoff asks for the handoff, then asks the new active for its status
// until it says it is active, and measures the gap between the two. Drill
// uses it too.
func runHandoff(ctx context.Context, cl handoffer, ask survey.StatusFunc, to string) (handoffResult, error) {
	start := time.Now()
	newActive, err := cl.Handoff(ctx, to)
	if err != nil {
		return handoffResult{}, err
	}
	last := "no answer yet"
	for {
		st, err := ask(ctx, newActive)
		switch {
		case err == nil && st.Role == survey.RoleActive:
			return handoffResult{To: newActive, Gap: time.Since(start)}, nil
		case err == nil:
			last = "role=" + printable(st.Role)
		case ctx.Err() == nil:
			last = "unreachable: " + networkCause(err)
		}
		select {
		case <-ctx.Done():
			return handoffResult{To: newActive}, &notServing{to: newActive, last: last}
		case <-time.After(handoffPoll):
		}
	}
}

// handoffFailure explains a handoff that did not happen.
func handoffFailure(ctx context.Context, g *globals, timeout time.Duration, err error) error {
	var ns *notServing
	var srv *client.ServerError
	switch {
	case errors.As(context.Cause(ctx), new(interrupted)):
		return clientFailure(ctx, g, "handing off", err)
	case errors.As(err, &ns):
		return &exitError{code: exitFailed, what: ns.Error(),
			try: "see `lockctl status`; the old active takes the role back if the successor does not confirm", err: err}
	case errors.As(err, &srv):
		// lockd's reason says what to check; lockctl adds a flag where
		// one is the fix (the admin secret).
		return &exitError{code: exitFailed, what: "lockd did not hand off: " + srv.Msg, try: refusalHint(srv.Msg), err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &exitError{code: exitFailed, what: fmt.Sprintf("no handoff within %s", timeout),
			try: "see `lockctl status`, or wait longer with --timeout", err: err}
	}
	return clientFailure(ctx, g, "handing off", err)
}
