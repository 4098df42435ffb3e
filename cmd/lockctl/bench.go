package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/durflag"

	"github.com/lockd-io/lockd/proto/client"
)

// benchCommand measures lock throughput and latency: workers run
// acquire+release cycles for a fixed time against the --addr nodes.
type benchCommand struct {
	workers  int
	conns    int
	duration time.Duration
	keys     string
	lease    time.Duration
	wait     lockWait
	mode     string
	limit    int
}

const (
	benchPipelined = "pipelined"
	benchPerWorker = "per-worker"
	maxBenchWorker = 100000
)

func (c *benchCommand) Command() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure acquire+release cycles per second and their latency",
		UsageText: "lockctl bench [--workers 200] [--duration 10s] [--keys unique|hot|N]\n" +
			"       [--limit N] [--mode pipelined|per-worker] [--conns N] [--lease 5s]\n" +
			"       [--wait DURATION]",
		Description: "Each worker repeats one cycle, acquire then release, for --duration, and\n" +
			"lockctl prints cycles per second, errors, timeouts and the cycle latency at\n" +
			"p50, p99 and p99.9.\n\n" +
			"   --mode pipelined    all workers share one client: requests from many\n" +
			"                       workers travel pipelined over its few connections\n" +
			"                       (--conns per node; default 1, or 2 with one node)\n" +
			"   --mode per-worker   each worker has its own client with one connection\n" +
			"   --keys unique       each worker its own key: no contention\n" +
			"   --keys hot          every worker on one key: the FIFO queue under load\n" +
			"   --keys N            N keys shared round-robin by the workers\n" +
			"   --limit N           each key a semaphore of N places: up to N workers\n" +
			"                       hold one key at once (default 1, a lock)\n\n" +
			"A timeout is an acquire whose --wait elapsed before the run ended (with no\n" +
			"--wait, workers wait until the run ends and none is counted). Keys are named\n" +
			"bench-PID-..., so they do not collide with real ones. Stop early with Ctrl-C:\n" +
			"the results so far are printed.\n\n" +
			"Examples:\n" +
			"   lockctl bench\n" +
			"   lockctl bench --keys hot --workers 50 --duration 30s\n" +
			"   lockctl bench --keys hot --limit 8     # eight at a time on one key\n" +
			"   lockctl --json bench --mode per-worker --workers 1000 |\n" +
			"       jq .cycles_per_second\n\n" +
			exitCodesHelp(helpExitOK,
				exitLine("1", "no cycle completed (the first error is printed)"),
				helpExitUsage, helpExitUnavailable, helpExitNoAnswer,
				exitLine("130", "interrupted by SIGINT (143: SIGTERM); the results so far are printed")),
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "workers", Destination: &c.workers, Value: 200,
				Usage: "`N` concurrent workers, each running one cycle at a time"},
			&cli.IntFlag{Name: "conns", Destination: &c.conns, DefaultText: "the client's default",
				Usage: "`N` connections per node for --mode pipelined"},
			durflag.New(cli.DurationFlag{Name: "duration", Destination: &c.duration, Value: 10 * time.Second,
				Usage: "how long to run, a `DURATION`"}),
			&cli.StringFlag{Name: "keys", Destination: &c.keys, Value: "unique",
				Usage: "which `KEYS` the workers lock: unique, hot, or a number of shared keys"},
			leaseFlag(&c.lease, 5*time.Second),
			&cli.GenericFlag{Name: "wait", Aliases: []string{"w"}, Value: &c.wait, DefaultText: "until the run ends",
				Usage: "longest one acquire waits before it counts as a timeout, a `DURATION` or seconds; 0 does not wait"},
			&cli.StringFlag{Name: "mode", Destination: &c.mode, Value: benchPipelined,
				Usage: "`MODE`: pipelined (one shared client) or per-worker (a client each)"},
			&cli.IntFlag{Name: "limit", Destination: &c.limit, Value: 1,
				Usage: "make every key a semaphore that up to `N` workers hold at once"},
		},
		Action: c.Run,
	}
}

