// Package drill is the engine of a failover drill: a steady lock
// workload through one client, an action in the middle (a handoff, a
// command that kills or freezes the active), and a measure of what the
// clients saw: the longest time without a grant, the takeover by a new
// active, fencing (every token of a key larger than the last), grants and
// releases the cluster forgot, and keys held by a grant nobody received;
// then a Verdict against the plan's bounds. lockctl drill wires its flags
// to a Plan and renders the Report and the verdict.
package drill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// Actions a drill can take at --at.
const (
	ActionHandoff = "handoff"
	ActionNone    = "none"
	ActionRun     = "run" // --run CMD
)

const (
	// backoff is the pause of a worker after an error, so an outage
	// is counted in failed cycles, not in a hot loop's thousands.
	backoff = 10 * time.Millisecond
	// releaseFor bounds a release at the end of a cycle; the client
	// re-sends it for 5s.
	releaseFor = 6 * time.Second
	// MaxViolationsShown is how many fencing violations a report lists.
	MaxViolationsShown = 5
	// probeAfter is how long an acquire waits before the drill asks
	// the active who holds its key (Q), and then again each as long while
	// it still waits: on a healthy cluster a drill's acquire waits a few
	// cycles of the holder, a millisecond or so, while a key held by a
	// release the new active did not know of stays held until its lease
	// ends. Leases shorter than four times this are probed at a quarter of
	// the lease.
	probeAfter = 250 * time.Millisecond
	// signalLands is how long after a --run command returned its effect
	// may still be on the way: kill(2) returns once a SIGSTOP or SIGKILL
	// is queued, and the node stops when the kernel next schedules the
	// thread that takes the signal, while its other threads run on. On a
	// loaded machine that is milliseconds after the command exited, long
	// enough for the node to apply one more release.
	signalLands = 100 * time.Millisecond
	// sweepFor bounds the last look at every key once the workload
	// ended.
	sweepFor = 5 * time.Second
	// ghostAfter is how long a grant seen held must have gone
	// unanswered before the end of the workload to count as a ghost when
	// no later grant of its key shows that it ended: the client's failure
	// timeout, by which an answer held up by a node that went has been
	// asked for again elsewhere.
	ghostAfter = time.Second
)

// Plan is a checked drill.
type Plan struct {
	Workers   int
	Keys      int
	Lease     time.Duration
	Duration  time.Duration
	Action    string // ActionHandoff, ActionNone or ActionRun
	Command   string // the shell command of ActionRun
	At        time.Duration
	MaxGap    time.Duration // -1: no bound
	MaxErrors int           // -1: no bound
	MaxLost   int           // -1: no bound
	// ExpectFailover fails the drill when the active did not change.
	ExpectFailover bool
	KeyPrefix      string // "": drill-XXXX-, unique to this run
	// Progress, when set, is kept up to date while the drill runs.
	Progress *Progress
	// Act performs the action at At and says how it went; nil is no
	// action, which always goes well.
	Act func(ctx context.Context) (ok bool, detail string)
}

// Progress is what the live line of a drill shows: counts kept as
// the workers go, and the action's outcome once it has one.
type Progress struct {
	start  atomic.Int64 // UnixNano; 0 until the workload starts
	grants atomic.Int64
	errors atomic.Int64
	action atomic.Pointer[string]
}

// Client is what a drill needs of the lockd client.
type Client interface {
	Acquire(ctx context.Context, key string, lease, wait time.Duration) (client.Lock, error)
	Release(ctx context.Context, key string, token uint64) error
	Queue(ctx context.Context, key string) (proto.Queue, error)
}

// Grant is one granted acquire: when (since the start) and which
// token, and when its release was answered ok, if it was.
type Grant struct {
	At         time.Duration
	Token      uint64
	ReleasedAt time.Duration
	Key        int32
	Released   bool
}

// HolderSeen is what the active answered when the drill asked who held a
// key: the holders' tokens, as of a question sent At.
type HolderSeen struct {
	At      time.Duration
	Key     int32
	Holders []uint64
}

