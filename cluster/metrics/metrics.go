// Package metrics serves a lockd node's metrics in the Prometheus
// exposition format, and its health probes, over HTTP: /metrics,
// /healthz and /readyz.
//
// It owns the names, types, labels and help of every lockd_ metric and
// the HTTP side of the probes; what is counted, and what ready means, are
// package cluster's (cluster.Metrics, cluster.Health). Every value is
// read at scrape time, from one cluster.Node.Metrics call (one hold of
// the node's mutex): nothing here runs on a request's path. The registry
// is this package's own, never Prometheus' global one, so two nodes in
// one process (tests) do not collide.
//
// It knows nothing of locks, roles or the wire; package cluster does not
// import it, and neither does lockctl.
package metrics

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lockd-io/lockd/cluster"
)

// Source is what the metrics are read from: a *cluster.Node.
type Source interface {
	Metrics() cluster.Metrics
	Health() cluster.Health
}

// Roles, one lockd_role series each.
var roles = []cluster.Role{cluster.Joining, cluster.Standby, cluster.Active, cluster.HandingOff}

// Handoff reasons, one lockd_handoffs_given_total series each (see
// core.Counters.HandoffsGiven).
var handoffReasons = []string{"command", "shutdown", "takeback"}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("lockd_"+name, help, labels, nil)
}

// The metrics. The README's Metrics table lists them with their meaning.
var (
	dRequests = desc("requests_total", "Client requests answered, by op (acquire, release, renew, queue, keys, status, handoff, auth, invalid) and outcome (granted, timeout, ok, notheld, moved, error, cancelled: a waiter whose connection closed).", "op", "outcome")
	dDuration = desc("request_duration_seconds", "Time from reading a client request to queueing its answer, for requests answered at once (acquires that wait are in lockd_acquire_wait_seconds). Sampled: one batch of requests in 8 per connection is timed, the first included, every request of a batch at the batch's end; use lockd_requests_total for rates.")
	dWait     = desc("acquire_wait_seconds", "Time from the node taking an acquire up to granting it: 0 when the key was free, else the time in its queue.")

	dGrants    = desc("grants_total", "Locks granted, at once or to a waiter.")
	dReleases  = desc("releases_total", "Releases that freed a lock (R answered ok).")
	dRenewals  = desc("renewals_total", "Leases renewed (N answered ok).")
	dExpiries  = desc("expiries_total", "Leases that ran out: locks the server took back.")
	dTimeouts  = desc("timeouts_total", "Acquires whose wait ended without a grant (T).")
	dRedirects = desc("redirects_total", "Lock requests answered M: this node was not active.")
	dRefusals  = desc("refusals_total", "Requests answered E by the cluster logic (grammar, limits).")

	dHeld     = desc("locks_held", "Keys held now (on a standby: as replicated).")
	dKeys     = desc("keys", "Keys held or waited on now.")
	dWaiters  = desc("waiters", "Acquires queued now, over all keys.")
	dConns    = desc("connections_open", "Connections open now: clients, peers' heartbeat links, standbys' streams.")
	dConnsAll = desc("connections_total", "Connections accepted since start, refused ones included.")
	dOutput   = desc("output_buffered_bytes", "Answers queued for clients and not yet written, all connections together (see --max-output).")
	dLimits   = desc("limit_hits_total", "Times a limit was hit: a request refused or a connection closed for it.", "limit")

	dRole        = desc("role", "1 for this node's role now, 0 for the others.", "role")
	dPromotions  = desc("promotions_total", "Times this node became active without a handoff: a failover, or a start with no active.")
	dDemotions   = desc("demotions_total", "Times this node stepped down because another node was active.")
	dGiven       = desc("handoffs_given_total", "Handoffs this node gave, by reason: command (lockctl handoff), shutdown (SIGINT, SIGTERM), takeback (a higher-priority node took its role back).", "reason")
	dTaken       = desc("handoffs_taken_total", "Handoffs this node took: it became active by a handoff.")
	dFailed      = desc("handoffs_failed_total", "Handoffs this node began that did not happen.")
	dPauses      = desc("pauses_total", "Times this node found it had not run for a failure timeout (stopped, a VM paused).")
	dNoActive    = desc("no_active_seconds", "How long this node has now been without an active it can reach; 0 while it knows one.")
	dNoActiveAll = desc("no_active_seconds_total", "Time this node has spent without an active it can reach, since start.")

	dPeerUp   = desc("peer_up", "1 when this node hears the peer's heartbeat answers, 0 when not.", "peer")
	dSeq      = desc("replication_seq", "This node's replication position: lock state changes applied.")
	dLag      = desc("replication_lag_records", "On the active, per standby: state changes the standby lacks, as of its last heartbeat answer.", "standby")
	dLagSecs  = desc("replication_lag_seconds", "On the active, per standby: how long ago the active first held the oldest change the standby lacked at its last heartbeat answer; an upper bound, sampled at least every heartbeat; 0 when caught up.", "standby")
	dSnapshot = desc("snapshot_duration_seconds", "Snapshots sent to standbys (count) and their time from subscription to synced (sum).")

	dEpoch = desc("token_epoch", "The epoch of the highest token this node knows of (token >> 22): Unix milliseconds when that epoch began, at the latest. It moves forward with every promotion.")
)

