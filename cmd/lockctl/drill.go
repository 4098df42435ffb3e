package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/drill"
	"github.com/lockd-io/lockd/cmd/internal/durflag"
	"github.com/lockd-io/lockd/cmd/internal/survey"

	"github.com/lockd-io/lockd/proto/client"
)

// drillCommand is a failover drill: a steady lock workload through one
// client, a disruption in the middle, and a verdict on what the clients
// saw. It is meant for CI, where a bound exceeded fails the job.
type drillCommand struct {
	workers   int
	keys      int
	lease     time.Duration
	duration  time.Duration
	action    string
	run       string
	at        time.Duration
	maxGap    time.Duration
	maxErrors int
	maxLost   int
	// expectFailover: the drill fails unless the action moved the active
	// role to another node.
	expectFailover bool
	// report is --report: the file the HTML report goes to.
	report string
}

// drillActionTimeout bounds a handoff action, as handoff's --timeout.
const drillActionTimeout = 10 * time.Second

func (c *drillCommand) Command() *cli.Command {
	return &cli.Command{
		Name:  "drill",
		Usage: "run a failover drill: lock traffic, a disruption, a verdict",
		UsageText: "lockctl drill [--workers 8] [--keys 16] [--lease 5s] [--duration 10s]\n" +
			"       [--action handoff|none | --run 'CMD'] [--at 3s]\n" +
			"       [--max-gap DURATION] [--max-errors N] [--max-lost N] [--report FILE]",
		Description: "Runs --workers goroutines that acquire and release random keys (of --keys)\n" +
			"through one shared client, the way an application does, for --duration. At\n" +
			"--at it disrupts the cluster: a handoff of the active role (the default), or\n" +
			"your command run with `sh -c` (for example one that kills the active node).\n" +
			"The command sees LOCKD_ADDR (--addr), LOCKD_ACTIVE_ADDR (the node that was\n" +
			"active when the drill started, as status reports it, empty when none was)\n" +
			"and LOCKD_ACTIVE_PORT (its port), so that it can stop the active and not a\n" +
			"standby, for example by a pid file named after the port. Then it reports:\n\n" +
			"   active   the active node before and after\n" +
			"   cycles   acquire+release cycles completed\n" +
			"   errors   errors the client could not hide (it follows redirects and moves\n" +
			"            requests off dropped connections by itself)\n" +
			"   lost     answers the new active did not know of, grants and releases:\n" +
			"            a grant is lost when its release says notheld; a release is lost\n" +
			"            when, after the old active answered it ok, the active still\n" +
			"            names its token as the key's holder. The drill asks the active\n" +
			"            (Q) about the key of any acquire that waits unusually long\n" +
			"            (250ms, or a quarter of --lease), and about every key once the\n" +
			"            workload ended.\n" +
			"            lockd --replication sync (the default) loses neither in a crash;\n" +
			"            async may lose the last answers\n" +
			"   in doubt releases in flight during the action that came back notheld: the\n" +
			"            old active may have applied one and gone before its answer did\n" +
			"            (the client re-sent it, and the token was gone), or its grant was\n" +
			"            lost. No client can tell which, so they are not counted as lost.\n" +
			"            A --run command's signal may stop the node a little after the\n" +
			"            command exits, so the action counts until 100ms after it\n" +
			"   ghosts   keys held by a grant no worker received: its answer was lost,\n" +
			"            and the acquire the client sent again waited behind it\n" +
			"   stall    the longest a key stayed held by a lost release or a ghost: from\n" +
			"            when it was freed to its next grant (or the drill's end)\n" +
			"   gap      the longest time without any grant: what the disruption cost\n" +
			"   takeover from the last grant by the old active to the first by the new\n" +
			"            one (its tokens carry a newer epoch); null in JSON if none came\n" +
			"   fencing  whether every token of a key was larger than every earlier one\n\n" +
			"The drill fails (exit 1) when fencing is violated, the action failed, no\n" +
			"lock was granted at all, the action removed the active and no new active\n" +
			"granted a lock afterwards (takeover none: the clients never moved), or a\n" +
			"bound you set is exceeded. With --expect-failover it also fails when the\n" +
			"active after the drill is the node that was active before: a drill meant\n" +
			"to test a failover whose action stopped a standby, or nothing, does not\n" +
			"pass. --json prints one object:\n" +
			"   {\"workers\":8,\"keys\":16,\"lease_seconds\":5,\"duration_seconds\":10,\n" +
			"    \"action\":{\"kind\":\"handoff\",\"command\":null,\"at_seconds\":3,\"ok\":true,\n" +
			"    \"detail\":\"...\"},\"active_before\":\"ADDR\",\"active_after\":\"ADDR\",\n" +
			"    \"cycles\":48211,\"grants\":48211,\n" +
			"    \"errors\":0,\"error_kinds\":{},\"first_error\":null,\n" +
			"    \"lost\":0,\"lost_grants\":0,\"lost_releases\":0,\"in_doubt\":0,\"ghosts\":0,\n" +
			"    \"unchecked_keys\":0,\"stall_ms\":null,\"stall_key\":null,\"stall_cause\":null,\n" +
			"    \"gap_ms\":14.2,\"takeover_ms\":3.1,\"gap_from_seconds\":3.001,\n" +
			"    \"gap_to_seconds\":3.015,\n" +
			"    \"fencing\":{\"ok\":true,\"violations\":[]},\"pass\":true,\"failures\":[]}\n" +
			"A violation reads\n" +
			"   {\"key\":K,\"token\":\"T\",\"at_seconds\":S,\"after\":\"U\",\"after_at_seconds\":R}:\n" +
			"a client got token T at S, after another got the larger (or equal) U at R.\n" +
			"lost is lost_grants + lost_releases, what --max-lost bounds; unchecked_keys\n" +
			"counts keys the last look could not ask about (a loss there would go unseen,\n" +
			"so with --max-lost the drill fails); stall_cause is \"lost release\" or\n" +
			"\"ghost grant\".\n\n" +
			"Examples:\n" +
			"   lockctl drill --max-gap 500ms --max-errors 0\n" +
			"   lockctl drill --expect-failover --max-gap 3s \\\n" +
			"       --run 'kill $(cat /run/lockd-$LOCKD_ACTIVE_PORT.pid)'\n" +
			"   lockctl drill --run 'kill -9 $(cat /run/lockd-a.pid)' --max-lost 0\n" +
			"   lockctl drill --action none --duration 5s     # a baseline\n" +
			"   lockctl drill --max-gap 500ms --report drill.html   # and a page\n\n" +
			exitCodesHelp(
				exitLine("0", "the drill passed"),
				exitLine("1", "it failed: a bound exceeded, fencing violated, the action failed, or no grant"),
				helpExitUsage,
				exitLine("4", "no lockd node could be reached before the drill started"),
				exitLine("6", "a node took the connection but did not answer, before the drill started"),
				helpExitSignal),
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "workers", Destination: &c.workers, Value: 8,
				Usage: "run `N` acquire/release loops at once"},
			&cli.IntFlag{Name: "keys", Destination: &c.keys, Value: 16,
				Usage: "pick keys at random among `N` distinct ones"},
			leaseFlag(&c.lease, 5*time.Second),
			durflag.New(cli.DurationFlag{Name: "duration", Destination: &c.duration, Value: 10 * time.Second,
				Usage: "run the workload for `DURATION`"}),
			&cli.StringFlag{Name: "action", Destination: &c.action, Value: drill.ActionHandoff,
				Usage: "`ACTION` to take at --at: handoff (of the active role) or none"},
			&cli.StringFlag{Name: "run", Destination: &c.run,
				Usage: "run `CMD` with sh -c at --at instead of a handoff, e.g. one that kills a node"},
			durflag.New(cli.DurationFlag{Name: "at", Destination: &c.at, Value: 3 * time.Second,
				Usage: "start the action `DURATION` after the workload starts"}),
			durflag.New(cli.DurationFlag{Name: "max-gap", Destination: &c.maxGap, DefaultText: "no bound",
				Usage: "fail when the longest time without a grant exceeds `DURATION`"}),
			&cli.IntFlag{Name: "max-errors", Destination: &c.maxErrors, DefaultText: "no bound",
				Usage: "fail when the client saw more than `N` errors"},
			&cli.IntFlag{Name: "max-lost", Destination: &c.maxLost, DefaultText: "no bound",
				Usage: "fail when more than `N` grants and releases together were lost in the failover"},
			&cli.BoolFlag{Name: "expect-failover", Destination: &c.expectFailover,
				Usage: "fail unless the action moved the active role to another node"},
			&cli.StringFlag{Name: "report", Destination: &c.report, TakesFile: true,
				Usage: "also write the drill as an HTML page to `FILE`: a timeline of the grants per node, the action, the gap, the takeover, errors and releases in doubt, and the verdict (one file, nothing to fetch: attach it to the CI run)"},
		},
		Action: c.Run,
	}
}