// StrandedHold is a key the active held by a token no worker held: a
// release it answered ok and then forgot (a lost release), or a ghost
// grant, whose answer no worker received (the client sent the acquire
// again, and it waited behind the grant made for it).
type StrandedHold struct {
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

// ErrorEvent is an error a worker saw: when (since the start) and its
// kind (ErrorKind).
type ErrorEvent struct {
	At   time.Duration
	Kind string
}

// MaxEventsKept bounds the errors a report keeps with their times: an
// outage of a whole drill is a few thousand, and the counts stay exact.
const MaxEventsKept = 10000

// FenceViolation is a token that was not larger than an earlier one of the
// same key.
type FenceViolation struct {
	Key     string
	Token   uint64
	At      time.Duration // when the client got Token
	After   uint64        // the largest earlier token of the key
	AfterAt time.Duration // when the client got After
}

// Report is what a drill measured.
type Report struct {
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
	FirstError  string // as the client said it: it may span lines
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
	LostReleases []StrandedHold
	Ghosts       []StrandedHold
	// Unchecked counts keys the last look could not ask about.
	Unchecked int

	Gap     time.Duration
	GapFrom time.Duration
	GapTo   time.Duration

	// Takeover is the time from the last grant by the old active to the
	// first grant made by a new active, TakeoverFrom to TakeoverFrom +
	// Takeover (TookOver false when none came).
	Takeover     time.Duration
	TakeoverFrom time.Duration
	TookOver     bool

	// The timeline, for a report drawn over time: every grant, sorted by
	// time; the errors the clients saw (the first MaxEventsKept); and the
	// releases answered notheld, sorted into lost grants and those in
	// doubt.
	Timeline  []Grant
	ErrorsAt  []ErrorEvent
	LostAt    []Span
	InDoubtAt []Span

	Violations     []FenceViolation // the first MaxViolationsShown
	ViolationCount int

	// Failures is the Verdict in the words of the command that ran the
	// drill, which its report and its JSON print; empty when it passed.
	Failures []string
}

// Run runs the workload and the action, and measures them.
func Run(ctx context.Context, cl Client, p Plan) *Report {
	if p.KeyPrefix == "" {
		p.KeyPrefix = fmt.Sprintf("drill-%04x-", rand.IntN(1<<16))
	}
	keyName := func(k int) string { return p.KeyPrefix + strconv.Itoa(k) }
	rep := &Report{ErrorKinds: make(map[string]int), Start: time.Now()}
	start := rep.Start
	pr := p.Progress
	if pr == nil {
		pr = new(Progress)
	}
	pr.start.Store(start.UnixNano())
	wctx, cancel := context.WithDeadline(ctx, start.Add(p.Duration))
	defer cancel()

	var mu sync.Mutex // guards the counters of rep while workers run
	fail := func(err error) {
		pr.errors.Add(1)
		kind := ErrorKind(err)
		at := time.Since(start)
		mu.Lock()
		rep.Errors++
		rep.ErrorKinds[kind]++
		if rep.FirstError == "" {
			rep.FirstError = err.Error()
		}
		if len(rep.ErrorsAt) < MaxEventsKept {
			rep.ErrorsAt = append(rep.ErrorsAt, ErrorEvent{At: at, Kind: kind})
		}
		mu.Unlock()
	}
	probe := newHolderProbe(cl, p, keyName, start)
	var notHeldAll []Span // releases answered notheld: sent and answered
	grants := make([][]Grant, p.Workers)
	var wg sync.WaitGroup
	for w := range p.Workers {
		wg.Go(func() {
			var mine []Grant
			var notHeld []Span
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
					sleepCtx(wctx, backoff)
					continue
				}
				mine = append(mine, Grant{At: time.Since(start), Token: lock.Token, Key: int32(k)})
				pr.grants.Add(1)
				// The release outlives the workload's end, so that a
				// drill leaves no lock behind.
				rctx, rcancel := context.WithTimeout(ctx, releaseFor)
				sent := time.Since(start)
				err = cl.Release(rctx, keyName(k), lock.Token)
				rcancel()
				switch {
				case err == nil:
					cycles++
					g := &mine[len(mine)-1]
					g.Released, g.ReleasedAt = true, time.Since(start)
				case errors.Is(err, client.ErrNotHeld):
					notHeld = append(notHeld, Span{From: sent, To: time.Since(start)})
				case ctx.Err() != nil:
				default:
					fail(err)
					sleepCtx(wctx, backoff)
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
		rep.ActionOK, rep.ActionDetail = true, "none"
		if p.Act != nil {
			rep.ActionOK, rep.ActionDetail = p.Act(ctx)
		}
		rep.ActionEnd = time.Since(start)
		detail := rep.ActionDetail
		pr.action.Store(&detail)
	}()
	wg.Wait()
	end := time.Since(start)
	<-actionDone
	cancel()
	<-probeDone

	var all []Grant
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

	slices.SortStableFunc(all, func(a, b Grant) int { return cmp.Compare(a.At, b.At) })
	slices.SortFunc(rep.ErrorsAt, func(a, b ErrorEvent) int { return cmp.Compare(a.At, b.At) })
	rep.Timeline = all
	rep.Grants = len(all)
	end = min(end, p.Duration)
	rep.Gap, rep.GapFrom, rep.GapTo = LongestGap(all, end)
	if p.Action != ActionNone && rep.ActionOK {
		rep.TakeoverFrom, rep.Takeover, rep.TookOver = TakeoverSpan(all, rep.ActionAt)
		for _, g := range all {
			if g.At >= rep.ActionAt {
				rep.GrantsAfter++
			}
		}
	}
	rep.ViolationCount, rep.Violations = CheckFencing(all, keyName)
	rep.LostReleases, rep.Ghosts = StrandedHolds(all, probe.seen, end, keyName)
	acted := p.Action != ActionNone && rep.ActionEnd > 0
	slices.SortFunc(notHeldAll, func(a, b Span) int { return cmp.Compare(a.From, b.From) })
	rep.LostAt, rep.InDoubtAt = SplitNotHeld(notHeldAll, acted, rep.ActionAt, p.landed(rep.ActionEnd))
	rep.LostGrants, rep.InDoubt = len(rep.LostAt), len(rep.InDoubtAt)
	return rep
}

// landed is when the effect of an action that returned at end has surely
// landed: at once for a handoff, which returns once the new active
// answers, and signalLands later for a command.
func (p Plan) landed(end time.Duration) time.Duration {
	if p.Action == ActionRun {
		return end + signalLands
	}
	return end
}

// Span is a request of the drill: when it was sent and when its
// answer came, since the start.
type Span struct{ From, To time.Duration }

// SortNotHeld sorts the releases answered notheld into lost grants and
// those in doubt: a release in flight while the action ran (sent before
// its effect landed, answered after it began) may have been applied by
// the old active just before it went, its answer lost with the
// connection; the client then re-sent it, and the node that answered no
// longer knew the token. The old active could not apply a release sent
// after the action's effect landed (it was gone, frozen or no longer
// active), and one answered before the action began owes nothing to it:
// their notheld means the node that answered never knew the grant.
// landed is when the action ended, plus signalLands for a command, whose
// signal may stop the node after the command has exited.
func SortNotHeld(spans []Span, acted bool, actionAt, landed time.Duration) (lost, inDoubt int) {
	l, d := SplitNotHeld(spans, acted, actionAt, landed)
	return len(l), len(d)
}

// SplitNotHeld is SortNotHeld keeping the releases themselves, in the
// order given.
func SplitNotHeld(spans []Span, acted bool, actionAt, landed time.Duration) (lost, inDoubt []Span) {
	for _, s := range spans {
		if acted && s.From <= landed && s.To >= actionAt {
			inDoubt = append(inDoubt, s)
		} else {
			lost = append(lost, s)
		}
	}
	return lost, inDoubt
}

// holderProbe asks the active who holds the key of every acquire that
// waits unusually long, and keeps the answers: the evidence of a lost
// release or a ghost grant. One goroutine watches every worker, so that a
// drill of many workers costs one timer, not one per acquire.
type holderProbe struct {
	cl      Client
	keyName func(int) string
	start   time.Time
	after   time.Duration // an acquire waiting this long is probed
	waits   []acquireWait // one per worker

	mu   sync.Mutex
	seen []HolderSeen
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

func newHolderProbe(cl Client, p Plan, keyName func(int) string, start time.Time) *holderProbe {
	return &holderProbe{cl: cl, keyName: keyName, start: start,
		after: min(probeAfter, p.Lease/4), waits: make([]acquireWait, p.Workers)}
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
	seen := HolderSeen{At: at, Key: int32(key), Holders: []uint64{q.Token}}
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
// sweepFor, and returns how many it could not ask about.
func (h *holderProbe) sweep(ctx context.Context, keys []int32) int {
	sctx, cancel := context.WithTimeout(ctx, sweepFor)
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

// StrandedHolds finds, in the grants (sorted by time) and the holders
// the active named, the keys it held by a token no worker held:
//   - a lost release: a token named by a question sent after its release
//     was answered ok;
//   - a ghost grant: a token no worker ever received, named while a
//     worker of the drill could still have received it, and either
//     followed by a grant of its key (so it ended unreceived) or seen at
//     least ghostAfter before the workload's end.
//
// Either keeps its key held until its lease ends. The stall of each runs
// from when the key was freed to its first grant after it was seen held,
// or to end when none came.
func StrandedHolds(grants []Grant, seen []HolderSeen, end time.Duration, keyName func(int) string) (lost, ghosts []StrandedHold) {
	got := make(map[uint64]Grant, len(grants))
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
	slices.SortStableFunc(seen, func(a, b HolderSeen) int { return cmp.Compare(a.At, b.At) })
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
			h := StrandedHold{Key: keyName(int(s.Key)), Token: tok, SeenAt: s.At, Regranted: regranted}
			g, received := got[tok]
			switch {
			case received && g.Released && g.Key == s.Key && g.ReleasedAt <= s.At:
				h.FreedAt = g.ReleasedAt
			case !received && (regranted || s.At+ghostAfter <= end):
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
	byFreed := func(a, b StrandedHold) int { return cmp.Compare(a.FreedAt, b.FreedAt) }
	slices.SortStableFunc(lost, byFreed)
	slices.SortStableFunc(ghosts, byFreed)
	return lost, ghosts
}

// ErrorKind names an error for the report's tally.
func ErrorKind(err error) string {
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

// LongestGap is the longest interval without a grant between the start
// (0), the grants (sorted by time) and the end: a cluster that never
// recovered shows a gap that lasts until the end.
func LongestGap(grants []Grant, end time.Duration) (gap, from, to time.Duration) {
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

// Takeover measures the time without an active that clients saw: from
// the last grant by the old active to the first grant by a new one. A
// token's high bits are the epoch of the node that issued it (see package
// engine), and a node that becomes active starts a newer epoch, so the new
// active's first grant is the first after the action whose epoch is newer
// than every epoch before the action.
func Takeover(grants []Grant, actionAt time.Duration) (time.Duration, bool) {
	_, d, ok := TakeoverSpan(grants, actionAt)
	return d, ok
}

// TakeoverSpan is Takeover with where it starts: the last grant by the
// old active (or the action, when it granted none after it).
func TakeoverSpan(grants []Grant, actionAt time.Duration) (from, took time.Duration, ok bool) {
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
			return min(lastOld, g.At), max(g.At-lastOld, 0), true
		}
	}
	return 0, 0, false
}

// CheckFencing checks, key by key and in grant order, that every token is
// larger than every earlier one. Grants are ordered by the time the
// client saw them: a lock is granted again only after its release, which
// follows the earlier grant, so on a correct cluster that order is the
// order of the grants themselves.
func CheckFencing(grants []Grant, keyName func(int) string) (int, []FenceViolation) {
	high := make(map[int32]Grant)
	count := 0
	var shown []FenceViolation
	for _, g := range grants {
		if h, ok := high[g.Key]; ok && g.Token <= h.Token {
			count++
			if len(shown) < MaxViolationsShown {
				shown = append(shown, FenceViolation{Key: keyName(int(g.Key)), Token: g.Token, At: g.At, After: h.Token, AfterAt: h.At})
			}
			continue
		}
		high[g.Key] = g
	}
	return count, shown
}

// Lost counts the answers the cluster forgot: grants and releases.
func (r *Report) Lost() int { return r.LostGrants + len(r.LostReleases) }

// LongestStall is the lost release or ghost grant that kept its key held
// longest; ok is false when there was none.
func (r *Report) LongestStall() (h StrandedHold, ok bool) {
	for _, x := range slices.Concat(r.LostReleases, r.Ghosts) {
		if !ok || x.Stall > h.Stall {
			h, ok = x, true
		}
	}
	return h, ok
}

// Cause names what kept the key held.
func (h StrandedHold) Cause() string {
	if h.Ghost {
		return "ghost grant"
	}
	return "lost release"
}

// RemovedActive reports whether the action took the active role away
// from the node that had it: the active after the drill is another node,
// or none.
func (r *Report) RemovedActive(p Plan) bool {
	return p.Action != ActionNone && r.ActionOK && r.ActiveBefore != "" && r.ActiveAfter != r.ActiveBefore
}

// Snapshot is what a Progress says at one instant.
type Snapshot struct {
	Start  time.Time // when the workload started; zero until it has
	Grants int       // acquires granted so far
	Errors int       // requests failed so far
	// Action is the outcome of the action once it has one (Acted).
	Action string
	Acted  bool
}

// Snapshot reads the progress so far.
func (pr *Progress) Snapshot() Snapshot {
	var s Snapshot
	if start := pr.start.Load(); start != 0 {
		s.Start = time.Unix(0, start)
	}
	s.Grants, s.Errors = int(pr.grants.Load()), int(pr.errors.Load())
	if d := pr.action.Load(); d != nil {
		s.Action, s.Acted = *d, true
	}
	return s
}
