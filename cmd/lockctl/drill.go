package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/durflag"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
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
	// drillProbeAfter is how long an acquire waits before the drill asks
	// the active who holds its key (Q), and then again each as long while
	// it still waits: on a healthy cluster a drill's acquire waits a few
	// cycles of the holder, a millisecond or so, while a key held by a
	// release the new active did not know of stays held until its lease
	// ends. Leases shorter than four times this are probed at a quarter of
	// the lease.
	drillProbeAfter = 250 * time.Millisecond
	// drillSweepFor bounds the last look at every key once the workload
	// ended.
	drillSweepFor = 5 * time.Second
	// drillGhostAfter is how long a grant seen held must have gone
	// unanswered before the end of the workload to count as a ghost when
	// no later grant of its key shows that it ended: the client's failure
	// timeout, by which an answer held up by a node that went has been
	// asked for again elsewhere.
	drillGhostAfter = time.Second
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
			"            when, after the old active answered it ok, the active still names\n" +
			"            its token as the key's holder. The drill asks the active (Q) about\n" +
			"            the key of any acquire that waits unusually long (250ms, or a\n" +
			"            quarter of --lease), and about every key once the workload ended.\n" +
			"            lockd --replication sync (the default) loses neither in a crash;\n" +
			"            async may lose the last answers\n" +
			"   in doubt releases in flight during the action that came back notheld: the\n" +
			"            old active may have applied one and gone before its answer did\n" +
			"            (the client re-sent it, and the token was gone), or its grant was\n" +
			"            lost. No client can tell which, so they are not counted as lost\n" +
			"   ghosts   keys held by a grant no worker received: its answer was lost,\n" +
			"            and the acquire the client sent again waited behind it\n" +
			"   stall    the longest a key stayed held by a lost release or a ghost: from\n" +
			"            when it was freed to its next grant (or the drill's end)\n" +
			"   gap      the longest time without any grant: what the disruption cost\n" +
			"   takeover from the last grant by the old active to the first by the new\n" +
			"            one (its tokens carry a newer epoch); null in JSON if none came\n" +
			"   fencing  whether every token of a key was larger than every earlier one\n\n" +
			"The drill fails (exit 1) when fencing is violated, the action failed, no lock\n" +
			"was granted at all, the action removed the active and no new active granted\n" +
			"a lock afterwards (takeover none: the clients never moved), or a bound you set\n" +
			"is exceeded. With --expect-failover it also fails when the active after the\n" +
			"drill is the node that was active before: a drill meant to test a failover\n" +
			"whose action stopped a standby, or nothing, does not pass. --json prints one\n" +
			"object:\n" +
			"   {\"workers\":8,\"keys\":16,\"lease_seconds\":5,\"duration_seconds\":10,\n" +
			"    \"action\":{\"kind\":\"handoff\",\"command\":null,\"at_seconds\":3,\"ok\":true,\"detail\":\"...\"},\n" +
			"    \"active_before\":\"ADDR\",\"active_after\":\"ADDR\",\"cycles\":48211,\"grants\":48211,\n" +
			"    \"errors\":0,\"error_kinds\":{},\"first_error\":null,\n" +
			"    \"lost\":0,\"lost_grants\":0,\"lost_releases\":0,\"in_doubt\":0,\"ghosts\":0,\n" +
			"    \"unchecked_keys\":0,\"stall_ms\":null,\"stall_key\":null,\"stall_cause\":null,\n" +
			"    \"gap_ms\":14.2,\"takeover_ms\":3.1,\"gap_from_seconds\":3.001,\"gap_to_seconds\":3.015,\n" +
			"    \"fencing\":{\"ok\":true,\"violations\":[]},\"pass\":true,\"failures\":[]}\n" +
			"A violation reads {\"key\":K,\"token\":\"T\",\"at_seconds\":S,\"after\":\"U\",\"after_at_seconds\":R}:\n" +
			"a client got token T at S, after another got the larger (or equal) U at R.\n" +
			"lost is lost_grants + lost_releases, what --max-lost bounds; unchecked_keys\n" +
			"counts keys the last look could not ask about (a loss there would go unseen,\n" +
			"so with --max-lost the drill fails); stall_cause is \"lost release\" or\n" +
			"\"ghost grant\".\n\n" +
			"Examples:\n" +
			"   lockctl drill --max-gap 500ms --max-errors 0\n" +
			"   lockctl drill --run 'kill $(cat /run/lockd-$LOCKD_ACTIVE_PORT.pid)' --expect-failover --max-gap 3s\n" +
			"   lockctl drill --run 'kill -9 $(cat /run/lockd-a.pid)' --max-lost 0   # a crash loses nothing\n" +
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
			durflag.New(cli.DurationFlag{Name: "duration", Destination: &c.duration, Value: 10 * time.Second,
				Usage: "run the workload for `DURATION`"}),
			&cli.StringFlag{Name: "action", Destination: &c.action, Value: actionHandoff,
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
	ctx, stop := withSignals(cCtx.Context)
	defer stop()

	before := survey(ctx, g.Addrs, g.status)
	if before.Answered == 0 {
		return noNodeAnswered(g, before)
	}
	plan.Env = append(os.Environ(), "LOCKD_ADDR="+g.AddrList)
	plan.Env = append(plan.Env, actionEnv(before.Active)...)
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
		p.Action, p.Command = actionRun, c.run
	} else if c.action != actionHandoff && c.action != actionNone {
		return p, usageError(name, "--action %q: want handoff or none (or --run CMD)", c.action)
	}
	if c.expectFailover && p.Action == actionNone {
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
	// ExpectFailover fails the drill when the active did not change.
	ExpectFailover bool
	Output         io.Writer // where the command's output goes (lockctl's stderr)
	Env            []string  // the command's environment
	KeyPrefix      string    // "": drill-XXXX-, unique to this run
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
	Queue(ctx context.Context, key string) (proto.Queue, error)
}