func (c *drillCommand) Run(cCtx *cli.Context) error {
	const name = "drill"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := noArgs(cCtx); err != nil {
		return err
	}
	plan, err := c.plan(cCtx)
	if err != nil {
		return err
	}
	// The report's file is made before the drill runs, so that a path
	// that cannot be written fails at once, not after the drill.
	var report *os.File
	if c.report != "" {
		if report, err = os.Create(c.report); err != nil {
			return usageError(name, "--report %s: %s; give a file in a directory that exists and can be written", c.report, innermost(err))
		}
		defer report.Close()
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()

	before := survey.Run(ctx, g.Addrs, g.status)
	if before.Answered == 0 {
		return noNodeAnswered(g, before)
	}
	env := append(os.Environ(), "LOCKD_ADDR="+g.AddrList)
	env = append(env, actionEnv(before.Active)...)
	cl, err := g.client(client.Options{})
	if err != nil {
		return err
	}
	defer cl.Close()
	plan.Progress = new(drill.Progress)
	plan.Act = func(ctx context.Context) (bool, string) { return runAction(ctx, cl, g.status, plan, g.Stderr, env) }
	stopProgress := startProgress(g, func() string { return progressLine(plan.Progress.Snapshot(), plan, styleOf(g)) })
	rep := drill.Run(ctx, cl, plan)
	stopProgress()
	if ctx.Err() != nil {
		return clientFailure(ctx, g, "running the drill", ctx.Err())
	}
	after := survey.Run(ctx, g.Addrs, g.status)
	rep.ActiveBefore, rep.ActiveAfter = before.Active, after.Active
	judge(rep, plan)
	if g.JSON {
		if err := printJSON(g.Stdout, drillJSONOf(rep, plan)); err != nil {
			return err
		}
	} else if err := renderDrill(g.Stdout, rep, plan, styleOf(g).Color); err != nil {
		return err
	}
	if report != nil {
		err := writeDrillReport(report, rep, plan)
		if cerr := report.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return &exitError{code: exitFailed, what: fmt.Sprintf("the drill ran, but its report could not be written to %s: %s", c.report, innermost(err)),
				try: "check the disk and the file, and run the drill again", err: err}
		}
	}
	if len(rep.Failures) > 0 {
		// The report says why; the exit code is what CI reads.
		return silentExit(exitFailed)
	}
	return nil
}

