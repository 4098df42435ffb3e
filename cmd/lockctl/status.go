package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/durflag"
	"github.com/lockd-io/lockd/cmd/internal/survey"

	"github.com/lockd-io/lockd/proto/client"
)

// statusCommand shows every node of the cluster and which one is active.
type statusCommand struct {
	watch      bool
	interval   time.Duration
	waitActive string
	check      bool
	maxLag     uint64
}

// Bounds of a status survey.
const (
	// waitActiveTimeout is how long --wait-active waits when --timeout
	// is not given.
	waitActiveTimeout = 10 * time.Second
	// waitActivePoll is how often --wait-active asks.
	waitActivePoll = 75 * time.Millisecond
	// defaultMaxLag is how far behind a standby may be before --check
	// fails: a standby under a steady write load is a few hundred changes
	// behind at any instant and catches up within milliseconds.
	defaultMaxLag = 1000
)

func (c *statusCommand) Command() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show each node, its role and whether it is caught up",
		UsageText: "lockctl status [--check [--max-lag 1000]] [--watch [--interval 1s]]\n" +
			"       [--wait-active ADDR [--timeout 10s]]",
		Description: "Asks each node of --addr for its status, then every peer those nodes name,\n" +
			"and shows one line per node in priority order: address, priority (its place\n" +
			"in --peers, 1 is preferred), role, whether lockctl reached it, replication\n" +
			"lag (changes behind the active), token high-water mark and uptime. On a\n" +
			"terminal the active is marked and a summary line follows; piped, the ROLE\n" +
			"column says which node is active. A node that does not answer is shown as\n" +
			"unreachable; that is an error only when no node answers, or with --check.\n" +
			"Its role is then what its peers say of it, \"down\" when they cannot reach it\n" +
			"either, or \"unresponsive\" when it took lockctl's connection and said\n" +
			"nothing for --failure-timeout (frozen or overloaded): such a node is never\n" +
			"shown active, although its peers name it so until their own failure timeout.\n" +
			"The summary line and -o wide's DURABILITY say what each node keeps across a\n" +
			"restart: memory, or its --data-dir's fsync mode (fsync=batch).\n\n" +
			"Under the nodes, \"recent role changes:\" lists the last 8 moves of the\n" +
			"active role, oldest first: when, from which node (- when none was active),\n" +
			"to which, and why (\"the active ADDR is unreachable\", \"handoff from ADDR\").\n" +
			"On a terminal the time is local, with the date when not today; piped it is\n" +
			"UTC to the millisecond (RFC 3339), and a blank line ends the nodes' lines.\n" +
			"Each node remembers the last 8 times it took the role, in memory: a node\n" +
			"that is down or was restarted takes its own with it, and each time is its\n" +
			"node's clock. Nothing is shown when the nodes remember none.\n\n" +
			"--check makes status a health check for CI and monitors: it exits 1, naming\n" +
			"each problem on stderr, when a node is down or unreachable, a standby is more\n" +
			"than --max-lag changes behind, no node is active, or several are, or the\n" +
			"active is degraded (no standby in sync: a crash may lose its last answers).\n\n" +
			"--json prints one object:\n" +
			"   {\"active\":\"ADDR\"|null,\"nodes\":[{\"addr\":\"ADDR\",\"priority\":1,\n" +
			"    \"role\":\"active\",\"reachable\":true,\"lag\":0,\"token\":\"123\",\n" +
			"    \"uptime_seconds\":42.5,\"sticky\":false,\"replication\":\"sync\",\n" +
			"    \"degraded\":false,\"error\":null}],\"healthy\":true,\"problems\":[],\n" +
			"    \"changes\":[{\"at\":\"2025-06-01T09:30:00.123Z\",\"from\":\"ADDR\"|null,\n" +
			"    \"to\":\"ADDR\",\"reason\":\"handoff from ADDR\"}]}\n" +
			"priority, lag, token, uptime_seconds and replication are null when unknown;\n" +
			"degraded is true on a sync-mode active that no standby is in sync with;\n" +
			"error says why an unreachable node did not answer; problems are what\n" +
			"--check fails on; changes are the role changes above, oldest first, at in\n" +
			"UTC to the millisecond, from null when no node was active before.\n\n" +
			"--watch redraws the view every --interval until Ctrl-C. Piped, it writes each\n" +
			"survey as lines that start with the time (a TIME column, the header once),\n" +
			"and each role change once, as it turns up (TIME  role change  AT  FROM -> TO\n" +
			"REASON); with --json, one object per survey with a \"time\" field.\n" +
			"--wait-active ADDR waits until the node at ADDR reports itself active and\n" +
			"exits 0, or exits 1 after --timeout (10s unless given): a failover drill's\n" +
			"\"is it over yet\".\n\n" +
			"Examples:\n" +
			"   lockctl status\n" +
			"   lockctl status --check || alert 'lockd cluster degraded'\n" +
			"   lockctl --addr 10.0.0.1:7070 status --watch >> lockd-status.log\n" +
			"   lockctl status --json | jq -r .active\n" +
			"   lockctl status --json | jq -r '.changes[-1].reason'\n" +
			"   lockctl status --wait-active 10.0.0.2:7070 --timeout 30s\n\n" +
			exitCodesHelp(
				exitLine("0", "done; with --check: healthy; with --wait-active: ADDR is active; with --watch: stopped by Ctrl-C"),
				exitLine("1", "--check: a node down or lagging, or no single active; --wait-active: ADDR was not active in time"),
				helpExitUsage,
				exitLine("4", "no node could be reached (every address of --addr and its peers)"),
				exitLine("6", "no node answered: they took the connection but said nothing within --timeout")),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "check", Destination: &c.check,
				Usage: "exit 1 when a node is down or unreachable, a standby lags more than --max-lag, or there is no single active"},
			&cli.Uint64Flag{Name: "max-lag", Destination: &c.maxLag, Value: defaultMaxLag,
				Usage: "with --check: the most changes a standby may be behind the active, `N`"},
			&cli.BoolFlag{Name: "watch", Destination: &c.watch,
				Usage: "redraw the view every --interval until Ctrl-C"},
			durflag.New(cli.DurationFlag{Name: "interval", Destination: &c.interval, Value: time.Second,
				Usage: "with --watch: redraw every `DURATION`"}),
			&cli.StringFlag{Name: "wait-active", Destination: &c.waitActive,
				Usage: "wait until the node at `ADDR` (HOST:PORT, or a bare PORT for 127.0.0.1:PORT) reports itself active, then exit 0"},
		},
		Action: c.Run,
	}
}

