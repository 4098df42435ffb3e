package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto/auth"
)

// Role is what a node does in the cluster (see package core).
type Role = core.Role

// The roles.
const (
	Joining    = core.Joining
	Standby    = core.Standby
	Active     = core.Active
	HandingOff = core.HandingOff
)

// Node is one running lockd: the shell around a core.Core that owns the
// listener, the connections, the peer links and the goroutines, feeds the
// core its events under one mutex, and carries out its actions.
type Node struct {
	cfg  Config
	self string
	log  *slog.Logger
	base time.Time
	ln   net.Listener
	gate gate
	// tlsConfig serves TLS on accepted connections; nil: plain TCP.
	tlsConfig  *tls.Config
	refusedLog rateLog     // refused connections and requests
	running    atomic.Bool // serving: Run started and shutdown has not
	limits     limitCounters

	// output is what the connections' writers share: the bytes they
	// hold unwritten, and those of the buffers dropped as their readers
	// rested (outWriter.shedOut), for trimLoop.
	output outShared
	// rests counts the readers that rested (readtimeout.go), for trimLoop.
	rests atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// scanTurns: whose key listing scans the next slice (turns.go).
	scanTurns turns
	stopped   chan struct{} // closed when the core says it stopped
	stopOnce  sync.Once

	mu        sync.Mutex
	core      *core.Core
	timer     *time.Timer
	armedAt   time.Time
	conns     map[uint64]*conn
	perIP     map[string]*ipConns // open connections per remote IP
	authFails authBackoff         // failed authentications per source
	unauth    strangerLists       // connections not authenticated yet (connlimits.go)
	evicting  int                 // evicted connections not dropped yet
	// watchesStale: the core ended every watch (budgets.go).
	watchesStale atomic.Bool
	nextConnID   uint64
	links        map[string]*link // the heartbeat link to each peer
	closing      bool             // the listener is closing: refuse new connections
	// connGone, when not nil, is closed when a connection is dropped
	// (drain waits on it).
	connGone chan struct{}

	// applyMu orders the carrying out of the core's Readies (carry.go),
	// and guards what that touches: taken while mu is held, never the
	// other way round.
	applyMu  sync.Mutex
	ready    core.Ready // the Ready being carried out
	feedback []feedback // what it has for the core
	stats    shellStats // what the shell counts (stats.go)
	follow   *followStream

	// seqs: this node's replication position over time (stats.go),
	// guarded by mu; seqsStale: the role changed, so it starts afresh.
	seqs      seqRing
	seqsStale atomic.Bool

	disk *durable // the data directory; nil: memory only
}

// New checks cfg and prepares a node; Run starts it.
func New(cfg Config) (*Node, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Limits.fill()
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return nil, fmt.Errorf("--listen %q is not HOST:PORT: %v", cfg.Listen, err)
	}
	self := cfg.Advertise
	if self == "" {
		self = cfg.Listen
	}
	n := &Node{
		cfg:     cfg,
		self:    self,
		log:     cfg.Logger,
		base:    time.Now(),
		stopped: make(chan struct{}),
		conns:   make(map[uint64]*conn),
		perIP:   make(map[string]*ipConns),
		links:   make(map[string]*link),
	}
	n.stats.init()
	n.output.lim, n.output.wg = &n.cfg.Limits, &n.wg
	c, err := core.New(core.Config{
		Self:            self,
		Peers:           cfg.Peers,
		Heartbeat:       cfg.Heartbeat,
		FailureTimeout:  cfg.FailureTimeout,
		Async:           cfg.Async,
		SyncTimeout:     cfg.SyncTimeout,
		MaxWatches:      cfg.MaxWatches,
		MaxTotalWatches: cfg.MaxTotalWatches,
		Engine:          cfg.Engine,
		Durable:         cfg.DataDir != "",
		Durability:      n.Durability(),
		Logger:          cfg.Logger,
	}, n.now())
	if err != nil {
		return nil, err
	}
	n.core = c
	g, err := newGate(cfg.Security, cfg.Listen, len(c.Peers()))
	if err != nil {
		return nil, err
	}
	if specificHost(self) {
		g.names = append(g.names, self)
	}
	n.gate = g
	if cfg.Security.TLS != nil {
		n.tlsConfig = cfg.Security.TLS.ServerConfig()
	}
	for _, p := range c.Peers() {
		n.links[p] = newLink(n, p)
	}
	// The shell's timers run on the core's timings, defaults filled in.
	n.cfg.Heartbeat, n.cfg.FailureTimeout = c.Config().Heartbeat, c.Config().FailureTimeout
	if cfg.DataDir != "" {
		if err := n.openDisk(); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// now is the node's clock: wall-clock at start plus monotonic time since,
// so a wall-clock step does not shorten or stretch leases.
func (n *Node) now() time.Time { return n.base.Add(time.Since(n.base)) }

// Self is this node's address as written in --peers.
func (n *Node) Self() string { return n.self }

// Listen opens the listener; Run calls it if it was not called before.
// Calling it first lets the caller report a busy port before serving.
func (n *Node) Listen() error {
	if n.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v; is another lockd running there? pick a free port with --listen", n.cfg.Listen, err)
	}
	n.ln = ln
	// Where a connection must prove itself, one that has sent nothing is
	// held back until it does (connlimits.go).
	if n.gate.open == auth.None && n.cfg.Limits.DeferAccept > 0 {
		if err := deferAccept(ln, n.cfg.Limits.DeferAccept); err != nil {
			n.log.Warn("connections that send nothing are taken at once", "err", err.Error())
		}
	}
	return nil
}