// collector reads a Source at every scrape.
type collector struct{ src Source }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		dRequests, dDuration, dWait, dGrants, dReleases, dRenewals, dExpiries, dTimeouts, dRedirects, dRefusals,
		dHeld, dKeys, dWaiters, dConns, dConnsAll, dOutput, dLimits,
		dRole, dPromotions, dDemotions, dGiven, dTaken, dFailed, dPauses, dNoActive, dNoActiveAll,
		dPeerUp, dSeq, dLag, dLagSecs, dSnapshot, dEpoch,
	} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.src.Metrics()
	k := m.Counters
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	histogram := func(d *prometheus.Desc, h cluster.Histogram) {
		buckets := make(map[float64]uint64, len(h.Bounds))
		for i, b := range h.Bounds {
			buckets[b] = h.Counts[i]
		}
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
	}

	// Every op and outcome that can happen, at 0 until it does, so that
	// rate() and alerts see a series from the start.
	seen := make(map[[2]string]bool, len(m.Requests))
	for _, r := range m.Requests {
		seen[[2]string{r.Op, r.Outcome}] = true
		counter(dRequests, float64(r.N), r.Op, r.Outcome)
	}
	for _, op := range []string{"acquire", "release"} {
		for _, outcome := range map[string][]string{"acquire": {"granted", "timeout", "moved", "error"}, "release": {"ok", "notheld", "moved", "error"}}[op] {
			if !seen[[2]string{op, outcome}] {
				counter(dRequests, 0, op, outcome)
			}
		}
	}
	histogram(dDuration, m.RequestDuration)
	histogram(dWait, m.AcquireWait)

	counter(dGrants, float64(k.Grants))
	counter(dReleases, float64(k.Releases))
	counter(dRenewals, float64(k.Renewals))
	counter(dExpiries, float64(k.Expiries))
	counter(dTimeouts, float64(k.Timeouts))
	counter(dRedirects, float64(k.Redirects))
	counter(dRefusals, float64(k.Refusals))

	gauge(dHeld, float64(m.HeldLocks))
	gauge(dKeys, float64(m.Keys))
	gauge(dWaiters, float64(m.Waiters))
	gauge(dConns, float64(m.ConnsOpen))
	counter(dConnsAll, float64(m.ConnsTotal))
	gauge(dOutput, float64(m.OutputBytes))
	for _, name := range cluster.LimitNames {
		counter(dLimits, float64(m.Limits[name]), name)
	}

	for _, r := range roles {
		v := 0.0
		if m.Health.Role == r {
			v = 1
		}
		gauge(dRole, v, string(r))
	}
	counter(dPromotions, float64(k.Promotions))
	counter(dDemotions, float64(k.Demotions))
	for _, r := range handoffReasons {
		counter(dGiven, float64(k.HandoffsGiven[r]), r)
	}
	counter(dTaken, float64(k.HandoffsTaken))
	counter(dFailed, float64(k.HandoffsFailed))
	counter(dPauses, float64(k.Pauses))
	gauge(dNoActive, m.NoActive.Seconds())
	counter(dNoActiveAll, m.NoActiveTotal.Seconds())

	for _, p := range m.Peers {
		up := 0.0
		if p.Reachable {
			up = 1
		}
		gauge(dPeerUp, up, p.Addr)
		if p.HasLag {
			gauge(dLag, float64(p.LagRecords), p.Addr)
			gauge(dLagSecs, p.LagSeconds, p.Addr)
		}
	}
	gauge(dSeq, float64(m.Seq))
	ch <- prometheus.MustNewConstSummary(dSnapshot, k.SnapshotsSent, k.SnapshotDuration.Seconds(), nil)
	gauge(dEpoch, float64(m.TokenEpoch))
}

