package core

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
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
	// HandingOff: was active, has told its successor to take over and
	// holds new lock requests until the handoff is settled.
	HandingOff Role = "handoff"
)

// ConnID names a connection the shell accepted: a client, a peer's
// heartbeat link, or a standby's replication stream.
type ConnID uint64

// Core is one node's cluster logic: its role, what it knows of its peers,
// the replication streams it feeds and the one it follows, handoffs, and
// the lock engine it drives. It is not safe for concurrent use: the shell
// serialises every call. It starts no goroutine, reads no clock and does
// no I/O; time comes in as an argument of every event.
type Core struct {
	cfg     Config
	self    string
	selfIdx int
	log     *slog.Logger
	start   time.Time
	// ready is what the events since the last TakeReady asked
	// (ready.go).
	ready Ready
	// taking is the client request of the event being handled (take).
	taking taking
	// cancelLater: waiters whose connections closed while this node did
	// not serve (cancel).
	cancelLater []lateCancel
	// shared is a line being sent to many connections as it is
	// (flushWatches): act copies it into the Ready once.
	shared []byte

	eng *engine.Engine
	evs []engine.Event
	buf []byte // scratch for answers
	// sets holds what the core gathers of a set's events, which come in
	// a row and are answered, replicated and applied as one (sets.go).
	sets setBatches

	role      Role
	active    string    // the active's address; "" when unknown
	sticky    bool      // gave the role up by command: no take-back by priority
	pinnedAt  time.Time // got the role by command then (zero: not pinned)
	synced    bool      // has completed a sync, or been active, since start
	fresh     bool      // active that started empty: never synced, no standby fed yet
	seq       uint64    // state changes applied
	activeSeq uint64    // the active's position, as last heard (for lag)
	leaving   bool      // shutting down: hand off, then stop; take no role
	stopped   bool      // Stopped was called

	peers []*peer // every other node, in priority order
	conns map[ConnID]*conn

	streams []*conn // the replication streams this node feeds, in subscribe order
	follow  *follower

	hint      string    // where the last active said the role went
	hintUntil time.Time // trust hint until then
	hintFrom  string    // the node that said so: its claim to be active is over
	takeback  uint64    // the Ask id of a take-back in flight, 0 when none
	lastTake  time.Time

	handoff *handoff
	parked  []parkedReq
	// The handoff this node took last (the giver and the H record's
	// token), and the handoffs it was told were cancelled (giver: token),
	// for answering C and ignoring a late H record.
	takenFrom  string
	takenToken uint64
	cancelled  map[string]uint64

	// top is the newest token of this node's lock state (granted here or
	// applied from replication), base what top was when it last became
	// active: two actives that meet compare them (see supervise).
	top  uint64
	base uint64
	// baseSeq is seq when this node last became active: with base, the
	// state it began from (see yields). activeRound is the first
	// heartbeat round sent as the active: an answer to an earlier one may
	// have been written before this node took the role (by a node that
	// froze meanwhile), and is no reason to give the role up.
	baseSeq     uint64
	activeRound uint64
	prev        string // the active this node took the role from, "" none
	// changes: the last times this node took the role, for S.
	changes []proto.RoleChange
	// lastTick is when Tick last ran. An event that finds it older than
	// the failure timeout means this process did not run for that long
	// (stopped, a VM paused): an active then pauses (pausedSince) until it
	// has heard its peers again, since another may have taken over.
	lastTick    time.Time
	lastEvent   time.Time // the time of the event being served
	pausedSince time.Time
	stoppedAt   time.Time // when it last ran before the pause
	// deferSince: since when this standby, with no active, has left the
	// role to another candidate that has not taken it (see candidate);
	// deferRound the first heartbeat round sent since.
	deferSince time.Time
	deferRound uint64
	// wantSince: since when this node, holding no state, has been the
	// candidate (see supervise).
	wantSince  time.Time
	round      uint64 // heartbeat rounds sent
	pauseRound uint64 // the first round sent since the pause began

	// waiting is a handoff asked for while no standby was caught up but
	// one was syncing: it starts when one is, or fails at its deadline.
	waiting *waitingHandoff

	count Counters

	// Watches (watch.go): the connections watching each key, how many
	// watches there are, and the keys whose state changed and is not
	// sent to their watchers yet; the line last rendered of each key
	// still unchanged, and the bytes those lines take.
	watchers   map[string][]ConnID
	nwatches   int
	dirty      []string
	watchLines map[string]watchLine
	watchBytes int
	// The waiters the active replicated (J, D), by key in queue order,
	// and the key of each id: queued as ghosts on promotion.
	rwait    map[string][]replWaiter
	rwaitKey map[string]string

	// Synchronous replication (see sync.go).
	committed uint64   // every standby in sync has applied up to here
	holding   []*conn  // connections with answers held for acknowledgements
	degraded  bool     // sync mode, and no standby in sync: answers do not wait
	activeISR []string // the standbys in sync, as the active last said
	// expect: after a promotion, the standbys that were in sync with the
	// last active; answers wait for them to subscribe here and catch up,
	// until expectUntil at the latest.
	expect      []string
	expectUntil time.Time
	// degradedSince is when degraded last became true; degradedWarned,
	// whether that spell was logged (warnDegraded).
	degradedSince  time.Time
	degradedWarned bool

	disk disk // the data directory (disk.go)

	nextBeat   time.Time // when heartbeats and the supervisor are due
	nextAsk    uint64
	skewLogged time.Time // the last "token ignored" log line
}

