package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/engine"
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
}

// Actions a drill can take at --at.
const (
	actionHandoff = "handoff"
	actionNone    = "none"
	actionRun     = "run" // --run CMD
)

const (
	// drillActionTimeout bounds a handoff action, as handoff's --timeout.
	drillActionTimeout = 10 * time.Second
	// drillBackoff is the pause of a worker after an error, so an outage
	// is counted in failed cycles, not in a hot loop's thousands.
	drillBackoff = 10 * time.Millisecond
	// drillReleaseFor bounds a release at the end of a cycle; the client
	// re-sends it for 5s.
	drillReleaseFor = 6 * time.Second
	// maxViolationsShown is how many fencing violations a report lists.
	maxViolationsShown = 5
)

func (c *drillCommand) Command() *cli.Command {
	return &cli.Command{
		Name:  "drill",
		Usage: "run a failover drill: lock traffic, a handoff or your command, and a verdict",
		UsageText: "lockctl drill [--workers 8] [--keys 16] [--lease 5s] [--duration 10s]\n" +
			"       [--action handoff|none | --run 'CMD'] [--at 3s]\n" +
			"       [--max-gap DURATION] [--max-errors N] [--max-lost N]",
		Description: "Runs --workers goroutines that acquire and release random keys (of --keys)\n" +
			"through one shared client, the way an application does, for --duration. At\n" +
			"--at it disrupts the cluster: a handoff of the active role (the default), or\n" +
			"your command run with `sh -c` (for example one that kills the active node;\n" +
			"it sees LOCKD_ADDR). Then it reports:\n\n" +
			"   active   the active node before and after\n" +
			"   cycles   acquire+release cycles completed\n" +
			"   errors   errors the client could not hide (it follows redirects and moves\n" +
			"            requests off dropped connections by itself)\n" +
			"   lost     grants the new active did not know of (release said notheld):\n" +
			"            replication is asynchronous, so a failover may lose recent grants\n" +
			"   gap      the longest time without any grant: what the disruption cost\n" +
			"   takeover from the last grant by the old active to the first by the new\n" +
			"            one (its tokens carry a newer epoch); null in JSON if none came\n" +
			"   fencing  whether every token of a key was larger than every earlier one\n\n" +
			"The drill fails (exit 1) when fencing is violated, the action failed, no lock\n" +
			"was granted at all, the action removed the active and no new active granted\n" +
			"a lock afterwards (takeover none: the clients never moved), or a bound you set\n" +
			"is exceeded. --json prints one object:\n" +
			"   {\"workers\":8,\"keys\":16,\"lease_seconds\":5,\"duration_seconds\":10,\n" +
			"    \"action\":{\"kind\":\"handoff\",\"command\":null,\"at_seconds\":3,\"ok\":true,\"detail\":\"...\"},\n" +
			"    \"active_before\":\"ADDR\",\"active_after\":\"ADDR\",\"cycles\":48211,\"grants\":48211,\n" +
			"    \"errors\":0,\"error_kinds\":{},\"first_error\":null,\"lost\":0,\n" +
			"    \"gap_ms\":14.2,\"takeover_ms\":3.1,\"gap_from_seconds\":3.001,\"gap_to_seconds\":3.015,\n" +
			"    \"fencing\":{\"ok\":true,\"violations\":[]},\"pass\":true,\"failures\":[]}\n" +
			"A violation reads {\"key\":K,\"token\":T,\"at_seconds\":S,\"after\":U,\"after_at_seconds\":R}:\n" +
			"a client got token T at S, after another got the larger (or equal) U at R.\n\n" +
			"Examples:\n" +
			"   lockctl drill --max-gap 500ms --max-errors 0\n" +
			"   lockctl drill --run 'kill $(cat /run/lockd-a.pid)' --at 2s --duration 8s --max-gap 3s\n" +
			"   lockctl drill --action none --duration 5s   # a baseline without disruption\n\n" +
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
			&cli.DurationFlag{Name: "duration", Destination: &c.duration, Value: 10 * time.Second,
				Usage: "run the workload for `DURATION`"},
			&cli.StringFlag{Name: "action", Destination: &c.action, Value: actionHandoff,
				Usage: "`ACTION` to take at --at: handoff (of the active role) or none"},
			&cli.StringFlag{Name: "run", Destination: &c.run,
				Usage: "run `CMD` with sh -c at --at instead of a handoff, e.g. one that kills a node"},
			&cli.DurationFlag{Name: "at", Destination: &c.at, Value: 3 * time.Second,
				Usage: "start the action `DURATION` after the workload starts"},
			&cli.DurationFlag{Name: "max-gap", Destination: &c.maxGap, DefaultText: "no bound",
				Usage: "fail when the longest time without a grant exceeds `DURATION`"},
			&cli.IntFlag{Name: "max-errors", Destination: &c.maxErrors, DefaultText: "no bound",
				Usage: "fail when the client saw more than `N` errors"},
			&cli.IntFlag{Name: "max-lost", Destination: &c.maxLost, DefaultText: "no bound",
				Usage: "fail when more than `N` grants were lost in the failover"},
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
	plan.Output = g.Stderr
	plan.Env = append(os.Environ(), "LOCKD_ADDR="+g.AddrList)
	ctx, stop := withSignals(cCtx.Context)
	defer stop()

	before := survey(ctx, g.Addrs, g.status)
	if before.Answered == 0 {
		return noNodeAnswered(g, before)
	}
	cl, err := g.client(client.Options{})
	if err != nil {
		return err
	}
	defer cl.Close()
	plan.Progress = new(drillProgress)
	stopProgress := startProgress(g, func() string { return plan.Progress.line(plan, styleOf(g)) })
	rep := runDrill(ctx, cl, g.status, plan)
	stopProgress()
	if ctx.Err() != nil {
		return clientFailure(ctx, g, "running the drill", ctx.Err())
	}
	after := survey(ctx, g.Addrs, g.status)
	rep.ActiveBefore, rep.ActiveAfter = before.Active, after.Active
	rep.judge(plan)
	if g.JSON {
		if err := printJSON(g.Stdout, rep.json(plan)); err != nil {
			return err
		}
	} else if err := renderDrill(g.Stdout, rep, plan, styleOf(g).Color); err != nil {
		return err
	}
	if len(rep.Failures) > 0 {
		// The report says why; the exit code is what CI reads.
		return silentExit(exitFailed)
	}
	return nil
}

// plan checks the flags and turns them into a drillPlan.
func (c *drillCommand) plan(cCtx *cli.Context) (drillPlan, error) {
	const name = "drill"
	p := drillPlan{Workers: c.workers, Keys: c.keys, Lease: c.lease, Duration: c.duration,
		Action: c.action, At: c.at, MaxGap: -1, MaxErrors: -1, MaxLost: -1}
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
		p.Action, p.Command = actionRun, c.run
	} else if c.action != actionHandoff && c.action != actionNone {
		return p, usageError(name, "--action %q: want handoff or none (or --run CMD)", c.action)
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

// drillPlan is a checked drill.
type drillPlan struct {
	Workers   int
	Keys      int
	Lease     time.Duration
	Duration  time.Duration
	Action    string // actionHandoff, actionNone or actionRun
	Command   string // the shell command of actionRun
	At        time.Duration
	MaxGap    time.Duration // -1: no bound
	MaxErrors int           // -1: no bound
	MaxLost   int           // -1: no bound
	Output    io.Writer     // where the command's output goes (lockctl's stderr)
	Env       []string      // the command's environment
	KeyPrefix string        // "": drill-XXXX-, unique to this run
	// Progress, when set, is kept up to date while the drill runs.
	Progress *drillProgress
}

// drillProgress is what the live line of a drill shows: counts kept as
// the workers go, and the action's outcome once it has one.
type drillProgress struct {
	start  atomic.Int64 // UnixNano; 0 until the workload starts
	grants atomic.Int64
	errors atomic.Int64
	action atomic.Pointer[string]
}

// line is the live line: elapsed time, grants, errors and the action.
func (pr *drillProgress) line(p drillPlan, s renderStyle) string {
	start := pr.start.Load()
	if start == 0 {
		return "drill: starting"
	}
	elapsed := time.Since(time.Unix(0, start))
	parts := []string{fmt.Sprintf("drill: %s of %s", humanDuration(min(elapsed, p.Duration)), p.Duration),
		countOf(int(pr.grants.Load()), "grant", "grants"), countOf(int(pr.errors.Load()), "error", "errors")}
	switch d := pr.action.Load(); {
	case p.Action == actionNone:
	case d != nil:
		parts = append(parts, "action: "+printableText(*d))
	case elapsed < p.At:
		parts = append(parts, fmt.Sprintf("%s in %s", p.Action, humanDuration(p.At-elapsed)))
	default:
		parts = append(parts, p.Action+" running")
	}
	return strings.Join(parts, s.dot())
}

// drillClient is what a drill needs of the lockd client.
type drillClient interface {
	Acquire(ctx context.Context, key string, lease, wait time.Duration) (client.Lock, error)
	Release(ctx context.Context, key string, token uint64) error
	Handoff(ctx context.Context, to string) (string, error)
}

// drillGrant is one granted acquire: when (since the start) and which token.
type drillGrant struct {
	At    time.Duration
	Token uint64
	Key   int32
}

// fenceViolation is a token that was not larger than an earlier one of the
// same key.
type fenceViolation struct {
	Key     string
	Token   uint64
	At      time.Duration // when the client got Token
	After   uint64        // the largest earlier token of the key
	AfterAt time.Duration // when the client got After
}

// drillReport is what a drill measured.
type drillReport struct {
	Start        time.Time
	ActiveBefore string
	ActiveAfter  string

	ActionAt     time.Duration
	ActionOK     bool
	ActionDetail string

	Grants      int
	GrantsAfter int // grants from the action on
	Cycles      int
	Errors      int
	ErrorKinds  map[string]int
	FirstError  string
	Lost        int

	Gap     time.Duration
	GapFrom time.Duration
	GapTo   time.Duration

	// Takeover is the time from the action to the first grant made by a
	// new active (TookOver false when none came).
	Takeover time.Duration
	TookOver bool

	Violations     []fenceViolation // the first maxViolationsShown
	ViolationCount int

	Failures []string
}

// runDrill runs the workload and the action, and measures them.
func runDrill(ctx context.Context, cl drillClient, ask statusFunc, p drillPlan) *drillReport {
	if p.KeyPrefix == "" {
		p.KeyPrefix = fmt.Sprintf("drill-%04x-", rand.IntN(1<<16))
	}
	keyName := func(k int) string { return p.KeyPrefix + strconv.Itoa(k) }
	rep := &drillReport{ErrorKinds: make(map[string]int), Start: time.Now()}
	start := rep.Start
	pr := p.Progress
	if pr == nil {
		pr = new(drillProgress)
	}
	pr.start.Store(start.UnixNano())
	wctx, cancel := context.WithDeadline(ctx, start.Add(p.Duration))
	defer cancel()

	var mu sync.Mutex // guards the counters of rep while workers run
	fail := func(err error) {
		pr.errors.Add(1)
		kind := drillErrorKind(err)
		mu.Lock()
		rep.Errors++
		rep.ErrorKinds[kind]++
		if rep.FirstError == "" {
			rep.FirstError = oneLine(err.Error())
		}
		mu.Unlock()
	}
	grants := make([][]drillGrant, p.Workers)
	var wg sync.WaitGroup
	for w := range p.Workers {
		wg.Go(func() {
			var mine []drillGrant
			cycles, lost := 0, 0
			for wctx.Err() == nil {
				k := rand.IntN(p.Keys)
				lock, err := cl.Acquire(wctx, keyName(k), p.Lease, 0)
				if err != nil {
					if wctx.Err() != nil {
						break
					}
					fail(err)
					sleepCtx(wctx, drillBackoff)
					continue
				}
				mine = append(mine, drillGrant{At: time.Since(start), Token: lock.Token, Key: int32(k)})
				pr.grants.Add(1)
				// The release outlives the workload's end, so that a
				// drill leaves no lock behind.
				rctx, rcancel := context.WithTimeout(ctx, drillReleaseFor)
				err = cl.Release(rctx, keyName(k), lock.Token)
				rcancel()
				switch {
				case err == nil:
					cycles++
				case errors.Is(err, client.ErrNotHeld):
					lost++
				case ctx.Err() != nil:
				default:
					fail(err)
					sleepCtx(wctx, drillBackoff)
				}
			}
			grants[w] = mine
			mu.Lock()
			rep.Cycles += cycles
			rep.Lost += lost
			mu.Unlock()
		})
	}

	// The action runs beside the workload; the report waits for it.
	actionDone := make(chan struct{})
	go func() {
		defer close(actionDone)
		select {
		case <-wctx.Done():
			rep.ActionDetail = "not started: the drill ended first"
			return
		case <-time.After(time.Until(start.Add(p.At))):
		}
		rep.ActionAt = time.Since(start)
		rep.ActionOK, rep.ActionDetail = runAction(ctx, cl, ask, p)
		detail := rep.ActionDetail
		pr.action.Store(&detail)
	}()
	wg.Wait()
	end := time.Since(start)
	<-actionDone

	var all []drillGrant
	for _, g := range grants {
		all = append(all, g...)
	}
	slices.SortStableFunc(all, func(a, b drillGrant) int { return cmp.Compare(a.At, b.At) })
	rep.Grants = len(all)
	rep.Gap, rep.GapFrom, rep.GapTo = longestGap(all, min(end, p.Duration))
	if p.Action != actionNone && rep.ActionOK {
		rep.Takeover, rep.TookOver = takeover(all, rep.ActionAt)
		for _, g := range all {
			if g.At >= rep.ActionAt {
				rep.GrantsAfter++
			}
		}
	}
	rep.ViolationCount, rep.Violations = checkFencing(all, keyName)
	return rep
}

// runAction performs the plan's action and says how it went.
func runAction(ctx context.Context, cl drillClient, ask statusFunc, p drillPlan) (bool, string) {
	switch p.Action {
	case actionNone:
		return true, "none"
	case actionHandoff:
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
	case actionRun:
		cmd := exec.CommandContext(ctx, "sh", "-c", p.Command)
		cmd.Stdout, cmd.Stderr, cmd.Env = p.Output, p.Output, p.Env
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

// drillErrorKind names an error for the report's tally.
func drillErrorKind(err error) string {
	var srv *client.ServerError
	switch {
	case errors.Is(err, client.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, client.ErrTimeout):
		return "timeout"
	case errors.Is(err, client.ErrNotHeld):
		return "notheld"
	case errors.As(err, &srv):
		return "refused"
	case errors.Is(err, client.ErrClosed):
		return "closed"
	}
	return "other"
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// longestGap is the longest interval without a grant between the start
// (0), the grants (sorted by time) and the end: a cluster that never
// recovered shows a gap that lasts until the end.
func longestGap(grants []drillGrant, end time.Duration) (gap, from, to time.Duration) {
	prev := time.Duration(0)
	consider := func(t time.Duration) {
		if t-prev > gap {
			gap, from, to = t-prev, prev, t
		}
		prev = t
	}
	for _, g := range grants {
		consider(g.At)
	}
	consider(max(end, prev))
	return gap, from, to
}

// takeover measures the time without an active that clients saw: from
// the last grant by the old active to the first grant by a new one. A
// token's high bits are the epoch of the node that issued it (see package
// engine), and a node that becomes active starts a newer epoch, so the new
// active's first grant is the first after the action whose epoch is newer
// than every epoch before the action.
func takeover(grants []drillGrant, actionAt time.Duration) (time.Duration, bool) {
	var before uint64
	for _, g := range grants {
		if g.At < actionAt {
			before = max(before, g.Token>>engine.CounterBits)
		}
	}
	lastOld := actionAt
	for _, g := range grants {
		epoch := g.Token >> engine.CounterBits
		if epoch <= before {
			lastOld = g.At
			continue
		}
		if g.At >= actionAt {
			return max(g.At-lastOld, 0), true
		}
	}
	return 0, false
}

// checkFencing checks, key by key and in grant order, that every token is
// larger than every earlier one. Grants are ordered by the time the
// client saw them: a lock is granted again only after its release, which
// follows the earlier grant, so on a correct cluster that order is the
// order of the grants themselves.
func checkFencing(grants []drillGrant, keyName func(int) string) (int, []fenceViolation) {
	high := make(map[int32]drillGrant)
	count := 0
	var shown []fenceViolation
	for _, g := range grants {
		if h, ok := high[g.Key]; ok && g.Token <= h.Token {
			count++
			if len(shown) < maxViolationsShown {
				shown = append(shown, fenceViolation{Key: keyName(int(g.Key)), Token: g.Token, At: g.At, After: h.Token, AfterAt: h.At})
			}
			continue
		}
		high[g.Key] = g
	}
	return count, shown
}

// judge checks the report against the plan's bounds and lists why the
// drill failed, if it did.
func (r *drillReport) judge(p drillPlan) {
	if r.ViolationCount > 0 {
		v := r.Violations[0]
		r.Failures = append(r.Failures, fmt.Sprintf("fencing violated: key %s got token %d after %d", printable(v.Key), v.Token, v.After))
	}
	if p.Action != actionNone && !r.ActionOK {
		r.Failures = append(r.Failures, "the action failed: "+r.ActionDetail)
	}
	if why := r.noTakeover(p); why != "" {
		r.Failures = append(r.Failures, why)
	}
	if r.Grants == 0 {
		r.Failures = append(r.Failures, "no lock was granted")
	}
	if p.MaxGap >= 0 && r.Gap > p.MaxGap {
		r.Failures = append(r.Failures, fmt.Sprintf("gap %s is over --max-gap %s", shortDuration(r.Gap), p.MaxGap))
	}
	if p.MaxErrors >= 0 && r.Errors > p.MaxErrors {
		r.Failures = append(r.Failures, fmt.Sprintf("%d errors are over --max-errors %d", r.Errors, p.MaxErrors))
	}
	if p.MaxLost >= 0 && r.Lost > p.MaxLost {
		r.Failures = append(r.Failures, fmt.Sprintf("%d lost grants are over --max-lost %d", r.Lost, p.MaxLost))
	}
}

// removedActive reports whether the action took the active role away
// from the node that had it: the active after the drill is another node,
// or none.
func (r *drillReport) removedActive(p drillPlan) bool {
	return p.Action != actionNone && r.ActionOK && r.ActiveBefore != "" && r.ActiveAfter != r.ActiveBefore
}

// noTakeover says why the drill fails when the action removed the active
// and no new active granted anything afterwards, whatever the bounds: the
// clients never moved. It is "" when that did not happen.
func (r *drillReport) noTakeover(p drillPlan) string {
	if !r.removedActive(p) || r.TookOver {
		return ""
	}
	what := fmt.Sprintf("no new active granted a lock after the action removed the active %s", printable(r.ActiveBefore))
	var cause string
	switch {
	case r.ActiveAfter == "":
		cause = "no node is active now"
	case r.GrantsAfter == 0 && r.Errors > 0:
		cause = fmt.Sprintf("%s is active now, but the clients got no lock after the action, only %s (first: %s)",
			printable(r.ActiveAfter), countOf(r.Errors, "error", "errors"), r.FirstError)
	case r.GrantsAfter == 0:
		cause = fmt.Sprintf("%s is active now, but the clients got no lock after the action: their requests stayed with the old active", printable(r.ActiveAfter))
	default:
		cause = fmt.Sprintf("%s is active now, but every grant after the action came from the old active's epoch", printable(r.ActiveAfter))
	}
	return what + ": " + cause
}

// drillJSON is the --json shape of drill; it is part of lockctl's
// contract with scripts.
type drillJSON struct {
	Workers         int              `json:"workers"`
	Keys            int              `json:"keys"`
	LeaseSeconds    float64          `json:"lease_seconds"`
	DurationSeconds float64          `json:"duration_seconds"`
	Action          drillActionJSON  `json:"action"`
	ActiveBefore    *string          `json:"active_before"`
	ActiveAfter     *string          `json:"active_after"`
	Cycles          int              `json:"cycles"`
	Grants          int              `json:"grants"`
	Errors          int              `json:"errors"`
	ErrorKinds      map[string]int   `json:"error_kinds"`
	FirstError      *string          `json:"first_error"`
	Lost            int              `json:"lost"`
	GapMs           float64          `json:"gap_ms"`
	TakeoverMs      *float64         `json:"takeover_ms"`
	GapFromSeconds  float64          `json:"gap_from_seconds"`
	GapToSeconds    float64          `json:"gap_to_seconds"`
	Fencing         drillFencingJSON `json:"fencing"`
	Pass            bool             `json:"pass"`
	Failures        []string         `json:"failures"`
}

type drillActionJSON struct {
	Kind      string  `json:"kind"`
	Command   *string `json:"command"`
	AtSeconds float64 `json:"at_seconds"`
	OK        bool    `json:"ok"`
	Detail    string  `json:"detail"`
}

type drillFencingJSON struct {
	OK         bool                 `json:"ok"`
	Violations []drillViolationJSON `json:"violations"`
}

type drillViolationJSON struct {
	Key            string  `json:"key"`
	Token          uint64  `json:"token"`
	AtSeconds      float64 `json:"at_seconds"`
	After          uint64  `json:"after"`
	AfterAtSeconds float64 `json:"after_at_seconds"`
}

// nullIfEmpty is s for JSON, null when empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (r *drillReport) json(p drillPlan) drillJSON {
	out := drillJSON{
		Workers: p.Workers, Keys: p.Keys,
		LeaseSeconds: p.Lease.Seconds(), DurationSeconds: p.Duration.Seconds(),
		Action: drillActionJSON{Kind: p.Action, Command: nullIfEmpty(p.Command),
			AtSeconds: secondsJSON(r.ActionAt), OK: r.ActionOK, Detail: r.ActionDetail},
		ActiveBefore: nullIfEmpty(r.ActiveBefore), ActiveAfter: nullIfEmpty(r.ActiveAfter),
		Cycles: r.Cycles, Grants: r.Grants, Errors: r.Errors, ErrorKinds: r.ErrorKinds,
		FirstError: nullIfEmpty(r.FirstError), Lost: r.Lost,
		GapMs: millis(r.Gap), GapFromSeconds: secondsJSON(r.GapFrom), GapToSeconds: secondsJSON(r.GapTo),
		Fencing:  drillFencingJSON{OK: r.ViolationCount == 0, Violations: []drillViolationJSON{}},
		Pass:     len(r.Failures) == 0,
		Failures: []string{},
	}
	if r.TookOver {
		ms := millis(r.Takeover)
		out.TakeoverMs = &ms
	}
	if p.Action == actionNone {
		out.Action.AtSeconds = 0
	}
	for _, v := range r.Violations {
		out.Fencing.Violations = append(out.Fencing.Violations, drillViolationJSON{Key: v.Key, Token: v.Token,
			AtSeconds: secondsJSON(v.At), After: v.After, AfterAtSeconds: secondsJSON(v.AfterAt)})
	}
	out.Failures = append(out.Failures, r.Failures...)
	return out
}

// renderDrill writes the report as a few labelled lines, the verdict last.
// Addresses and keys are escaped with printable; the details, errors and
// failures, which may quote a server or a command line, with printableText.
func renderDrill(w io.Writer, r *drillReport, p drillPlan, color bool) error {
	pal := newPalette(w, color)
	var b strings.Builder
	line := func(label, value string) {
		if label != "" {
			label += ":"
		}
		fmt.Fprintf(&b, "%-10s%s\n", label, value)
	}
	action := p.Action + " at " + p.At.String()
	switch p.Action {
	case actionNone:
		action = "no action"
	case actionRun:
		action = fmt.Sprintf("command at %s: %s", p.At, printableText(p.Command))
	}
	line("drill", fmt.Sprintf("%s, %s, %s, %s", countOf(p.Workers, "worker", "workers"), countOf(p.Keys, "key", "keys"), p.Duration, action))
	if p.Action != actionNone {
		detail := printableText(r.ActionDetail)
		if !r.ActionOK {
			detail = pal.bad.Render(detail)
		}
		line("action", detail)
	}
	active := nameOrNone(r.ActiveBefore) + " -> " + nameOrNone(r.ActiveAfter)
	if r.ActiveBefore == r.ActiveAfter {
		active = nameOrNone(r.ActiveBefore) + " (unchanged)"
	}
	line("active", active)
	line("cycles", fmt.Sprintf("%d completed (%d grants)", r.Cycles, r.Grants))
	errs := strconv.Itoa(r.Errors)
	if r.Errors > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(r.ErrorKinds)) {
			kinds = append(kinds, fmt.Sprintf("%d %s", r.ErrorKinds[k], k))
		}
		errs = pal.warn.Render(errs) + " (" + strings.Join(kinds, ", ") + "); first: " + printableText(r.FirstError)
	}
	line("errors", errs+boundNote(p.MaxErrors >= 0, strconv.Itoa(p.MaxErrors)))
	lost := strconv.Itoa(r.Lost)
	if r.Lost > 0 {
		lost = pal.warn.Render(lost) + " (release said notheld: the grant did not survive the failover)"
	}
	line("lost", lost+boundNote(p.MaxLost >= 0, strconv.Itoa(p.MaxLost)))
	line("gap", fmt.Sprintf("%s without a grant, from %s to %s%s", pal.strong.Render(shortDuration(r.Gap)),
		shortDuration(r.GapFrom), shortDuration(r.GapTo), boundNote(p.MaxGap >= 0, p.MaxGap.String())))
	if p.Action != actionNone && r.ActionOK {
		switch {
		case r.TookOver:
			line("takeover", pal.strong.Render(shortDuration(r.Takeover))+" from the last grant by the old active to the first by the new one")
		case r.removedActive(p):
			line("takeover", pal.bad.Render("none")+": no new active granted a lock after the action removed the active")
		default:
			line("takeover", "none: no new active granted a lock during the drill")
		}
	}
	if r.ViolationCount == 0 {
		line("fencing", pal.good.Render("ok"))
	} else {
		label := "fencing"
		for _, v := range r.Violations {
			line(label, pal.bad.Render(fmt.Sprintf("VIOLATED key %s: %d after %d", printable(v.Key), v.Token, v.After))+
				fmt.Sprintf(" (granted at %s, %s after it)", shortDuration(v.At), shortDuration(v.At-v.AfterAt)))
			label = ""
		}
		if more := r.ViolationCount - len(r.Violations); more > 0 {
			line("", fmt.Sprintf("and %d more", more))
		}
	}
	if len(r.Failures) == 0 {
		line("result", pal.good.Render("PASS"))
	} else {
		line("result", pal.bad.Render("FAIL")+": "+printableText(strings.Join(r.Failures, "; ")))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func boundNote(set bool, bound string) string {
	if !set {
		return ""
	}
	return " (limit " + bound + ")"
}

// nameOrNone is a node address as printed, or "none" when there is none.
func nameOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return printable(s)
}