// plan checks the flags and turns them into a drill.Plan.
func (c *drillCommand) plan(cCtx *cli.Context) (drill.Plan, error) {
	const name = "drill"
	p := drill.Plan{Workers: c.workers, Keys: c.keys, Lease: c.lease, Duration: c.duration,
		Action: c.action, At: c.at, MaxGap: -1, MaxErrors: -1, MaxLost: -1, ExpectFailover: c.expectFailover}
	switch {
	case c.workers < 1 || c.workers > 10000:
		return p, usageError(name, "--workers %d: want 1 to 10000", c.workers)
	case c.keys < 1 || c.keys > 100000:
		return p, usageError(name, "--keys %d: want 1 to 100000", c.keys)
	case c.duration <= 0:
		return p, usageError(name, "--duration %s: must be more than 0", c.duration)
	case c.at < 0 || c.at >= c.duration:
		return p, usageError(name, "--at %s: must fall within --duration %s", c.at, c.duration)
	}
	if err := checkLease(name, c.lease); err != nil {
		return p, err
	}
	if cCtx.IsSet("run") {
		if cCtx.IsSet("action") {
			return p, usageError(name, "--run and --action do not go together: --run replaces the action")
		}
		if strings.TrimSpace(c.run) == "" {
			return p, usageError(name, "--run is empty; give the shell command to run at --at")
		}
		p.Action, p.Command = drill.ActionRun, c.run
	} else if c.action != drill.ActionHandoff && c.action != drill.ActionNone {
		return p, usageError(name, "--action %q: want handoff or none (or --run CMD)", c.action)
	}
	if c.expectFailover && p.Action == drill.ActionNone {
		return p, usageError(name, "--expect-failover with --action none cannot pass: give --run CMD or --action handoff")
	}
	if cCtx.IsSet("max-gap") {
		if c.maxGap <= 0 {
			return p, usageError(name, "--max-gap %s: must be more than 0", c.maxGap)
		}
		p.MaxGap = c.maxGap
	}
	if cCtx.IsSet("max-errors") {
		if c.maxErrors < 0 {
			return p, usageError(name, "--max-errors %d: must be 0 or more", c.maxErrors)
		}
		p.MaxErrors = c.maxErrors
	}
	if cCtx.IsSet("max-lost") {
		if c.maxLost < 0 {
			return p, usageError(name, "--max-lost %d: must be 0 or more", c.maxLost)
		}
		p.MaxLost = c.maxLost
	}
	return p, nil
}