// New checks cfg and returns the core of a node started at now, in role
// Joining (Active at once when it has no peers). What its events ask the
// shell to do is in Ready.
func New(cfg Config, now time.Time) (*Core, error) {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.FailureTimeout <= 0 {
		cfg.FailureTimeout = DefaultFailureTimeout
	}
	if cfg.HandoffTimeout <= 0 {
		cfg.HandoffTimeout = DefaultHandoffTimeout
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = cfg.FailureTimeout / 2
	}
	if cfg.SyncTimeout >= cfg.FailureTimeout {
		return nil, fmt.Errorf("--sync-timeout %s must be below --failure-timeout %s: a standby that stops acknowledging would stall every client longer than a failover takes", cfg.SyncTimeout, cfg.FailureTimeout)
	}
	if cfg.FailureTimeout < 2*cfg.Heartbeat {
		return nil, fmt.Errorf("--failure-timeout %s must be at least twice --heartbeat %s, or every late beat looks like a failure", cfg.FailureTimeout, cfg.Heartbeat)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	peers := slices.Clone(cfg.Peers)
	if len(peers) == 0 {
		peers = []string{cfg.Self}
	}
	c := &Core{
		disk:    disk{on: cfg.Durable},
		cfg:     cfg,
		self:    cfg.Self,
		selfIdx: -1,
		log:     cfg.Logger,
		start:   now,
		conns:   make(map[ConnID]*conn),
	}
	seen := map[string]bool{}
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
		if p == cfg.Self {
			c.selfIdx = i
			continue
		}
		c.peers = append(c.peers, &peer{addr: p, idx: i})
	}
	if c.selfIdx < 0 {
		return nil, fmt.Errorf("this node (%s) is not in --peers %s; list it there, or set --advertise to the address --peers uses for it", cfg.Self, strings.Join(peers, ","))
	}
	if len(peers) > engine.MaxNodes {
		return nil, fmt.Errorf("--peers lists %d nodes; a cluster has at most %d", len(peers), engine.MaxNodes)
	}
	ec := cfg.Engine
	ec.Node = c.selfIdx
	if err := ec.Check(); err != nil {
		return nil, err
	}
	c.eng = engine.New(ec, now)
	c.role = Joining
	if len(c.peers) == 0 {
		c.role = Active
		c.active = c.self
		c.synced = true
	}
	c.nextBeat = now
	c.lastTick = now
	return c, nil
}