func (c *statusCommand) Run(cCtx *cli.Context) error {
	const name = "status"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := noArgs(cCtx); err != nil {
		return err
	}
	switch {
	case c.watch && c.waitActive != "":
		return usageError(name, "--watch and --wait-active do not go together")
	case c.check && (c.watch || c.waitActive != ""):
		return usageError(name, "--check goes alone: not with --watch or --wait-active")
	case cCtx.IsSet("max-lag") && !c.check:
		return usageError(name, "--max-lag only applies with --check")
	case cCtx.IsSet("interval") && !c.watch:
		return usageError(name, "--interval only applies with --watch")
	case c.watch && c.interval < 10*time.Millisecond:
		return usageError(name, "--interval %s: must be at least 10ms", c.interval)
	}
	if c.waitActive != "" {
		c.waitActive = nodeAddr(c.waitActive)
		if _, _, err := net.SplitHostPort(c.waitActive); err != nil {
			return usageError(name, "--wait-active %q is not HOST:PORT (or a bare PORT)", c.waitActive)
		}
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	switch {
	case c.waitActive != "":
		return waitActive(ctx, g, g.status, c.waitActive, g.timeoutOr(waitActiveTimeout))
	case c.watch:
		return c.watchLoop(ctx, g)
	}
	v := survey.Run(ctx, g.Addrs, g.status)
	if err := ctx.Err(); err != nil {
		return clientFailure(ctx, g, "asking for status", err)
	}
	if v.Answered == 0 {
		return noNodeAnswered(g, v)
	}
	maxLag := uint64(defaultMaxLag)
	if c.check {
		maxLag = c.maxLag
	}
	problems := clusterProblems(v, maxLag)
	if g.JSON {
		err = printJSON(g.Stdout, statusJSONOf(v, problems, time.Time{}))
	} else if err = renderStatus(g.Stdout, v, styleOf(g)); err == nil {
		err = renderChanges(g.Stdout, v.Changes, styleOf(g), time.Now())
	}
	if err != nil || !c.check || len(problems) == 0 {
		return err
	}
	e := fail(exitFailed, "status --check: "+strings.Join(problems, "; "),
		"see `lockctl status`; --max-lag sets how far behind a standby may be")
	e.answered = g.JSON
	return e
}

// clusterProblems lists what is wrong with the cluster, in words, for --check:
// a node down or out of reach, a standby too far behind, no active or
// several. Addresses are escaped.
func clusterProblems(v survey.View, maxLag uint64) []string {
	var out []string
	for _, pr := range v.Problems(maxLag) {
		out = append(out, problemWords(pr))
	}
	return out
}

// problemWords is one problem of the cluster in a clause.
func problemWords(pr survey.Problem) string {
	switch pr.Kind {
	case survey.SeveralActive:
		claims := make([]string, len(pr.Claims))
		for i, a := range pr.Claims {
			claims[i] = printable(a)
		}
		return fmt.Sprintf("%d nodes claim the active role (%s)", len(pr.Claims), strings.Join(claims, ", "))
	case survey.NoActive:
		return "no node is active"
	case survey.NodeDown:
		return printable(pr.Addr) + " is down"
	case survey.NodeUnreachable:
		return fmt.Sprintf("%s does not answer lockctl (%s)", printable(pr.Addr), networkCause(pr.Err))
	case survey.StandbyLagging:
		return fmt.Sprintf("%s is %d changes behind the active (more than %d)", printable(pr.Addr), pr.Lag, pr.MaxLag)
	case survey.Degraded:
		return printable(pr.Addr) + " is degraded: no standby is in sync with it, so a crash of it may lose what it answered last"
	}
	return fmt.Sprintf("%s: problem %d", printable(pr.Addr), pr.Kind)
}

// watchLoop shows a fresh view every interval until ctx ends (Ctrl-C),
// which is how --watch is meant to stop: it returns nil then. On a
// terminal each view replaces the last; piped, every line starts with
// the time of its survey, so that a log of it reads on its own.
func (c *statusCommand) watchLoop(ctx context.Context, g *globals) error {
	st := styleOf(g)
	var buf bytes.Buffer
	seen := changesSeen{}
	for i := 0; ; i++ {
		v := survey.Run(ctx, g.Addrs, g.status)
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		buf.Reset()
		switch {
		case g.JSON:
			printJSON(&buf, statusJSONOf(v, clusterProblems(v, defaultMaxLag), now))
		case st.Table:
			// One write per frame: clear and redraw without flicker.
			buf.WriteString(clearScreen)
			p := newPalette(&buf, st.Color)
			fmt.Fprintf(&buf, "%s\n\n", p.faint.Render(fmt.Sprintf(
				"every %s%s%s%sCtrl-C to stop", c.interval, st.dot(), now.Format("15:04:05"), st.dot())))
			if v.Answered == 0 {
				fmt.Fprintf(&buf, "no node answered at %s (%s); still trying\n", printable(g.AddrList), printableText(firstCause(v)))
			} else {
				renderStatus(&buf, v, st)
				renderChanges(&buf, v.Changes, st, now)
			}
		default:
			stamp := now.UTC().Format(time.RFC3339)
			if v.Answered == 0 {
				fmt.Fprintf(&buf, "%s  no node answered at %s (%s); still trying\n", stamp, printable(g.AddrList), printableText(firstCause(v)))
				break
			}
			// Measured with the header every time, so that the columns
			// line up from one survey to the next; written once.
			var view bytes.Buffer
			s := st
			s.NoHeaders = false
			renderStatus(&view, v, s)
			for j, line := range strings.Split(strings.TrimSuffix(view.String(), "\n"), "\n") {
				switch {
				case j > 0:
					fmt.Fprintf(&buf, "%s  %s\n", stamp, line)
				case i == 0 && !st.NoHeaders:
					fmt.Fprintf(&buf, "%-*s  %s\n", len(stamp), "TIME", line)
				}
			}
			// A log of it says each change once, as it turns up.
			buf.WriteString(watchChangeLines(stamp, seen.fresh(v.Changes), st))
		}
		if _, err := g.Stdout.Write(buf.Bytes()); err != nil {
			return fail(exitFailed, "cannot write the status: "+err.Error(), "")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.interval):
		}
	}
}