// drillGrant is one granted acquire: when (since the start) and which
// token, and when its release was answered ok, if it was.
type drillGrant struct {
	At         time.Duration
	Token      uint64
	ReleasedAt time.Duration
	Key        int32
	Released   bool
}

// holderSeen is what the active answered when the drill asked who held a
// key: the holders' tokens, as of a question sent At.
type holderSeen struct {
	At      time.Duration
	Key     int32
	Holders []uint64
}

// strandedHold is a key the active held by a token no worker held: a
// release it answered ok and then forgot (a lost release), or a ghost
// grant, whose answer no worker received (the client sent the acquire
// again, and it waited behind the grant made for it).
type strandedHold struct {
	Key   string
	Token uint64
	Ghost bool
	// FreedAt is when the key was freed: when the lost release was
	// answered ok, or, for a ghost, when the key's holder before it
	// released it (0 when none did).
	FreedAt time.Duration
	SeenAt  time.Duration // when the active was first asked and named Token
	// Stall is how long the key stayed held once freed: to the first
	// grant of the key after SeenAt, or to the end of the workload
	// (Regranted false) when none came.
	Stall     time.Duration
	Regranted bool
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
	ActionEnd    time.Duration // when the action returned
	ActionOK     bool
	ActionDetail string

	Grants      int
	GrantsAfter int // grants from the action on
	Cycles      int
	Errors      int
	ErrorKinds  map[string]int
	FirstError  string
	// LostGrants counts releases answered notheld that were not in
	// flight during the action: the grant was lost.
	LostGrants int
	// InDoubt counts releases answered notheld that were in flight during
	// the action: either the grant was lost, or the old active applied
	// the release and went before its answer did, and the re-sent release
	// found the token gone. A client cannot tell which.
	InDoubt int
	// LostReleases are the releases answered ok that the active forgot,
	// and Ghosts the grants no worker received, in the order the keys
	// were freed.
	LostReleases []strandedHold
	Ghosts       []strandedHold
	// Unchecked counts keys the last look could not ask about.
	Unchecked int

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
	probe := newHolderProbe(cl, p, keyName, start)
	var notHeldAll []drillSpan // releases answered notheld: sent and answered
	grants := make([][]drillGrant, p.Workers)
	var wg sync.WaitGroup
	for w := range p.Workers {
		wg.Go(func() {
			var mine []drillGrant
			var notHeld []drillSpan
			cycles := 0
			waiting := &probe.waits[w]
			for wctx.Err() == nil {
				k := rand.IntN(p.Keys)
				waiting.begin(k, time.Since(start))
				lock, err := cl.Acquire(wctx, keyName(k), p.Lease, 0)
				waiting.end()
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
				sent := time.Since(start)
				err = cl.Release(rctx, keyName(k), lock.Token)
				rcancel()
				switch {
				case err == nil:
					cycles++
					g := &mine[len(mine)-1]
					g.Released, g.ReleasedAt = true, time.Since(start)
				case errors.Is(err, client.ErrNotHeld):
					notHeld = append(notHeld, drillSpan{From: sent, To: time.Since(start)})
				case ctx.Err() != nil:
				default:
					fail(err)
					sleepCtx(wctx, drillBackoff)
				}
			}
			grants[w] = mine
			mu.Lock()
			rep.Cycles += cycles
			notHeldAll = append(notHeldAll, notHeld...)
			mu.Unlock()
		})
	}
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		probe.run(wctx)
	}()

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
		rep.ActionEnd = time.Since(start)
		detail := rep.ActionDetail
		pr.action.Store(&detail)
	}()
	wg.Wait()
	end := time.Since(start)
	<-actionDone
	cancel()
	<-probeDone

	var all []drillGrant
	used := make(map[int32]bool)
	for _, g := range grants {
		all = append(all, g...)
		for _, gr := range g {
			if gr.Released {
				used[gr.Key] = true
			}
		}
	}
	// The last look: every key the drill released, once every release
	// was answered. It finds a lost release no acquire waited on long
	// enough to probe.
	rep.Unchecked = probe.sweep(ctx, slices.Sorted(maps.Keys(used)))

	slices.SortStableFunc(all, func(a, b drillGrant) int { return cmp.Compare(a.At, b.At) })
	rep.Grants = len(all)
	end = min(end, p.Duration)
	rep.Gap, rep.GapFrom, rep.GapTo = longestGap(all, end)
	if p.Action != actionNone && rep.ActionOK {
		rep.Takeover, rep.TookOver = takeover(all, rep.ActionAt)
		for _, g := range all {
			if g.At >= rep.ActionAt {
				rep.GrantsAfter++
			}
		}
	}
	rep.ViolationCount, rep.Violations = checkFencing(all, keyName)
	rep.LostReleases, rep.Ghosts = strandedHolds(all, probe.seen, end, keyName)
	acted := p.Action != actionNone && rep.ActionEnd > 0
	rep.LostGrants, rep.InDoubt = sortNotHeld(notHeldAll, acted, rep.ActionAt, rep.ActionEnd)
	return rep
}