// Tick moves the core's time to now: it fires the lease and wait
// deadlines due (on the active), and every heartbeat it sends the
// heartbeats, marks the replication streams and re-evaluates the role.
func (c *Core) Tick(now time.Time) {
	c.noteTime(now)
	c.lastTick = now
	c.maybeResume(now)
	if c.serving() {
		c.cancelsDue(now)
		c.advance(now)
	}
	c.retryWaitingHandoff(now)
	c.checkExpect(now)
	c.checkHeld(now)
	c.warnDegraded(now)
	c.logMark()
	if h := c.handoff; h != nil && !h.resolving && !now.Before(h.deadline) {
		c.handoffUnconfirmed(now, "the successor "+h.to+" did not confirm within "+c.cfg.HandoffTimeout.String())
	}
	if now.Before(c.nextBeat) {
		return
	}
	c.nextBeat = now.Add(c.cfg.Heartbeat)
	if len(c.peers) == 0 {
		return
	}
	c.round++
	bt := c.beat(now)
	bt.Flags.Round = c.round
	beat := proto.AppendBeat(nil, bt)
	for _, p := range c.peers {
		c.act(Action{Kind: ActBeat, Peer: p.addr}, beat)
	}
	c.supervise(now)
	if h := c.handoff; h != nil && h.resolving && h.askID == 0 {
		c.askResolve(h)
	}
}

// serving reports whether this node grants locks and fires deadlines now.
// While handing off, the state already went to the successor: a lease
// expiring here would grant the key a second time, under an older token.
// While paused after not running, another node may have taken over.
func (c *Core) serving() bool { return c.role == Active && c.pausedSince.IsZero() }

// noteTime notices that this process did not run for a failure timeout
// (no Tick since): what it knows of its peers is stale, and another node
// may have taken over meanwhile. Until it has heard them again (see
// maybeResume), an active stops granting and a standby does not promote.
// Every event calls it first.
func (c *Core) noteTime(now time.Time) {
	c.lastEvent = now
	if !c.didNotRun(now) || c.pausedSince.After(c.lastTick) {
		// (Paused already since it last ran: a second stop during the
		// pause, caught by the check below on its first event, starts
		// the pause anew, since what it heard before it is stale too.)
		return
	}
	if c.pausedSince.IsZero() {
		c.stoppedAt = c.lastTick
	}
	c.pausedSince = now
	c.pauseRound = c.round + 1 // the first heartbeat sent from now on
	for _, p := range c.peers {
		p.news = false
	}
	c.count.Pauses++
	c.log.Warn("this node did not run for a while: it decides nothing until its peers are heard again", "self", c.self, "stopped_for", now.Sub(c.lastTick).Round(time.Millisecond).String())
}

// didNotRun reports whether, at now, this node has gone pauseAfter
// without a Tick: it did not run, and must pause (noteTime). A node
// without peers never pauses.
func (c *Core) didNotRun(now time.Time) bool {
	return len(c.peers) > 0 && now.Sub(c.lastTick) >= c.pauseAfter()
}

// pauseAfter is how long without a Tick means this process did not run.
// A peer takes the role after a failure timeout without an answer from
// this node, counted from the last answer it had, which may have been
// written up to a heartbeat before this node's last Tick: a heartbeat
// less, so that a node its peers gave up on always knows it.
func (c *Core) pauseAfter() time.Duration {
	return c.cfg.FailureTimeout - c.cfg.Heartbeat
}