// waitActive waits until addr reports itself active, and says so, or
// fails with what it said last once timeout passes.
func waitActive(ctx context.Context, g *globals, ask survey.StatusFunc, addr string, timeout time.Duration) error {
	waited, last, err := survey.WaitActive(ctx, ask, addr, timeout, waitActivePoll)
	switch {
	case errors.Is(err, survey.ErrNotActive):
		return fail(exitFailed,
			fmt.Sprintf("%s did not become active within %s (last seen: %s)", printable(addr), timeout, lastSeen(last)),
			"see the whole cluster with `lockctl status`, or wait longer with --timeout")
	case err != nil:
		return clientFailure(ctx, g, "waiting for "+printable(addr)+" to become active", err)
	}
	if g.JSON {
		return printJSON(g.Stdout, waitActiveJSON{Addr: addr, Active: true, WaitedMs: millis(waited)})
	}
	_, err = fmt.Fprintf(g.Stdout, "%s is active (waited %s)\n", printable(addr), shortDuration(waited))
	return err
}

// lastSeen is a node's last answer to --wait-active: its role and the
// active it names, or why it did not answer.
func lastSeen(a survey.Answer) string {
	if a.Err != nil {
		return "unreachable: " + networkCause(a.Err)
	}
	if a.Status.Active == "" {
		return "role=" + printable(a.Status.Role) + ", no active known"
	}
	return "role=" + printable(a.Status.Role) + ", active=" + printable(a.Status.Active)
}