// drillSpan is a request of the drill: when it was sent and when its
// answer came, since the start.
type drillSpan struct{ From, To time.Duration }

// sortNotHeld sorts the releases answered notheld into lost grants and
// those in doubt: a release in flight while the action ran (sent before
// it ended, answered after it began) may have been applied by the old
// active just before it went, its answer lost with the connection; the
// client then re-sent it, and the node that answered no longer knew the
// token. The old active could not apply a release sent after the action
// ended (it was gone, frozen or no longer active), and one answered
// before the action began owes nothing to it: their notheld means the
// node that answered never knew the grant.
func sortNotHeld(spans []drillSpan, acted bool, actionAt, actionEnd time.Duration) (lost, inDoubt int) {
	for _, s := range spans {
		if acted && s.From <= actionEnd && s.To >= actionAt {
			inDoubt++
		} else {
			lost++
		}
	}
	return lost, inDoubt
}

// holderProbe asks the active who holds the key of every acquire that
// waits unusually long, and keeps the answers: the evidence of a lost
// release or a ghost grant. One goroutine watches every worker, so that a
// drill of many workers costs one timer, not one per acquire.
type holderProbe struct {
	cl      drillClient
	keyName func(int) string
	start   time.Time
	after   time.Duration // an acquire waiting this long is probed
	waits   []acquireWait // one per worker

	mu   sync.Mutex
	seen []holderSeen
}