// progressLine is the live line: elapsed time, grants, errors and the
// action.
func progressLine(pr drill.Snapshot, p drill.Plan, s renderStyle) string {
	if pr.Start.IsZero() {
		return "drill: starting"
	}
	elapsed := time.Since(pr.Start)
	parts := []string{fmt.Sprintf("drill: %s of %s", humanDuration(min(elapsed, p.Duration)), p.Duration),
		countOf(pr.Grants, "grant", "grants"), countOf(pr.Errors, "error", "errors")}
	switch {
	case p.Action == drill.ActionNone:
	case pr.Acted:
		parts = append(parts, "action: "+printableText(pr.Action))
	case elapsed < p.At:
		parts = append(parts, fmt.Sprintf("%s in %s", p.Action, humanDuration(p.At-elapsed)))
	default:
		parts = append(parts, p.Action+" running")
	}
	return strings.Join(parts, s.dot())
}

// runAction performs the plan's action and says how it went.
func runAction(ctx context.Context, cl handoffer, ask survey.StatusFunc, p drill.Plan, out io.Writer, env []string) (bool, string) {
	switch p.Action {
	case drill.ActionNone:
		return true, "none"
	case drill.ActionHandoff:
		actx, cancel := context.WithTimeout(ctx, drillActionTimeout)
		defer cancel()
		res, err := runHandoff(actx, cl, ask, "")
		if err != nil {
			var srv *client.ServerError
			if errors.As(err, &srv) {
				return false, "handoff refused: " + srv.Msg
			}
			return false, "handoff failed: " + oneLine(err.Error())
		}
		return true, fmt.Sprintf("handed off to %s in %s", printable(res.To), shortDuration(res.Gap))
	case drill.ActionRun:
		cmd := exec.CommandContext(ctx, "sh", "-c", p.Command)
		cmd.Stdout, cmd.Stderr, cmd.Env = out, out, env
		began := time.Now()
		err := cmd.Run()
		took := shortDuration(time.Since(began))
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return false, fmt.Sprintf("command %s after %s", ee.ProcessState, took)
			}
			return false, "command did not run: " + err.Error()
		}
		return true, "command exited 0 after " + took
	}
	return false, "unknown action " + p.Action
}