// waitActiveJSON is what status --wait-active prints with --json.
type waitActiveJSON struct {
	Addr     string  `json:"addr"`
	Active   bool    `json:"active"`
	WaitedMs float64 `json:"waited_ms"`
}

// noNodeAnswered is the error of a survey in which nobody answered: the
// same words as every other command's. A node that said why it would not
// answer (a secret or TLS it wants, a refusal) is a setting to fix and is
// reported first, then one that took the connection and said nothing,
// then one that could not be reached at all.
func noNodeAnswered(g *globals, v survey.View) error {
	var srv *client.ServerError
	var setup *client.SetupError
	var tlsNode *speaksTLSError
	for _, n := range v.Nodes {
		switch {
		case n.Err == nil:
		case errors.As(n.Err, &tlsNode):
			return needsTLS(tlsNode.addr, n.Err)
		case errors.As(n.Err, &setup):
			return setupFailure(setup, n.Err)
		case errors.As(n.Err, &srv):
			if e := authRequired(n.Addr, srv.Msg, n.Err); e != nil {
				return e
			}
			return &exitError{code: exitFailed, what: fmt.Sprintf("lockd at %s refused the status: %s", printable(n.Addr), printableText(srv.Msg)),
				try: "see the Security section of lockd's README", err: n.Err}
		}
	}
	for _, n := range v.Nodes {
		if errors.Is(n.Err, client.ErrNoAnswer) {
			e := noAnswer(g, "asking for status", n.Err)
			e.what = fmt.Sprintf("lockd at %s did not answer: it took the connection, then said nothing for --failure-timeout %s", printable(g.AddrList), min(g.Timeout, g.FailureTimeout))
			e.try = "check that the node is not frozen or overloaded, or allow more with --failure-timeout"
			return e
		}
	}
	for _, n := range v.Nodes {
		if n.Err != nil {
			return unreachable(g, n.Err)
		}
	}
	return unreachable(g, errors.New("no node was asked"))
}

// firstCause is why the first node that did not answer said nothing.
func firstCause(v survey.View) string {
	for _, n := range v.Nodes {
		if n.Err != nil {
			return networkCause(n.Err)
		}
	}
	return "no address to ask"
}

// statusJSON is the --json shape of status; it is part of lockctl's
// contract with scripts.
type statusJSON struct {
	// Time is when the survey was made, with --watch only.
	Time     string           `json:"time,omitempty"`
	Active   *string          `json:"active"`
	Nodes    []statusNodeJSON `json:"nodes"`
	Healthy  bool             `json:"healthy"`
	Problems []string         `json:"problems"`
	// Changes are the cluster's last role changes, oldest first.
	Changes []statusChangeJSON `json:"changes"`
}

type statusNodeJSON struct {
	Addr          string   `json:"addr"`
	Priority      *int     `json:"priority"`
	Role          string   `json:"role"`
	Reachable     bool     `json:"reachable"`
	Lag           *uint64  `json:"lag"`
	Token         *uint64  `json:"token,string"`
	UptimeSeconds *float64 `json:"uptime_seconds"`
	Sticky        bool     `json:"sticky"`
	Replication   *string  `json:"replication"`
	Degraded      bool     `json:"degraded"`
	Durability    *string  `json:"durability"`
	Error         *string  `json:"error"`
}

func statusJSONOf(v survey.View, problems []string, at time.Time) statusJSON {
	out := statusJSON{Nodes: []statusNodeJSON{}, Healthy: len(problems) == 0, Problems: []string{}, Changes: changesJSONOf(v.Changes)}
	out.Problems = append(out.Problems, problems...)
	if !at.IsZero() {
		out.Time = at.UTC().Format(time.RFC3339Nano)
	}
	if v.Active != "" {
		out.Active = &v.Active
	}
	for _, n := range v.Nodes {
		j := statusNodeJSON{Addr: n.Addr, Role: n.Role, Reachable: n.Reachable, Sticky: n.Sticky, Degraded: n.Degraded}
		if n.Replication != "" {
			j.Replication = ptrTo(n.Replication)
		}
		if n.Durability != "" {
			j.Durability = ptrTo(n.Durability)
		}
		if n.Priority > 0 {
			j.Priority = ptrTo(n.Priority)
		}
		if n.HasLag {
			j.Lag = ptrTo(n.Lag)
		}
		if n.HasToken {
			j.Token = ptrTo(n.Token)
		}
		if n.HasUptime {
			j.UptimeSeconds = ptrTo(seconds(n.Uptime))
		}
		if n.Err != nil && !n.Reachable {
			j.Error = ptrTo(networkCause(n.Err))
		}
		out.Nodes = append(out.Nodes, j)
	}
	return out
}

// ptrTo is v as a JSON value that may be null.
func ptrTo[T any](v T) *T { return &v }