// acquireWait is what a worker is waiting for, read by the probe.
type acquireWait struct {
	since   atomic.Int64 // time since the start plus one, in ns; 0 while not waiting
	key     atomic.Int32
	probing atomic.Bool // a question about this wait is in flight
	asked   time.Duration
}

func (w *acquireWait) begin(key int, at time.Duration) {
	w.key.Store(int32(key))
	w.since.Store(int64(at) + 1)
}

func (w *acquireWait) end() { w.since.Store(0) }

func newHolderProbe(cl drillClient, p drillPlan, keyName func(int) string, start time.Time) *holderProbe {
	return &holderProbe{cl: cl, keyName: keyName, start: start,
		after: min(drillProbeAfter, p.Lease/4), waits: make([]acquireWait, p.Workers)}
}

// run probes until ctx ends, and returns once every question it asked
// was answered or given up.
func (h *holderProbe) run(ctx context.Context) {
	var asks sync.WaitGroup
	defer asks.Wait()
	tick := time.NewTicker(max(h.after/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Since(h.start)
		for i := range h.waits {
			w := &h.waits[i]
			since := w.since.Load()
			if since == 0 || now-time.Duration(since-1) < h.after || now-w.asked < h.after || w.probing.Load() {
				continue
			}
			w.asked = now
			w.probing.Store(true)
			key := int(w.key.Load())
			asks.Go(func() {
				defer w.probing.Store(false)
				h.ask(ctx, key)
			})
		}
	}
}

// ask asks the active who holds key and keeps the answer; an error is
// no answer (the acquire it was about reports its own).
func (h *holderProbe) ask(ctx context.Context, key int) bool {
	at := time.Since(h.start)
	q, err := h.cl.Queue(ctx, h.keyName(key))
	if err != nil {
		return false
	}
	if !q.Held {
		return true
	}
	seen := holderSeen{At: at, Key: int32(key), Holders: []uint64{q.Token}}
	for _, hd := range q.Holders {
		if hd.Token != q.Token {
			seen.Holders = append(seen.Holders, hd.Token)
		}
	}
	h.mu.Lock()
	h.seen = append(h.seen, seen)
	h.mu.Unlock()
	return true
}

// sweep asks about every key of keys, a few at a time, within
// drillSweepFor, and returns how many it could not ask about.
func (h *holderProbe) sweep(ctx context.Context, keys []int32) int {
	sctx, cancel := context.WithTimeout(ctx, drillSweepFor)
	defer cancel()
	var unchecked atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int32)
	for range min(len(h.waits), 16) {
		wg.Go(func() {
			for k := range next {
				if !h.ask(sctx, int(k)) {
					unchecked.Add(1)
				}
			}
		})
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	return int(unchecked.Load())
}

// strandedHolds finds, in the grants (sorted by time) and the holders
// the active named, the keys it held by a token no worker held:
//   - a lost release: a token named by a question sent after its release
//     was answered ok;
//   - a ghost grant: a token no worker ever received, named while a
//     worker of the drill could still have received it, and either
//     followed by a grant of its key (so it ended unreceived) or seen at
//     least drillGhostAfter before the workload's end.
//
// Either keeps its key held until its lease ends. The stall of each runs
// from when the key was freed to its first grant after it was seen held,
// or to end when none came.
func strandedHolds(grants []drillGrant, seen []holderSeen, end time.Duration, keyName func(int) string) (lost, ghosts []strandedHold) {
	got := make(map[uint64]drillGrant, len(grants))
	grantsOf := make(map[int32][]time.Duration)
	releasesOf := make(map[int32][]time.Duration)
	for _, g := range grants {
		got[g.Token] = g
		grantsOf[g.Key] = append(grantsOf[g.Key], g.At)
		if g.Released {
			releasesOf[g.Key] = append(releasesOf[g.Key], g.ReleasedAt)
		}
	}
	for _, r := range releasesOf {
		slices.Sort(r)
	}
	seen = slices.Clone(seen)
	slices.SortStableFunc(seen, func(a, b holderSeen) int { return cmp.Compare(a.At, b.At) })
	found := make(map[uint64]bool)
	for _, s := range seen {
		times := grantsOf[s.Key]
		next, regranted := time.Duration(0), false
		if i, _ := slices.BinarySearch(times, s.At+1); i < len(times) {
			next, regranted = times[i], true
		}
		for _, tok := range s.Holders {
			if found[tok] {
				continue
			}
			h := strandedHold{Key: keyName(int(s.Key)), Token: tok, SeenAt: s.At, Regranted: regranted}
			g, received := got[tok]
			switch {
			case received && g.Released && g.Key == s.Key && g.ReleasedAt <= s.At:
				h.FreedAt = g.ReleasedAt
			case !received && (regranted || s.At+drillGhostAfter <= end):
				h.Ghost = true
				rel := releasesOf[s.Key]
				if i, _ := slices.BinarySearch(rel, s.At+1); i > 0 {
					h.FreedAt = rel[i-1]
				}
			default:
				continue
			}
			found[tok] = true
			h.Stall = end - h.FreedAt
			if regranted {
				h.Stall = next - h.FreedAt
			}
			if h.Ghost {
				ghosts = append(ghosts, h)
			} else {
				lost = append(lost, h)
			}
		}
	}
	byFreed := func(a, b strandedHold) int { return cmp.Compare(a.FreedAt, b.FreedAt) }
	slices.SortStableFunc(lost, byFreed)
	slices.SortStableFunc(ghosts, byFreed)
	return lost, ghosts
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
	if p.ExpectFailover {
		switch {
		case r.ActiveBefore == "":
			r.Failures = append(r.Failures, "--expect-failover: no node was active when the drill started, so no failover could be seen")
		case r.ActiveAfter == r.ActiveBefore:
			r.Failures = append(r.Failures, fmt.Sprintf("--expect-failover: %s is still the active: the action did not take the role away "+
				"(did it stop a standby? LOCKD_ACTIVE_ADDR names the active)", printable(r.ActiveBefore)))
		}
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
	if p.MaxLost >= 0 && r.lost() > p.MaxLost {
		r.Failures = append(r.Failures, fmt.Sprintf("lost %d (%s, %s) is over --max-lost %d", r.lost(),
			countOf(r.LostGrants, "grant", "grants"), countOf(len(r.LostReleases), "release", "releases"), p.MaxLost))
	}
	if p.MaxLost >= 0 && r.Unchecked > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%s could not be asked about at the end, so --max-lost %d is not proven: "+
			"see that the cluster has an active (lockctl status) and run the drill again", countOf(r.Unchecked, "key", "keys"), p.MaxLost))
	}
}

