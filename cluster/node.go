package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// Role is what a node does in the cluster.
type Role string

const (
	// Joining: just started, still learning who is active.
	Joining Role = "joining"
	// Standby: follows the active's replication stream and redirects
	// clients to it.
	Standby Role = "standby"
	// Active: serves lock requests and streams its changes to standbys.
	Active Role = "active"
	// HandingOff: was active, has told its successor to take over and holds
	// new lock requests until the successor confirms.
	HandingOff Role = "handoff"
)

// Defaults of Config.
const (
	DefaultListen         = "127.0.0.1:7070"
	DefaultHeartbeat      = 100 * time.Millisecond
	DefaultFailureTimeout = time.Second
	// handoffTimeout bounds how long an active waits for its successor to
	// confirm before it takes the role back and serves again.
	handoffTimeout = 3 * time.Second
	// maxStreamBuffer bounds a replication stream's backlog: live
	// records for a standby that fell this far behind are dropped with
	// the stream, and it syncs again. A snapshot is sent a slice at a
	// time as the standby reads it, so it never needs this much.
	maxStreamBuffer = 256 << 20
	// maxScans bounds the key listings (K) that run at once; more wait
	// their turn.
	maxScans = 2
	// maxConnWaiters bounds the waiting acquires of one connection.
	maxConnWaiters = 100_000
)

// Config describes one node.
type Config struct {
	Listen         string        // address to listen on
	Advertise      string        // this node as written in Peers; default Listen
	Peers          []string      // every node in priority order; empty for a single node
	Heartbeat      time.Duration // interval between heartbeats to each peer
	FailureTimeout time.Duration // a peer silent this long is down
	Engine         engine.Config // lock limits
	Security       Security      // TLS, secrets
	Limits         Limits        // connections and buffers
	Logger         *slog.Logger
}

// Node is one running lockd.
type Node struct {
	cfg     Config
	self    string
	selfIdx int
	log     *slog.Logger
	base    time.Time
	ln      net.Listener
	gate    gate
	// tlsConfig serves TLS on accepted connections; nil: plain TCP.
	tlsConfig  *tls.Config
	outBytes   atomic.Int64 // unread answers of every connection
	refusedLog rateLog      // refused connections and requests
	skewLog    rateLog      // tokens ignored for being too far ahead

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}
	scans  chan struct{} // a slot per key listing running (maxScans)

	mu         sync.Mutex
	eng        *engine.Engine
	role       Role
	active     string    // the active's address; "" when unknown
	sticky     bool      // gave the role up by command: no take-back by priority
	pinnedAt   time.Time // got the role by command then (zero: not pinned)
	synced     bool      // has completed a sync, or been active, since start
	fresh      bool      // active that started empty: never synced, no standby fed yet
	seq        uint64
	activeSeq  uint64 // the active's position, as last heard (for lag)
	conns      map[uint64]*conn
	perIP      map[string]int // open connections per remote IP
	streams    []*conn        // the replication streams this node feeds (conns with sub set)
	nextConnID uint64
	peers      []*peer // every other node, in priority order
	evs        []engine.Event
	timer      *time.Timer
	armedAt    time.Time
	follow     *follower
	hint       string    // where the last active said the role went
	hintUntil  time.Time // trust hint until then
	takeback   bool      // a take-back request is in flight
	lastTake   time.Time
	handoff    *handoff
	parked     []parkedReq
	// The handoff this node took last (the giver and the H record's
	// token), and the handoffs it was told were cancelled (giver: token),
	// for answering C and ignoring a late H record.
	takenFrom  string
	takenToken uint64
	cancelled  map[string]uint64
	closing    bool // the listener is closing: refuse new connections
	// testLoseTakeover makes this node, on taking a handoff, close the
	// stream without confirming (O), as when the link breaks right then.
	testLoseTakeover atomic.Bool
	leaving          bool // shutting down: hand off, then stop; take no role
}