// Addr is the address the node listens on (after Listen).
func (n *Node) Addr() string {
	if n.ln == nil {
		return n.cfg.Listen
	}
	return n.ln.Addr().String()
}

// Run serves until ctx ends, then shuts down gracefully: an active node
// hands its role to a caught-up standby first, then redirects its clients
// and closes.
func (n *Node) Run(ctx context.Context) error {
	if err := n.Listen(); err != nil {
		return err
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.mu.Lock()
	n.timer = time.NewTimer(time.Hour)
	n.unlock(nil)
	n.log.Info("lockd serving", "addr", n.ln.Addr().String(), "self", n.self, "peers", len(n.links)+1, "role", string(n.core.Role()))
	n.wg.Add(3)
	go n.acceptLoop()
	go n.timerLoop()
	go n.trimLoop()
	for _, l := range n.links {
		n.wg.Add(1)
		go l.run()
	}
	if n.disk != nil {
		n.wg.Add(1)
		go n.syncLoop()
	}
	n.running.Store(true)
	select {
	case <-ctx.Done():
	case <-n.diskFailed():
		n.shutdown()
		return n.disk.err
	}
	n.shutdown()
	return nil
}

func (n *Node) shutdown() {
	n.running.Store(false)
	n.handOffAndDrain()
	n.mu.Lock()
	n.closing = true
	conns := make([]*conn, 0, len(n.conns))
	for _, c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	n.ln.Close()
	n.cancel()
	for _, c := range conns {
		c.flushAndClose()
	}
	n.wg.Wait()
	n.closeDisk()
	n.log.Info("lockd stopped", "self", n.self)
}

// handOffAndDrain hands the role to a standby caught up, when this node
// is the active, and serves its clients redirects until they left.
func (n *Node) handOffAndDrain() {
	n.mu.Lock()
	n.core.Shutdown(n.now())
	n.unlock(nil)
	select {
	case <-n.stopped:
	case <-time.After(core.DefaultHandoffTimeout + n.cfg.FailureTimeout + time.Second):
		n.log.Warn("stopping before the handoff settled")
	}
	n.drain()
}

// drain keeps a node that handed its role off reading its clients'
// connections, answering every request with M to the new active, until
// each client has closed its connection or a failure timeout has passed
// (by then a client that checks its connections has noticed). A request
// sent in the last moment before the handoff is thus answered, not met
// with EOF. New connections are refused meanwhile: their clients try the
// next address at once.
func (n *Node) drain() {
	n.mu.Lock()
	to := n.core.Active()
	handed := n.core.Role() != core.Active && to != "" && to != n.self
	n.mu.Unlock()
	if !handed {
		return
	}
	n.ln.Close()
	deadline := time.NewTimer(n.cfg.FailureTimeout)
	defer deadline.Stop()
	// A connection that has not spoken yet may be a peer's: look again
	// every heartbeat.
	tick := time.NewTicker(n.cfg.Heartbeat)
	defer tick.Stop()
	for {
		n.mu.Lock()
		open := 0
		for _, c := range n.conns {
			if !c.peer.Load() {
				open++
			}
		}
		if n.connGone == nil {
			n.connGone = make(chan struct{})
		}
		gone := n.connGone
		n.mu.Unlock()
		if open == 0 {
			return
		}
		select {
		case <-gone:
		case <-tick.C:
		case <-deadline.C:
			n.log.Info("closing client connections after the handoff", "self", n.self, "still_open", open, "active", to)
			return
		}
	}
}

// timerLoop ticks the core when it asked to be woken.
func (n *Node) timerLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.timer.C:
		}
		n.mu.Lock()
		n.armedAt = time.Time{}
		now := n.now()
		n.core.Tick(now)
		n.sampleSeqLocked(now)
		n.unlock(nil)
	}
}