// lost counts the answers the cluster forgot: grants and releases.
func (r *drillReport) lost() int { return r.LostGrants + len(r.LostReleases) }

// longestStall is the lost release or ghost grant that kept its key held
// longest; ok is false when there was none.
func (r *drillReport) longestStall() (h strandedHold, ok bool) {
	for _, x := range slices.Concat(r.LostReleases, r.Ghosts) {
		if !ok || x.Stall > h.Stall {
			h, ok = x, true
		}
	}
	return h, ok
}

// cause names what kept the key held.
func (h strandedHold) cause() string {
	if h.Ghost {
		return "ghost grant"
	}
	return "lost release"
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
	LostGrants      int              `json:"lost_grants"`
	LostReleases    int              `json:"lost_releases"`
	InDoubt         int              `json:"in_doubt"`
	Ghosts          int              `json:"ghosts"`
	UncheckedKeys   int              `json:"unchecked_keys"`
	StallMs         *float64         `json:"stall_ms"`
	StallKey        *string          `json:"stall_key"`
	StallCause      *string          `json:"stall_cause"`
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
	Token          uint64  `json:"token,string"`
	AtSeconds      float64 `json:"at_seconds"`
	After          uint64  `json:"after,string"`
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
		FirstError: nullIfEmpty(r.FirstError),
		Lost:       r.lost(), LostGrants: r.LostGrants, LostReleases: len(r.LostReleases), InDoubt: r.InDoubt, Ghosts: len(r.Ghosts), UncheckedKeys: r.Unchecked,
		GapMs: millis(r.Gap), GapFromSeconds: secondsJSON(r.GapFrom), GapToSeconds: secondsJSON(r.GapTo),
		Fencing:  drillFencingJSON{OK: r.ViolationCount == 0, Violations: []drillViolationJSON{}},
		Pass:     len(r.Failures) == 0,
		Failures: []string{},
	}
	if r.TookOver {
		ms := millis(r.Takeover)
		out.TakeoverMs = &ms
	}
	if h, ok := r.longestStall(); ok {
		ms, cause := millis(h.Stall), h.cause()
		out.StallMs, out.StallKey, out.StallCause = &ms, &h.Key, &cause
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
	lost := strconv.Itoa(r.lost())
	if r.lost() > 0 {
		var what []string
		if r.LostGrants > 0 {
			what = append(what, countOf(r.LostGrants, "grant", "grants")+" (release said notheld)")
		}
		if n := len(r.LostReleases); n > 0 {
			what = append(what, countOf(n, "release", "releases")+" (answered ok, then still held on the active)")
		}
		lost = pal.warn.Render(lost) + ": " + strings.Join(what, ", ")
	}
	if r.Unchecked > 0 {
		lost += fmt.Sprintf("; %s could not be asked about at the end", countOf(r.Unchecked, "key", "keys"))
	}
	line("lost", lost+boundNote(p.MaxLost >= 0, strconv.Itoa(p.MaxLost)))
	if r.InDoubt > 0 {
		line("in doubt", countOf(r.InDoubt, "release", "releases")+" in flight during the action came back notheld: "+
			"applied by the old active and answered too late, or their grants were lost (not counted as lost)")
	}
	if n := len(r.Ghosts); n > 0 {
		line("ghosts", pal.warn.Render(countOf(n, "key", "keys"))+" held by a grant no worker received: its answer was lost, "+
			"and the acquire sent again waited behind it")
	}
	if h, ok := r.longestStall(); ok {
		freed := "released at " + shortDuration(h.FreedAt)
		if h.Ghost {
			freed = "freed at " + shortDuration(h.FreedAt)
		}
		until := "still held at the drill's end"
		if h.Regranted {
			until = "granted again at " + shortDuration(h.FreedAt+h.Stall)
		}
		line("stall", fmt.Sprintf("%s on key %s by a %s: %s, %s", pal.strong.Render(shortDuration(h.Stall)),
			printable(h.Key), h.cause(), freed, until))
	}
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

// actionEnv is what a --run command is told of the active: its address
// and port, empty when no node was active.
func actionEnv(active string) []string {
	port := ""
	if _, p, err := net.SplitHostPort(active); err == nil {
		port = p
	}
	return []string{"LOCKD_ACTIVE_ADDR=" + active, "LOCKD_ACTIVE_PORT=" + port}
}