// maybeResume ends a pause once this node has fresh news of every peer:
// an answer to a heartbeat sent since the pause (answers echo their
// round), or a refused connection (nothing listens there); or when a
// failure timeout passed (the peers not heard are down: links that broke
// while it was stopped say nothing of that). supervise has by then
// demoted this node if another took over.
func (c *Core) maybeResume(now time.Time) {
	if c.pausedSince.IsZero() {
		return
	}
	fresh := true
	for _, p := range c.peers {
		fresh = fresh && p.news
	}
	if !fresh && now.Sub(c.pausedSince) < c.cfg.FailureTimeout {
		return
	}
	stopped := now.Sub(c.stoppedAt)
	c.pausedSince = time.Time{}
	c.log.Info("peers heard again after the pause", "self", c.self, "role", string(c.role), "all_answered", fresh)
	if c.role == Active {
		// Another active means the cluster moved on while this node did
		// not run: its state is the older, whatever the tokens say (what
		// it decided meanwhile nobody saw). It follows, syncs, and takes
		// the role back by priority if it is first.
		for _, p := range c.peers {
			if p.alive(now, c.cfg.FailureTimeout) && p.role == string(Active) && !p.paused {
				c.demote(now, p.addr, "another node took the role while this one did not run ("+p.addr+")")
				return
			}
		}
		for _, p := range c.peers {
			// A standby that follows another active says the cluster
			// moved on, even when that active is silent now (frozen in
			// turn, or gone): the standbys in sync with it hold newer
			// state than this node, and one of them takes the role.
			if p.alive(now, c.cfg.FailureTimeout) && p.round >= c.pauseRound && p.role != string(Active) && !p.paused && p.active != "" && p.active != c.self {
				// Its followers are what this node knows of the standbys
				// in sync with it: should it be gone, one of them, not
				// this node, takes the role (candidate).
				c.activeISR = c.activeISR[:0]
				for _, q := range c.peers {
					if q.alive(now, c.cfg.FailureTimeout) && q.active == p.active && q.synced {
						c.activeISR = append(c.activeISR, q.addr)
					}
				}
				c.demote(now, p.active, "while this node did not run, "+p.addr+" followed "+p.active)
				return
			}
		}
		for _, p := range c.peers {
			// A node restored from its data directory with a newer
			// state than this one served while this node did not run
			// (it went down since): its state goes first (candidate).
			if p.alive(now, c.cfg.FailureTimeout) && p.restored && (stateAge{p.restored, p.top, p.seq}).newer(c.stateAge()) {
				// What this node knew of the standbys in sync is older
				// still: the newest state goes first (candidate).
				c.activeISR = nil
				c.demote(now, p.addr, "while this node did not run, "+p.addr+" served a newer state, which it restored from its data directory")
				return
			}
		}
		if p := c.mayServe(now); p != nil {
			// A peer that refuses this node's handshake may have taken
			// the role meanwhile: this node cannot tell, and does not
			// serve beside it.
			c.demote(now, p.addr, "this node did not run for a while, and "+p.addr+", which refuses its handshake, may have taken the role")
			return
		}
		// What the peers answered may already be stale (a handoff
		// between two of them a moment ago makes a new active that
		// answered as a standby): answers wait, up to the sync timeout,
		// for the live peers to follow this node again, so that such an
		// active is met, and this node yields, before a change it made
		// is answered.
		c.expectLive(now)
		// The places kept for the last active's waiters kept no time
		// for their clients while this node did not serve.
		c.eng.DelayGhosts(stopped)
		c.advance(now)
		c.replayParked(now)
	}
	c.supervise(now)
	c.retryWaitingHandoff(now)
}

// advance fires the deadlines due at now and routes what they produce:
// done before reading or moving the state, so it is as of now.
func (c *Core) advance(now time.Time) {
	c.evs = c.eng.Advance(now, c.evs[:0])
	c.route(now, c.evs)
}

func (c *Core) setRole(r Role, active, reason string) {
	if c.role == r && c.active == active {
		return
	}
	c.log.Info("role change", "self", c.self, "from", string(c.role), "to", string(r), "active", active, "reason", reason)
	c.role = r
	c.active = active
	if r == Active {
		c.deferSince = time.Time{}
	}
	if r != Active && r != HandingOff {
		c.cancelLater = nil // the active's state replaces this one's
	}
	c.noteActive(c.lastEvent)
	c.act(Action{Kind: ActRoleChanged, Role: r, Active: active}, nil)
}

// Shutdown begins a graceful stop: an active node hands its role to a
// caught-up standby first. Out.Stopped says when the node may close; from
// now on it takes no role.
func (c *Core) Shutdown(now time.Time) {
	c.noteTime(now)
	c.log.Info("shutting down", "self", c.self, "role", string(c.role))
	c.leaving = true
	if w := c.waiting; w != nil {
		done := w.done
		w.done = func(to string, err error) { done(to, err); c.stop() }
		return
	}
	if c.role == Active && len(c.peers) > 0 {
		if err := c.startHandoff(now, "", "shutdown", false, func(string, error) { c.stop() }); err != nil {
			c.log.Warn("shutting down without handoff", "reason", err.Error())
			c.stop()
		}
		return
	}
	if c.role == HandingOff {
		c.handoff.done = append(c.handoff.done, func(string, error) { c.stop() })
		return
	}
	c.stop()
}

func (c *Core) stop() {
	if !c.stopped {
		c.stopped = true
		c.act(Action{Kind: ActStopped}, nil)
	}
}