// New checks cfg and prepares a node; Run starts it.
func New(cfg Config) (*Node, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.FailureTimeout <= 0 {
		cfg.FailureTimeout = DefaultFailureTimeout
	}
	if cfg.FailureTimeout < 2*cfg.Heartbeat {
		return nil, fmt.Errorf("--failure-timeout %s must be at least twice --heartbeat %s, or every late beat looks like a failure", cfg.FailureTimeout, cfg.Heartbeat)
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
		cfg:   cfg,
		self:  self,
		log:   cfg.Logger,
		base:  time.Now(),
		kick:  make(chan struct{}, 1),
		scans: make(chan struct{}, maxScans),
		conns: make(map[uint64]*conn),
		perIP: make(map[string]int),
	}
	peers := slices.Clone(cfg.Peers)
	if len(peers) == 0 {
		peers = []string{self}
	}
	seen := map[string]bool{}
	n.selfIdx = -1
	for i, p := range peers {
		if p == "" {
			return nil, errors.New("--peers has an empty address; write them as HOST:PORT,HOST:PORT")
		}
		if seen[p] {
			return nil, fmt.Errorf("--peers lists %s twice; each node once, in priority order", p)
		}
		seen[p] = true
		if _, _, err := net.SplitHostPort(p); err != nil {
			return nil, fmt.Errorf("--peers entry %q is not HOST:PORT: %v", p, err)
		}
		if p == self {
			n.selfIdx = i
			continue
		}
		n.peers = append(n.peers, &peer{addr: p, idx: i})
	}
	if n.selfIdx < 0 {
		return nil, fmt.Errorf("this node (%s) is not in --peers %s; list it there, or set --advertise to the address --peers uses for it", self, strings.Join(peers, ","))
	}
	if len(peers) > engine.MaxNodes {
		return nil, fmt.Errorf("--peers lists %d nodes; a cluster has at most %d", len(peers), engine.MaxNodes)
	}
	g, err := newGate(cfg.Security, cfg.Listen, len(n.peers))
	if err != nil {
		return nil, err
	}
	n.gate = g
	if cfg.Security.TLS != nil {
		n.tlsConfig = cfg.Security.TLS.ServerConfig()
	}
	ec := cfg.Engine
	ec.Node = n.selfIdx
	if err := ec.Check(); err != nil {
		return nil, err
	}
	n.eng = engine.New(ec, n.now())
	n.role = Joining
	if len(n.peers) == 0 {
		n.role = Active
		n.active = self
		n.synced = true
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
	n.timer = time.NewTimer(time.Hour)
	n.timer.Stop()
	n.log.Info("lockd serving", "addr", n.ln.Addr().String(), "self", n.self, "peers", len(n.peers)+1, "role", n.role)
	n.wg.Add(2)
	go n.acceptLoop()
	go n.timerLoop()
	for _, p := range n.peers {
		n.wg.Add(1)
		go n.beatLoop(p)
	}
	if len(n.peers) > 0 {
		n.wg.Add(1)
		go n.superviseLoop()
	}
	<-ctx.Done()
	n.shutdown()
	return nil
}

func (n *Node) shutdown() {
	n.mu.Lock()
	n.log.Info("shutting down", "self", n.self, "role", string(n.role))
	n.leaving = true
	var done chan struct{}
	if n.role == Active && len(n.peers) > 0 {
		done = make(chan struct{})
		if err := n.startHandoffLocked("", "shutdown", false, func(string, error) { close(done) }); err != nil {
			n.log.Warn("shutting down without handoff", "reason", err.Error())
			done = nil
		}
	}
	n.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(handoffTimeout + time.Second):
		}
	}
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
	n.log.Info("lockd stopped", "self", n.self)
}

func (n *Node) acceptLoop() {
	defer n.wg.Done()
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			if n.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			n.log.Warn("accept failed", "err", err.Error())
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		n.mu.Lock()
		if n.closing {
			n.mu.Unlock()
			nc.Close()
			continue
		}
		n.nextConnID++
		c := newConn(n, n.nextConnID, nc)
		if why := n.connLimitLocked(c.ip); why != "" {
			n.mu.Unlock()
			n.refusedLog.log(n.log, "connection refused", "remote", c.remote, "why", why)
			if n.tlsConfig == nil {
				// A fresh socket's buffer takes one line without blocking.
				nc.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				nc.Write(proto.AppendError(nil, proto.WordNone, '?', why))
			}
			nc.Close()
			continue
		}
		c.tls = n.tlsConfig != nil
		n.conns[c.id] = c
		n.perIP[c.ip]++
		// Added under the mutex, before shutdown (which sets closing
		// under it) can start waiting.
		n.wg.Add(2)
		n.mu.Unlock()
		go c.readLoop()
		go c.writeLoop()
	}
}

// timerLoop fires lease and wait deadlines while the node is active.
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
		// Only the active fires deadlines. While handing off, the state
		// already went to the successor: a lease expiring here now would
		// grant the key a second time, under an older token.
		if n.role == Active {
			n.advanceLocked(n.now())
		}
		n.armTimerLocked()
		n.mu.Unlock()
	}
}

// armTimerLocked makes sure the timer fires by the engine's next deadline.
func (n *Node) armTimerLocked() {
	if n.role != Active {
		return
	}
	d, ok := n.eng.NextDeadline()
	if !ok {
		return
	}
	if !n.armedAt.IsZero() && !d.Before(n.armedAt) {
		return
	}
	n.armedAt = d
	n.timer.Reset(max(d.Sub(n.now()), 0))
}

func (n *Node) setRoleLocked(r Role, active, reason string) {
	if n.role == r && n.active == active {
		return
	}
	n.log.Info("role change", "self", n.self, "from", string(n.role), "to", string(r), "active", active, "reason", reason)
	n.role = r
	n.active = active
}