// NewRegistry returns a registry of its own holding src's lockd_ metrics,
// lockd_build_info with version, and the Go runtime's and the process's
// standard metrics (go_*, process_*).
func NewRegistry(src Source, version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collector{src},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "lockd_build_info",
			Help:        "Always 1; the version label says which lockd this is.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	return reg
}

// Handler serves /metrics from reg, and /healthz and /readyz from src's
// health: 200 with a line that says why, or 503 with a line that says
// why not.
func Handler(src Source, reg *prometheus.Registry) http.Handler {
	return PacedHandler(src, reg, 0)
}

// PacedHandler is Handler, whose /metrics renders the exposition at most
// once per every and serves that rendering to every scrape in between:
// a scrape reads the Go runtime's and the process's statistics and takes
// the node's mutex, and /metrics is unauthenticated, so whoever reaches
// it must not make the node spend a core on scrapes (2,200 a second
// did). A scraper sees values at most every old.
func PacedHandler(src Source, reg *prometheus.Registry, every time.Duration) http.Handler {
	mux := http.NewServeMux()
	var exposition http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:            reg,
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
	if every > 0 {
		exposition = &paced{h: exposition, every: every}
	}
	mux.Handle("GET /metrics", exposition)
	mux.HandleFunc("GET /healthz", probe(src, "ok", "unhealthy", cluster.Health.Live))
	mux.HandleFunc("GET /readyz", probe(src, "ready", "not ready", cluster.Health.Ready))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "lockd: /metrics (Prometheus), /healthz (serving), /readyz (active, or a caught-up standby)")
	})
	return mux
}

func probe(src Source, yes, no string, decide func(cluster.Health) (bool, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ok, why := decide(src.Health())
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "%s: %s\n", no, why)
			return
		}
		fmt.Fprintf(w, "%s: %s\n", yes, why)
	}
}

// paced serves h's answer, rendered at most once per every, to every
// request: in the plain text format, uncompressed, which every scraper
// reads (a rendering per format and encoding asked for would be as many
// renderings).
type paced struct {
	h     http.Handler
	every time.Duration

	mu     sync.Mutex // held while rendering: scrapes meanwhile wait for it
	at     time.Time
	header http.Header
	code   int
	body   []byte
}

func (p *paced) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.body == nil || time.Since(p.at) >= p.every {
		rec := &recorder{header: http.Header{}, code: http.StatusOK}
		plain := r.Clone(r.Context())
		plain.Header.Del("Accept")
		plain.Header.Del("Accept-Encoding")
		p.h.ServeHTTP(rec, plain)
		p.header, p.code, p.body, p.at = rec.header, rec.code, rec.body.Bytes(), time.Now()
	}
	header, code, body := p.header, p.code, p.body
	p.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	w.Write(body)
}

// recorder keeps what a handler writes.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}