// judge puts the drill's verdict into words, the report's failures.
// Addresses and keys are escaped with printable; the rest is escaped as
// a line when the report is printed.
func judge(r *drill.Report, p drill.Plan) {
	for _, f := range r.Verdict(p) {
		r.Failures = append(r.Failures, failureWords(f))
	}
}

// failureWords is why the drill failed, in one clause.
func failureWords(f drill.Failure) string {
	switch f := f.(type) {
	case drill.FencingViolated:
		return fmt.Sprintf("fencing violated: key %s got token %d after %d", printable(f.Key), f.Token, f.After)
	case drill.ActionFailed:
		return "the action failed: " + f.Detail
	case drill.NoTakeover:
		return noTakeoverWords(f)
	case drill.NoActiveBefore:
		return "--expect-failover: no node was active when the drill started, so no failover could be seen"
	case drill.StillActive:
		return fmt.Sprintf("--expect-failover: %s is still the active: the action did not take the role away "+
			"(did it stop a standby? LOCKD_ACTIVE_ADDR names the active)", printable(f.Active))
	case drill.NoGrant:
		return "no lock was granted"
	case drill.GapOver:
		return fmt.Sprintf("gap %s is over --max-gap %s", shortDuration(f.Gap), f.Max)
	case drill.ErrorsOver:
		return fmt.Sprintf("%d errors are over --max-errors %d", f.Errors, f.Max)
	case drill.LostOver:
		return fmt.Sprintf("lost %d (%s, %s) is over --max-lost %d", f.Lost(),
			countOf(f.Grants, "grant", "grants"), countOf(f.Releases, "release", "releases"), f.Max)
	case drill.LostUnproven:
		return fmt.Sprintf("%s could not be asked about at the end, so --max-lost %d is not proven: "+
			"see that the cluster has an active (lockctl status) and run the drill again", countOf(f.Keys, "key", "keys"), f.Max)
	}
	return fmt.Sprintf("%+v", f)
}

// noTakeoverWords says that the action removed the active and no new
// active granted a lock afterwards, and why.
func noTakeoverWords(f drill.NoTakeover) string {
	what := fmt.Sprintf("no new active granted a lock after the action removed the active %s", printable(f.Before))
	var cause string
	switch f.Cause {
	case drill.CauseNoActive:
		cause = "no node is active now"
	case drill.CauseOnlyErrors:
		cause = fmt.Sprintf("%s is active now, but the clients got no lock after the action, only %s (first: %s)",
			printable(f.After), countOf(f.Errors, "error", "errors"), oneLine(f.FirstError))
	case drill.CauseStayedWithOld:
		cause = fmt.Sprintf("%s is active now, but the clients got no lock after the action: their requests stayed with the old active", printable(f.After))
	default: // drill.CauseOldEpoch
		cause = fmt.Sprintf("%s is active now, but every grant after the action came from the old active's epoch", printable(f.After))
	}
	return what + ": " + cause
}

// actionEnv is what a --run command is told of the active: its address
// and port, empty when no node was active.
func actionEnv(active string) []string {
	port := ""
	if _, p, err := net.SplitHostPort(active); err == nil {
		port = p
	}
	return []string{"LOCKD_ACTIVE_ADDR=" + active, "LOCKD_ACTIVE_PORT=" + port}
}