// benchResult is what bench prints; with --json, as is.
type benchResult struct {
	Mode            string         `json:"mode"`
	Workers         int            `json:"workers"`
	Clients         int            `json:"clients"`
	ConnsPerAddr    int            `json:"conns_per_addr"`
	Keys            string         `json:"keys"`
	KeyCount        int            `json:"key_count"`
	Limit           int            `json:"limit"`
	DurationSeconds float64        `json:"duration_seconds"`
	Cycles          uint64         `json:"cycles"`
	CyclesPerSecond float64        `json:"cycles_per_second"`
	Errors          uint64         `json:"errors"`
	Timeouts        uint64         `json:"timeouts"`
	FirstError      string         `json:"first_error,omitempty"`
	Interrupted     bool           `json:"interrupted,omitempty"`
	Latency         latencySeconds `json:"latency_seconds"`

	latency  [4]time.Duration // p50, p99, p99.9, max
	firstErr error
}

type latencySeconds struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

func (c *benchCommand) Run(cCtx *cli.Context) error {
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	nkeys, err := c.check(cCtx)
	if err != nil {
		return err
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()

	res := benchResult{Mode: c.mode, Workers: c.workers, Keys: c.keys, KeyCount: nkeys, Limit: c.limit}
	clients := make([]*client.Client, 1)
	opts := client.Options{ConnsPerAddr: c.conns}
	if c.mode == benchPerWorker {
		clients = make([]*client.Client, c.workers)
		opts.ConnsPerAddr = 1
	}
	for i := range clients {
		if clients[i], err = g.client(opts); err != nil {
			return err
		}
		defer clients[i].Close()
	}
	res.Clients = len(clients)
	res.ConnsPerAddr = opts.ConnsPerAddr
	if res.ConnsPerAddr == 0 {
		res.ConnsPerAddr = 1
		if len(g.Addrs) == 1 {
			res.ConnsPerAddr = 2
		}
	}

	prefix := fmt.Sprintf("bench-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	// One cycle before the clock starts: an unreachable or refusing server
	// is reported at once, not as millions of errors.
	if err := benchCycle(ctx, clients[0], prefix+"-probe", c.lease, time.Second, time.Now().Add(5*time.Second), c.limit); err != nil {
		return clientFailure(ctx, g, "running a first acquire+release cycle", err)
	}

	stats := make([]workerStats, c.workers)
	shards := make([]latencyShard, min(c.workers, latencyShards))
	start := time.Now()
	end := start.Add(c.duration)
	var live benchProgress
	stopProgress := startProgress(g, func() string { return live.line(start, c.duration, styleOf(g)) })
	var wg sync.WaitGroup
	for i := range stats {
		cl := clients[i%len(clients)]
		key := prefix + "-" + strconv.Itoa(i%nkeys)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.worker(ctx, cl, key, end, &stats[i], &shards[i%len(shards)], &live)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()

	var all histogram
	for i := range stats {
		s := &stats[i]
		res.Cycles += s.cycles
		res.Errors += s.errors
		res.Timeouts += s.timeouts
		if res.firstErr == nil {
			res.firstErr = s.firstErr
		}
	}
	for i := range shards {
		all.merge(&shards[i].h)
	}
	res.DurationSeconds = elapsed.Seconds()
	res.CyclesPerSecond = float64(res.Cycles) / elapsed.Seconds()
	res.latency = [4]time.Duration{all.quantile(0.50), all.quantile(0.99), all.quantile(0.999), all.max}
	// Latencies are far below a millisecond: they keep every digit.
	res.Latency = latencySeconds{res.latency[0].Seconds(), res.latency[1].Seconds(), res.latency[2].Seconds(), res.latency[3].Seconds()}
	if res.firstErr != nil {
		res.FirstError = oneLine(res.firstErr.Error())
	}
	var stopped interrupted
	res.Interrupted = errors.As(context.Cause(ctx), &stopped)

	if res.Cycles == 0 && res.firstErr != nil && !res.Interrupted {
		return clientFailure(ctx, g, "benchmarking", res.firstErr)
	}
	if g.JSON {
		err = printJSON(g.Stdout, res)
	} else {
		err = res.print(g.Stdout)
	}
	if err != nil {
		return err
	}
	if res.Interrupted {
		return silentExit(stopped.code())
	}
	return nil
}

// check validates the flags and returns how many keys the workers share.
func (c *benchCommand) check(cCtx *cli.Context) (int, error) {
	const name = "bench"
	if err := firstError(noArgs(cCtx), checkLease(name, c.lease), checkWait(name, &c.wait, false), checkLimit(name, c.limit)); err != nil {
		return 0, err
	}
	switch {
	case c.workers < 1 || c.workers > maxBenchWorker:
		return 0, usageError(name, "--workers %d: want 1 to %d", c.workers, maxBenchWorker)
	case c.duration <= 0:
		return 0, usageError(name, "--duration %s: must be more than 0", c.duration)
	case c.conns < 0:
		return 0, usageError(name, "--conns %d: must be 1 or more", c.conns)
	}
	switch c.mode {
	case benchPipelined:
	case benchPerWorker:
		if c.conns != 0 {
			return 0, usageError(name, "--conns applies to --mode pipelined; per-worker uses one connection per worker")
		}
	default:
		return 0, usageError(name, "--mode %q: want pipelined or per-worker", c.mode)
	}
	switch c.keys {
	case "unique":
		return c.workers, nil
	case "hot":
		return 1, nil
	}
	n, err := strconv.Atoi(c.keys)
	if err != nil || n < 1 {
		return 0, usageError(name, "--keys %q: want unique, hot, or a number of keys (1 or more)", c.keys)
	}
	return n, nil
}

// benchProgress is what the live line of a bench shows, counted as the
// workers go.
type benchProgress struct {
	cycles, errors atomic.Int64
}

func (b *benchProgress) line(start time.Time, d time.Duration, s renderStyle) string {
	elapsed := time.Since(start)
	n := b.cycles.Load()
	rate := float64(n) / max(elapsed.Seconds(), 0.001)
	return strings.Join([]string{
		fmt.Sprintf("bench: %s of %s", humanDuration(min(elapsed, d)), d),
		fmt.Sprintf("%d cycles (%.0f/s)", n, rate),
		countOf(int(b.errors.Load()), "error", "errors"),
	}, s.dot())
}

// workerStats is one worker's counts, merged when the run ends so workers
// share nothing while they run.
type workerStats struct {
	cycles, errors, timeouts uint64
	firstErr                 error
}

// latencyShard is a histogram a few workers share. A histogram per worker
// would be simpler but costs 15 KiB each, too much for 100000 workers; a
// mutex taken once per network round trip costs little.
type latencyShard struct {
	mu sync.Mutex
	h  histogram
}

const latencyShards = 64

// benchErrorPause keeps a failing worker from spinning on errors.
const benchErrorPause = 10 * time.Millisecond

func (c *benchCommand) worker(ctx context.Context, cl *client.Client, key string, end time.Time, st *workerStats, lat *latencyShard, live *benchProgress) {
	for {
		left := time.Until(end)
		if left <= 0 || ctx.Err() != nil {
			return
		}
		wait, cut := c.wait.wire(), false
		if !c.wait.set || wait >= left {
			// Never 0, which would wait forever.
			wait, cut = max(left.Truncate(time.Millisecond), time.Millisecond), true
		}
		began := time.Now()
		err := benchCycle(ctx, cl, key, c.lease, wait, end.Add(c.lease), c.limit)
		switch {
		case err == nil:
			st.cycles++
			live.cycles.Add(1)
			took := time.Since(began)
			lat.mu.Lock()
			lat.h.record(took)
			lat.mu.Unlock()
		case ctx.Err() != nil:
			return
		case errors.Is(err, client.ErrTimeout):
			// An acquire the end of the run cut short is not a timeout.
			if !cut {
				st.timeouts++
			}
		default:
			st.errors++
			live.errors.Add(1)
			if st.firstErr == nil {
				st.firstErr = err
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(benchErrorPause):
			}
		}
	}
}

// benchCycle acquires key (one of limit places) and releases it at once.
// deadline bounds the acquire in case no answer comes; the release gets
// its own time so no lock is left behind when the run ends mid-cycle.
func benchCycle(ctx context.Context, cl *client.Client, key string, lease, wait time.Duration, deadline time.Time, limit int) error {
	actx, cancel := context.WithDeadline(ctx, deadline)
	lock, err := cl.AcquireWith(actx, key, lease, wait, client.Limit(limit))
	cancel()
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return cl.ReleaseToken(rctx, key, lock.Token)
}

func (r *benchResult) print(w io.Writer) error {
	conns := fmt.Sprintf("%d connection", r.ConnsPerAddr)
	if r.ConnsPerAddr != 1 {
		conns += "s"
	}
	how := fmt.Sprintf("1 shared client, %s per node", conns)
	if r.Mode == benchPerWorker {
		how = fmt.Sprintf("%d clients, %s per node each", r.Clients, conns)
	}
	keys := fmt.Sprintf("%s (%d keys", r.Keys, r.KeyCount)
	if r.KeyCount == 1 {
		keys = fmt.Sprintf("%s (1 key", r.Keys)
	}
	if r.Limit > 1 {
		keys += fmt.Sprintf(", each a semaphore of %d places)", r.Limit)
	} else {
		keys += ")"
	}
	lines := [][2]string{
		{"mode", fmt.Sprintf("%s: %d workers, %s", r.Mode, r.Workers, how)},
		{"keys", keys},
		{"duration", fmt.Sprintf("%.2fs", r.DurationSeconds)},
		{"cycles", fmt.Sprintf("%d (%.1f/s)", r.Cycles, r.CyclesPerSecond)},
		{"errors", strconv.FormatUint(r.Errors, 10)},
		{"timeouts", strconv.FormatUint(r.Timeouts, 10)},
		{"latency", fmt.Sprintf("p50 %s  p99 %s  p99.9 %s  max %s",
			round3(r.latency[0]), round3(r.latency[1]), round3(r.latency[2]), round3(r.latency[3]))},
	}
	if r.FirstError != "" {
		// The client's words, which may quote a server's.
		lines = append(lines, [2]string{"first error", printableText(r.FirstError)})
	}
	if r.Interrupted {
		lines = append(lines, [2]string{"note", "interrupted: these results cover the time before the signal"})
	}
	for _, l := range lines {
		if _, err := fmt.Fprintf(w, "%-12s %s\n", l[0], l[1]); err != nil {
			return err
		}
	}
	return nil
}

// round3 keeps three significant digits of d, enough for a latency.
func round3(d time.Duration) time.Duration {
	unit := time.Duration(1)
	for v := d; v >= 1000; v /= 10 {
		unit *= 10
	}
	return d.Round(unit)
}

// histogram counts durations in log-linear buckets: exact below 64ns, then
// 32 buckets per power of two, so a quantile is within about 3% of the
// truth, in fixed memory, whatever the run length.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

const (
	histSubBits = 5 // 32 sub-buckets per power of two
	histExact   = 2 << histSubBits
	histBuckets = (64-histSubBits)<<histSubBits + histExact
)

func histBucket(v uint64) int {
	if v < histExact {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1 // v>>shift is in [32, 64)
	return shift<<histSubBits + int(v>>shift)
}

// histLow is the smallest value of bucket i, and histWidth how many values
// it holds.
func histLow(i int) uint64 {
	if i < histExact {
		return uint64(i)
	}
	shift := i>>histSubBits - 1
	return uint64(i-shift<<histSubBits) << shift
}

func histWidth(i int) uint64 {
	if i < histExact {
		return 1
	}
	return 1 << (i>>histSubBits - 1)
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histBucket(uint64(d))]++
	h.n++
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the value below which a fraction q of the samples lie,
// as the middle of its bucket (never above the largest sample).
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			mid := histLow(i) + histWidth(i)/2
			return min(time.Duration(mid), h.max)
		}
	}
	return h.max
}
