package core

// The deterministic simulator: whole clusters of cores over a simulated
// network and clock, driven from a seed. Every source of nondeterminism
// (delays, faults, the workload) comes from one math/rand/v2 generator
// seeded with the run's seed, and events run one at a time in (time,
// sequence) order, so a seed replays exactly. A failing run prints its
// seed and the trace of the events that led to the failure.
//
// The network is a set of simulated TCP connections, each two FIFO
// directions with a per-message delay. A partition stalls a direction:
// its messages wait and flow again when it heals, unless the connection
// closed meanwhile, as TCP's retransmissions would behave. Each side of a
// connection closes on the deadlines the shell uses (a heartbeat link, a
// replication stream: the failure timeout without a line), and a close
// reaches the other side as EOF when the path allows.
//
// Faults: a crash of a process on a live machine (its sockets close, its
// port refuses), a machine that vanishes (silence), restarts, freezes (a
// process that neither reads nor writes for a while, then resumes with a
// clock that jumped), symmetric and one-way partitions, SIGINT (graceful
// shutdown, then a restart), lockctl handoff, and clock skew between
// nodes. The workload is clients acquiring and releasing a few keys, some
// waiting, some letting leases run out.

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// simConfig shapes one run.
type simConfig struct {
	nodes   int
	clients int
	keys    int
	length  time.Duration // faults and workload happen during this
	quiet   time.Duration // then everything heals and the run settles
	faults  int           // how many faults to inject
	calm    bool          // only graceful faults: SIGINT and handoffs
	async   bool          // asynchronous replication
	disk    bool          // every node has a data directory (sim_disk_test.go)
	// holdFrom: from then on the clients only renew the locks they keep
	// (every lock granted is kept to the end of the workload), so that a
	// failover meanwhile sees renewals and no new tokens (0: never).
	holdFrom  time.Duration
	maxSkew   time.Duration
	heartbeat time.Duration
	failure   time.Duration
	handoff   time.Duration
}

func simConfigFor(seed uint64) simConfig {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	cfg := simConfig{
		nodes:     2 + r.IntN(4),
		clients:   2 + r.IntN(6),
		keys:      1 + r.IntN(6),
		length:    4*time.Second + time.Duration(r.IntN(6))*time.Second,
		quiet:     6 * time.Second,
		faults:    r.IntN(7),
		calm:      r.IntN(4) == 0,
		async:     r.IntN(2) == 0,
		maxSkew:   time.Duration(r.IntN(3)) * time.Millisecond,
		heartbeat: 50 * time.Millisecond,
		failure:   500 * time.Millisecond,
		handoff:   1500 * time.Millisecond,
	}
	return cfg
}

// simEvent is one thing that happens at a simulated instant.
type simEvent struct {
	at  time.Duration
	seq uint64
	do  func()
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// sim is one simulated world.
type sim struct {
	seed  uint64
	cfg   simConfig
	rng   *rand.Rand
	base  time.Time
	now   time.Duration
	queue simQueue
	seq   uint64

	nodes   []*simNode
	clients []*simClient
	watcher *simWatcher
	conns   []*simConn
	blocked map[[2]int]bool // blocked[{a, b}]: the path a->b stalls (client side is -1-i)

	trace     []string // the last events, for a failure report
	failures  []string
	grants    map[uint64]string // every token granted: by whom, for a failure report
	grantIDs  map[uint64]string // the id of the acquire each token answered
	grantAt   map[uint64]time.Duration
	semLimit  int            // the limit of key k0 (a semaphore when above 1)
	lastToken map[int]uint64 // per node incarnation: its last token
	activity  []activeSpan   // when each node served as active
	faulty    bool           // a fault that may lose locks happened: see exempt
	rules     []string       // the rules that set faulty, in order
	quietAt   time.Duration  // everything healed from here on

	// wipes counts the moments every node that held the lock state lost
	// its memory (see wipeCheck); grantWipes is how many came before each
	// grant was written.
	wipes      int
	grantWipes map[uint64]int

	// FIFO across failover (sim_fifo_test.go): what each standby was
	// told of the waiters, what each new active owes, and the id of the
	// last acquire that came on each client connection.
	fifoShadows    map[int]fifoShadow
	fifoEpochs     map[int]*fifoEpoch
	fifoConnAcq    map[*simConn]string
	fifoPromotions int      // promotions that kept two places or more
	fifoMembers    int      // waiters that came back for their places in time
	fifoKept       int      // grants after a waiter queued ahead that came back too
	fifoGrants     []string // the ids scripted waiters were granted, in order
	// writer fairness (sim_rw_test.go): each active's acquires not yet
	// answered, and their order.
	rwNodes map[int]*rwNode
	rwSeq   uint64

	planted         string // a bug planted on purpose (see TestSimulatorCatchesPlantedBugs)
	diskLies        bool   // Logged at once, kept only by a clean exit (TestSimCatchesALyingDisk)
	strict          string // a rule exempt does not apply, to show it is needed
	commandHandoffs int
	handoffAnswers  []string // "asked-at answer" of every lockctl handoff
	// acked: when an active crashed, what each other node had applied, to
	// check it is all still held when that node becomes active.
	acked   map[int]ackedState
	ackedAt time.Duration // when the active crashed
	// holders: with data directories, the nodes that hold every answer
	// of an active that went, until the next promotion (sim_disk_test.go).
	holders []holderGroup
	// cold: a cold start being watched; denied: until when each node
	// refuses its peers' handshakes (sim_moves_test.go).
	cold   *coldWindow
	denied map[int]time.Duration
	allGo  bool // every node is being stopped at this instant
	// failover: a crash of the serving active, every other node up,
	// synced and following it, is being timed (see checkFailover).
	failover *failoverTimer
	events   int // faults and restarts played so far
	// lastISR: the standbys the last active to crash waited for.
	lastISR []string
	// cutTill: when the last partition healed (a dial begun during one
	// may fail a failure timeout later).
	cutTill time.Duration
}

// ackedState is a standby's locks at the moment its active crashed.
type ackedState struct {
	seq   uint64
	locks map[uint64]ackedLock // by token: a key has many readers
}

type ackedLock struct {
	key   string
	until time.Duration
}

// activeSpan is a stretch of time a node served as the active.
type activeSpan struct {
	node       int
	from, till time.Duration // till 0: still active
}

type nodeState uint8

const (
	nodeUp nodeState = iota
	nodeCrashed
	nodeFrozen
)

// simNode is one lockd process, its shell simulated.
type simNode struct {
	s     *sim
	idx   int
	addr  string
	core  *Core
	ready Ready // the core's output being carried out (drain)
	state nodeState
	gone  bool // crashed as a vanished machine: silence, not refusals
	skew  time.Duration
	gen   int // incarnation: bumped by every restart
	// bootAt: when the incarnation started
	bootAt time.Duration

	wakeAt   time.Duration // the pending Tick, -1 when none
	frozenQ  []func()      // what arrived while frozen, in order
	conns    map[ConnID]*simConn
	nextConn ConnID
	links    map[string]*simConn // heartbeat links this node dialled
	// pendingBeat: the latest heartbeat for a peer whose link is being
	// dialled, written when it is up.
	pendingBeat map[string][]byte
	linkBusy    map[string]bool // a dial is under way
	follow      string          // the stream the core follows
	stream      *simConn        // the open follower stream
	ended       error           // the core ended it (Out.StreamEnd)
	dialing     bool
	asks        map[*simConn]uint64
	stopping    bool // Stopped was called: the process exits
	wasActv     bool
	// wasPaused: its core had paused (it did not run for a while) when
	// last looked at.
	wasPaused bool
	// seqBefore: the changes its core had applied when last looked at,
	// before the event being checked (checkFrozenHolders).
	seqBefore uint64
	// crashOnGrant: the node dies right after it next answers a grant;
	// what it wrote to its standbys meanwhile never arrives.
	crashOnGrant bool
	disk         *simDisk // its data directory, kept across restarts
}

type connKind uint8

const (
	kindLink connKind = iota
	kindStream
	kindAsk
	kindClient
)

// simConn is one TCP connection: the dialler's side and the server's.
type simConn struct {
	s      *sim
	kind   connKind
	from   int // the dialling node, or -1-client
	to     int // the server node
	srvID  ConnID
	gen    int // the server's incarnation when dialled
	fgen   int // the dialler's incarnation (nodes only)
	open   bool
	closed [2]bool // each side has closed: 0 dialler, 1 server
	// deliveries stay in order per direction
	last    [2]time.Duration
	lost    [2]bool // what is on the wire in this direction never arrives
	backlog [2][]func()
	// the dialler's read deadline: a line must arrive within this much
	deadline  time.Duration
	lastHeard time.Duration
	onLine    func(line []byte) // the dialler reading a line
	onClose   func(why string)  // the dialler learning the connection is gone
}

// simFault is one fault of a scripted run.
type simFault struct {
	at   time.Duration
	kind string // crash, vanish, freeze, partition, oneway, sigint, handoff
	node int
	dur  time.Duration
}

// simOptions change a run: a planted bug, a fixed fault script instead of
// the seed's, a change to its configuration.
type simOptions struct {
	planted string
	script  []simFault
	cfg     func(*simConfig)
	disk    bool // every node has a data directory
}

func newSim(seed uint64, o simOptions) *sim {
	cfg := simConfigFor(seed)
	cfg.disk = cfg.disk || o.disk
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	planted := o.planted
	s := &sim{
		seed:       seed,
		cfg:        cfg,
		rng:        rand.New(rand.NewPCG(seed, 0xc0ffee)),
		base:       time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		blocked:    make(map[[2]int]bool),
		grants:     make(map[uint64]string),
		grantIDs:   make(map[uint64]string),
		grantAt:    make(map[uint64]time.Duration),
		grantWipes: make(map[uint64]int),
		lastToken:  make(map[int]uint64),
		planted:    planted,
		denied:     make(map[int]time.Duration),
	}
	s.semLimit = 1 + s.rng.IntN(3)
	addrs := make([]string, cfg.nodes)
	for i := range addrs {
		addrs[i] = "10.0.0." + strconv.Itoa(i+1) + ":7070"
	}
	for i := range cfg.nodes {
		n := &simNode{s: s, idx: i, addr: addrs[i], wakeAt: -1}
		if cfg.maxSkew > 0 {
			n.skew = time.Duration(s.rng.Int64N(int64(2*cfg.maxSkew))) - cfg.maxSkew
		}
		s.nodes = append(s.nodes, n)
	}
	for _, n := range s.nodes {
		n.boot(addrs)
	}
	s.coldStart(0)
	for i := range cfg.clients {
		c := &simClient{s: s, idx: i, held: make(map[string]heldLock)}
		s.clients = append(s.clients, c)
		s.at(time.Duration(s.rng.IntN(200))*time.Millisecond, c.act)
	}
	s.watcher = &simWatcher{s: s, idx: cfg.clients, target: -1}
	s.at(time.Duration(s.rng.IntN(200))*time.Millisecond, s.watcher.connect)
	if o.script != nil {
		for _, f := range o.script {
			s.at(f.at, func() { s.fault(f.kind, f.node, f.dur) })
		}
	} else {
		s.planFaults()
	}
	return s
}

// limitOf is the limit of key in this run: k0 may be a semaphore.
func (s *sim) limitOf(key string) int {
	if key == "k0" {
		return s.semLimit
	}
	return 1
}

func (s *sim) at(d time.Duration, do func()) {
	s.seq++
	heap.Push(&s.queue, &simEvent{at: s.now + d, seq: s.seq, do: do})
}

func (s *sim) logf(format string, args ...any) {
	line := fmt.Sprintf("%9.4fs ", s.now.Seconds()) + fmt.Sprintf(format, args...)
	s.trace = append(s.trace, line)
	if len(s.trace) > 400 && !simFullTrace {
		s.trace = s.trace[len(s.trace)-300:]
	}
}

func (s *sim) fail(format string, args ...any) {
	msg := fmt.Sprintf("%9.4fs ", s.now.Seconds()) + fmt.Sprintf(format, args...)
	s.logf("FAIL: %s", fmt.Sprintf(format, args...))
	s.failures = append(s.failures, msg)
}

// delay is one message's trip: most are fast, a few slow.
func (s *sim) delay() time.Duration {
	d := 100*time.Microsecond + time.Duration(s.rng.IntN(900))*time.Microsecond
	if s.rng.IntN(50) == 0 {
		d += time.Duration(s.rng.IntN(30)) * time.Millisecond
	}
	return d
}

// run plays the world until the end of its quiet period, then checks the
// invariants that need quiet. It reports the failures.
func (s *sim) run() []string {
	s.at(s.cfg.length, s.heal)
	s.runUntil(s.cfg.length + s.cfg.quiet)
	if len(s.failures) == 0 {
		s.checkQuiet()
	}
	return s.failures
}

// runUntil plays the events due by end, stopping at the first failure.
func (s *sim) runUntil(end time.Duration) {
	for len(s.queue) > 0 && len(s.failures) == 0 && s.queue[0].at <= end {
		e := heap.Pop(&s.queue).(*simEvent)
		s.now = e.at
		e.do()
		s.checkAlways()
		s.checkFailover()
	}
}

// --- nodes ---

func (n *simNode) clock() time.Time { return n.s.base.Add(n.s.now + n.skew) }

func (n *simNode) boot(addrs []string) {
	s := n.s
	n.gen++
	n.bootAt = s.now
	n.state = nodeUp
	n.gone = false
	n.conns = make(map[ConnID]*simConn)
	n.links = make(map[string]*simConn)
	n.pendingBeat = make(map[string][]byte)
	n.linkBusy = make(map[string]bool)
	n.asks = make(map[*simConn]uint64)
	n.follow, n.stream, n.stopping, n.frozenQ, n.wasActv = "", nil, false, nil, false
	n.wakeAt, n.dialing = -1, false
	s.fifoForget(n)
	s.fifoDemoted(n)
	s.rwForget(n)
	c, err := New(Config{
		Self:           n.addr,
		Peers:          addrs,
		Heartbeat:      s.cfg.heartbeat,
		FailureTimeout: s.cfg.failure,
		HandoffTimeout: s.cfg.handoff,
		Async:          s.cfg.async,
		Durable:        s.cfg.disk,
		Engine:         engine.Config{MaxEpochAhead: time.Minute},
		Logger:         slog.New(&traceHandler{s: s, node: n.idx}),
	}, n.clock())
	if err != nil {
		panic(err)
	}
	if n.core != nil {
		unplant(n.core)
	}
	n.core = c
	n.recoverDisk()
	n.seqBefore = c.Seq()
	plant(c, s.planted)
	s.logf("node %d boots (incarnation %d)", n.idx, n.gen)
	n.drain()
	n.wake()
}

// wake schedules the core's next Tick.
func (n *simNode) wake() {
	if n.state != nodeUp {
		return
	}
	w := n.core.NextWake().Sub(n.clock())
	at := n.s.now + max(w, 0)
	if n.wakeAt >= 0 && n.wakeAt <= at {
		return
	}
	n.wakeAt = at
	gen := n.gen
	n.s.at(max(w, 0), func() {
		if n.gen != gen || n.wakeAt != at {
			return
		}
		n.wakeAt = -1
		n.do(func() { n.core.Tick(n.clock()) })
	})
}

// do runs f as the node's shell would, under its mutex: now, or when it
// thaws, and never once it crashed.
func (n *simNode) do(f func()) {
	switch n.state {
	case nodeCrashed:
		return
	case nodeFrozen:
		n.frozenQ = append(n.frozenQ, f)
		return
	}
	f()
	n.after()
}

// after carries out what the core's last call asked, and checks it.
func (n *simNode) after() {
	s := n.s
	if n.state != nodeUp {
		return
	}
	n.drain()
	if n.state != nodeUp {
		return
	}
	s.checkDecided(n)
	active := n.core.Role() == Active
	s.checkCold(n, active && !n.wasActv, !active && n.wasActv)
	paused := !n.core.pausedSince.IsZero()
	if active && n.wasActv && n.wasPaused && !paused {
		// It serves again after not running: as good as taking the
		// role anew, from the state it had.
		if other := s.otherActive(n); other >= 0 && !n.heardAll() {
			s.exempt(ruleUnheard, fmt.Sprintf("node %d serves again while node %d, active since, is silent to it", n.idx, other))
		}
		s.checkHolders(n)
	}
	n.wasPaused = paused
	if active != n.wasActv {
		if active {
			s.checkFrozenHolders(n)
			s.activity = append(s.activity, activeSpan{node: n.idx, from: s.now})
			s.logf("node %d active", n.idx)
			s.checkAcked(n)
			s.checkEmptyPromotion(n)
			s.checkHolders(n)
			s.fifoPromoted(n)
		} else {
			for i := range s.activity {
				if s.activity[i].node == n.idx && s.activity[i].till == 0 {
					s.activity[i].till = s.now
				}
			}
			s.logf("node %d no longer active (%s)", n.idx, n.core.Role())
			s.fifoDemoted(n)
			s.rwForget(n)
		}
		n.wasActv = active
	}
	n.seqBefore = n.core.Seq()
	if n.stopping {
		n.exit("stopped after SIGINT")
		return
	}
	n.syncFollow()
	n.wake()
}

// exit ends the process: gracefully after SIGINT (sockets close), or as
// a crash.
func (n *simNode) exit(why string) {
	s := n.s
	s.logf("node %d exits: %s", n.idx, why)
	n.state = nodeCrashed
	n.gen++
	n.diskExit(why)
	s.wipeCheck(n)
	// What it had applied in memory went with the process: a restarted
	// node holds what its data directory kept (a torn tail loses records
	// it applied and never acknowledged), and may reach the same position
	// again by other changes, so checkAcked has nothing to compare.
	delete(s.acked, n.idx)
	if n.wasActv {
		for i := range s.activity {
			if s.activity[i].node == n.idx && s.activity[i].till == 0 {
				s.activity[i].till = s.now
			}
		}
		n.wasActv = false
	}
	if s.quietAt > 0 && s.now < s.cfg.length+s.cfg.quiet-2*time.Second {
		// Nothing stays down in the quiet period: restart, as an
		// operator or systemd would.
		s.at(100*time.Millisecond, func() { s.restart(n) })
	}
	for _, c := range s.conns {
		if c.open && (c.to == n.idx || c.from == n.idx) {
			side := 1
			if c.from == n.idx {
				side = 0
			}
			if n.gone {
				c.vanish(side)
			} else {
				c.close(side, "EOF")
			}
		}
	}
}

// --- the simulated shell's actions (Ready) ---

// drain carries out what the core asked, in order, as the shell does
// after each event, until nothing is left.
func (n *simNode) drain() {
	for n.core != nil {
		n.core.TakeReady(&n.ready)
		if len(n.ready.Actions) == 0 {
			return
		}
		for _, a := range n.ready.Actions {
			n.apply(a)
		}
	}
}

// apply carries out one action of the core.
func (n *simNode) apply(a Action) {
	o := (*simOut)(n)
	switch a.Kind {
	case ActSend:
		if !o.Send(a.Send) && a.Send.Outcome == Granted {
			n.core.Undelivered(n.clock(), a.Send)
		}
	case ActScan:
		o.Scan(a.Conn)
	case ActFeed:
		o.Feed(a.Conn)
	case ActClose:
		o.Close(a.Conn)
	case ActBeat:
		o.Beat(a.Peer, a.Line)
	case ActFollow:
		o.Follow(a.Peer)
	case ActStreamReply:
		o.StreamReply(a.Peer, a.Line)
	case ActStreamEnd:
		o.StreamEnd(a.Peer, a.Err)
	case ActAsk:
		o.Ask(a.ID, a.Peer, a.Line, a.Timeout)
	case ActStopped:
		o.Stopped()
	case ActLog:
		o.Log(a.At, a.Line)
	case ActWatchDrain:
		// Nothing paces the simulated connections: the news is written.
		n.core.WatchSlice(n.clock(), a.Conn)
	}
}

type simOut simNode

func (o *simOut) Send(s Send) bool {
	id, b := s.Conn, s.Line
	n := (*simNode)(o)
	c := n.conns[id]
	if c == nil || !c.open || c.closed[1] {
		return false
	}
	if c.kind == kindClient {
		n.s.checkSend(n, s)
		if s.Op == proto.OpAcquire && s.Outcome != NoOutcome {
			n.s.fifoAnswered(n, c, s.Outcome)
			n.s.rwAnswered(n, c, s.Outcome)
		}
	}
	lines := splitLines(b)
	for _, l := range lines {
		n.s.checkOutgoing(n, c, l)
		c.toDialler(l)
		if n.crashOnGrant && c.kind == kindClient && len(l) > 0 && l[0] == 'A' && (n.s.semLimit <= 1 || !bytes.HasPrefix(l, []byte("A k0 "))) {
			// (a plain lock: a lost grant of a semaphore shows only when
			// more holders than its limit follow)
			n.crashOnGrant = false
			n.s.logf("node %d dies right after answering %q; its standbys never get what it wrote since", n.idx, strings.TrimSpace(string(l)))
			for _, sc := range n.s.conns {
				if sc.open && sc.to == n.idx && sc.kind == kindStream {
					sc.lost[1] = true
				}
			}
			n.s.at(0, func() { n.s.fault("crash", n.idx, time.Second) })
		}
	}
	return true
}

// Scan drives a key listing a slice per event, as the shell does
// between other requests.
func (o *simOut) Scan(id ConnID) {
	n := (*simNode)(o)
	gen := n.gen
	n.s.at(time.Duration(n.s.rng.IntN(200))*time.Microsecond, func() {
		if n.gen != gen {
			return
		}
		n.do(func() { n.core.KeysSlice(n.clock(), id) })
	})
}

// Feed sends a new stream's snapshot a slice per event, as the shell
// does when the standby reads.
func (o *simOut) Feed(id ConnID) {
	n := (*simNode)(o)
	gen := n.gen
	n.s.at(time.Duration(n.s.rng.IntN(200))*time.Microsecond, func() {
		if c := n.conns[id]; n.gen != gen || c == nil || !c.open {
			return
		}
		n.do(func() { n.core.SnapshotSlice(n.clock(), id) })
	})
}

func (o *simOut) Close(id ConnID) {
	n := (*simNode)(o)
	if c := n.conns[id]; c != nil && c.open {
		c.close(1, "closed by "+n.addr)
	}
}

func (o *simOut) Beat(peer string, b []byte) {
	n := (*simNode)(o)
	if c := n.links[peer]; c != nil && c.open && !c.closed[0] {
		c.toServer(slices.Clone(b))
		return
	}
	// Written once the link is up, as the shell's link writes the
	// latest heartbeat it was handed while it dialled.
	n.pendingBeat[peer] = slices.Clone(b)
	n.dialLink(peer)
}

func (o *simOut) Follow(target string) {
	n := (*simNode)(o)
	n.follow = target
}

func (o *simOut) StreamReply(target string, b []byte) {
	n := (*simNode)(o)
	if c := n.stream; c != nil && c.open && n.s.nodes[c.to].addr == target {
		c.toServer(slices.Clone(b))
	}
}

func (o *simOut) StreamEnd(target string, err error) {
	n := (*simNode)(o)
	if c := n.stream; c != nil && n.s.nodes[c.to].addr == target && n.ended == nil {
		n.ended = err
	}
}

func (o *simOut) RoleChanged(Role, string) {}

func (o *simOut) Ask(id uint64, peer string, b []byte, timeout time.Duration) {
	n := (*simNode)(o)
	s := n.s
	p := s.byAddr(peer)
	b = slices.Clone(b)
	gen := n.gen
	answered := false
	answer := func(a proto.Answer, err error) {
		if answered || n.gen != gen {
			return
		}
		answered = true
		n.do(func() { n.core.Answered(n.clock(), id, a, err) })
	}
	s.at(timeout, func() { answer(proto.Answer{}, fmt.Errorf("no answer from %s within %s", peer, timeout)) })
	s.dial(n.idx, p, kindAsk, func(c *simConn, err error) {
		if err != nil {
			answer(proto.Answer{}, err)
			return
		}
		c.onLine = func(line []byte) {
			a, err := proto.ParseAnswer(line)
			answer(a, err)
			c.close(0, "done")
		}
		c.onClose = func(why string) { answer(proto.Answer{}, fmt.Errorf("%s", why)) }
		c.toServer(b)
	})
}

func (o *simOut) Stopped() {
	n := (*simNode)(o)
	n.stopping = true
	if n.core.Role() != Standby || n.core.Active() == "" {
		// It leaves without handing off: its locks may go with it, or
		// with a data directory stay on its disk.
		what := fmt.Sprintf("node %d leaves without a handoff", n.idx)
		if n.disk != nil {
			n.s.logf("%s", what)
			n.s.diskGoes(n, what)
		} else {
			n.s.exempt(ruleLeave, what)
		}
	}
}

// --- connections ---

func (s *sim) byAddr(addr string) int {
	for i, n := range s.nodes {
		if n.addr == addr {
			return i
		}
	}
	panic("no node " + addr)
}

// path reports whether a message can go from a to b now (client ends
// are negative and never partitioned).
func (s *sim) path(a, b int) bool { return !s.blocked[[2]int{a, b}] }

// dial opens a connection from `from` (a node, or -1-client) to node
// `to`, calling done with it, or with why it failed: ErrRefused when the
// process is gone on a live machine, a timeout after the failure timeout
// when the machine is silent or the path is cut.
func (s *sim) dial(from, to int, kind connKind, done func(*simConn, error)) {
	srv := s.nodes[to]
	fgen := 0
	if from >= 0 {
		fgen = s.nodes[from].gen
	}
	stillDialler := func() bool { return from < 0 || s.nodes[from].gen == fgen && s.nodes[from].state != nodeCrashed }
	if s.denies(from, to, kind) && srv.state != nodeCrashed {
		// A handshake refused: the peer answered, so it runs.
		s.at(s.delay()+s.delay(), func() {
			if stillDialler() {
				done(nil, fmt.Errorf("dial %s: %w", srv.addr, errDenied))
			}
		})
		return
	}
	if !s.path(from, to) || !s.path(to, from) || (srv.state == nodeCrashed && srv.gone) {
		s.at(s.cfg.failure, func() {
			if stillDialler() {
				done(nil, fmt.Errorf("dial %s: i/o timeout", srv.addr))
			}
		})
		return
	}
	rtt := s.delay() + s.delay()
	s.at(rtt, func() {
		if !stillDialler() {
			return
		}
		if srv.state == nodeCrashed {
			done(nil, ErrRefused)
			return
		}
		c := &simConn{s: s, kind: kind, from: from, to: to, gen: srv.gen, fgen: fgen, open: true, lastHeard: s.now}
		s.conns = append(s.conns, c)
		srv.nextConn++
		c.srvID = srv.nextConn
		srv.conns[c.srvID] = c
		remote := "client"
		if from >= 0 {
			remote = s.nodes[from].addr
		}
		// A frozen server accepts (the kernel does) and serves later.
		srv.do(func() { srv.core.ConnOpened(srv.clock(), c.srvID, remote) })
		done(c, nil)
	})
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := strings.IndexByte(string(b), '\n')
		if i < 0 {
			out = append(out, slices.Clone(b))
			break
		}
		out = append(out, slices.Clone(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// send schedules f on the receiving side of direction dir (0: dialler to
// server, 1: server to dialler), in order, after a delay; a cut path
// holds it until the path heals.
func (c *simConn) send(dir int, f func()) {
	s := c.s
	a, b := c.from, c.to
	if dir == 1 {
		a, b = c.to, c.from
	}
	if !s.path(a, b) {
		c.backlog[dir] = append(c.backlog[dir], f)
		return
	}
	at := max(s.now+s.delay(), c.last[dir]+time.Nanosecond)
	c.last[dir] = at
	s.at(at-s.now, f)
}

// flush sends what waited for a healed path.
func (c *simConn) flush() {
	for dir := range 2 {
		b := c.backlog[dir]
		c.backlog[dir] = nil
		for _, f := range b {
			c.send(dir, f)
		}
	}
}

// toServer writes line from the dialler to the server.
func (c *simConn) toServer(line []byte) {
	if !c.open || c.closed[0] {
		return
	}
	s := c.s
	srv := s.nodes[c.to]
	gen := c.gen
	c.send(0, func() {
		if !c.open || c.closed[1] || srv.gen != gen {
			return
		}
		srv.do(func() {
			if !c.open || c.closed[1] {
				return
			}
			req, err := proto.Parse(line)
			if err != nil {
				pe, _ := err.(*proto.ParseError)
				srv.core.RequestError(srv.clock(), c.srvID, pe)
				return
			}
			if c.kind == kindClient && req.Op == proto.OpAcquire {
				s.fifoArrived(srv, c, req)
				s.rwArrived(srv, c, req)
			}
			srv.core.Request(srv.clock(), c.srvID, req)
		})
	})
}

// toDialler writes line from the server to the dialler.
func (c *simConn) toDialler(line []byte) {
	if !c.open || c.closed[1] {
		return
	}
	c.send(1, func() {
		if !c.open || c.closed[0] || c.lost[1] {
			return
		}
		c.lastHeard = c.s.now
		if c.onLine != nil {
			c.onLine(line)
		}
	})
}

// close closes side (0 dialler, 1 server); the other side learns of it,
// after what this side sent before, when the path allows.
func (c *simConn) close(side int, why string) {
	if !c.open || c.closed[side] {
		return
	}
	c.closed[side] = true
	c.send(side, func() { c.peerClosed(1-side, why) })
}

// vanish: side's machine is gone; nothing more comes from it, ever.
func (c *simConn) vanish(side int) {
	c.closed[side] = true
	c.backlog[side] = nil
}

// peerClosed tells side that the other side closed.
func (c *simConn) peerClosed(side int, why string) {
	if c.closed[side] {
		c.open = false
		return
	}
	c.closed[side] = true
	c.open = false
	s := c.s
	if side == 1 {
		srv := s.nodes[c.to]
		if srv.gen == c.gen {
			srv.do(func() {
				delete(srv.conns, c.srvID)
				s.fifoClosed(srv, c)
				s.rwClosed(srv, c)
				srv.core.ConnClosed(srv.clock(), c.srvID)
			})
		}
		return
	}
	if c.onClose != nil {
		c.onClose(why)
	}
}

// --- the heartbeat links and the follower stream of a node ---

func (n *simNode) dialLink(peer string) {
	if n.linkBusy[peer] {
		return
	}
	n.linkBusy[peer] = true
	s := n.s
	gen := n.gen
	p := s.byAddr(peer)
	s.dial(n.idx, p, kindLink, func(c *simConn, err error) {
		if n.gen != gen {
			return
		}
		n.linkBusy[peer] = false
		if why, denied := denialOf(err); denied {
			n.do(func() { n.core.PeerDenied(n.clock(), peer, why) })
			return
		}
		if err != nil {
			n.do(func() { n.core.PeerDown(n.clock(), peer, err.Error()) })
			return
		}
		n.links[peer] = c
		if b := n.pendingBeat[peer]; b != nil {
			delete(n.pendingBeat, peer)
			c.toServer(b)
		}
		c.onLine = func(line []byte) {
			n.do(func() {
				a, err := proto.ParseAnswer(line)
				if err != nil || a.Kind != proto.OpBeat {
					return
				}
				bt, err := proto.ParseBeatAnswer(a)
				if err != nil {
					s.fail("node %d: malformed heartbeat answer %q: %v", n.idx, line, err)
					return
				}
				n.core.HeardBeat(n.clock(), peer, bt)
			})
		}
		c.onClose = func(why string) {
			if n.links[peer] == c {
				delete(n.links, peer)
			}
			n.do(func() { n.core.PeerDown(n.clock(), peer, why) })
		}
		n.watchDeadline(c, func() {
			c.close(0, "i/o timeout")
			if n.links[peer] == c {
				delete(n.links, peer)
			}
			n.do(func() { n.core.PeerDown(n.clock(), peer, "i/o timeout") })
		})
	})
}

// watchDeadline closes the dialler's side of c when no line arrived for
// the failure timeout, as the shell's read deadline does.
func (n *simNode) watchDeadline(c *simConn, expire func()) {
	s := n.s
	gen := n.gen
	var check func()
	check = func() {
		if n.gen != gen || !c.open || c.closed[0] {
			return
		}
		if n.state == nodeFrozen {
			// A frozen process reads nothing: its deadlines fire when it
			// thaws, by which time the line may have arrived.
			s.at(s.cfg.heartbeat, check)
			return
		}
		if left := c.lastHeard + s.cfg.failure - s.now; left > 0 {
			s.at(left, check)
			return
		}
		expire()
	}
	s.at(s.cfg.failure, check)
}

// syncFollow opens, keeps or closes the follower stream the core asked for.
func (n *simNode) syncFollow() {
	s := n.s
	if c := n.stream; c != nil && (n.follow == "" || s.nodes[c.to].addr != n.follow) {
		n.stream = nil
		c.close(0, "no longer following")
		target := s.nodes[c.to].addr
		n.core.StreamEnded(n.clock(), target, nil)
		n.drain()
	}
	if n.follow == "" || n.stream != nil || n.dialing {
		return
	}
	n.dialing = true
	target := n.follow
	gen := n.gen
	s.dial(n.idx, s.byAddr(target), kindStream, func(c *simConn, err error) {
		if n.gen != gen {
			return
		}
		n.dialing = false
		if err != nil || n.follow != target {
			if c != nil {
				c.close(0, "no longer following")
			}
			n.do(func() {
				n.core.StreamEnded(n.clock(), target, err)
			})
			n.retryFollow()
			return
		}
		n.do(func() {
			n.stream, n.ended = c, nil
			n.core.StreamOpened(n.clock(), target)
			n.drain()
			if n.ended != nil {
				n.stream = nil
				c.close(0, "no longer following")
				return
			}
			s.fifoForget(n) // the snapshot lists the waiters again
			// The snapshot replaces the state n applied: what it held
			// when its active crashed is no longer what checkAcked
			// compares, even at the same position (another lineage's).
			delete(s.acked, n.idx)
			if !c.open || c.closed[0] {
				// It closed while this node was frozen, before anyone
				// listened: the shell's read gets EOF at once.
				n.endStream(c, target, fmt.Errorf("EOF"))
				return
			}
			c.onLine = func(line []byte) {
				if n.stream != c {
					return
				}
				n.do(func() {
					if n.stream != c {
						return
					}
					a, err := proto.ParseAnswer(line)
					if err == nil {
						n.core.StreamRecord(n.clock(), target, a)
						n.drain()
						err = n.ended
					}
					if err != nil {
						n.endStream(c, target, err)
						return
					}
					s.fifoRecord(n, a)
					n.core.StreamAck(n.clock(), target)
				})
			}
			c.onClose = func(why string) {
				if n.stream != c {
					return
				}
				n.do(func() {
					if n.stream == c {
						n.endStream(c, target, fmt.Errorf("%s", why))
					}
				})
			}
			n.watchDeadline(c, func() {
				if n.stream == c {
					n.do(func() {
						if n.stream == c {
							n.endStream(c, target, fmt.Errorf("i/o timeout"))
						}
					})
				}
			})
		})
	})
}

func (n *simNode) endStream(c *simConn, target string, err error) {
	n.stream = nil
	c.close(0, "stream ended")
	n.core.StreamEnded(n.clock(), target, err)
	n.retryFollow()
}

// retryFollow re-opens the stream a heartbeat later, as the shell does.
func (n *simNode) retryFollow() {
	gen := n.gen
	n.s.at(n.s.cfg.heartbeat, func() {
		if n.gen == gen && n.state == nodeUp {
			n.syncFollow()
		}
	})
}

// recordAcked notes what every up node has applied when the active
// crashes.
func (s *sim) recordAcked() {
	s.acked = make(map[int]ackedState)
	s.ackedAt = s.now
	for _, m := range s.nodes {
		if m.state != nodeUp || m.core.Role() != Standby || !m.core.Synced() {
			continue
		}
		st := ackedState{seq: m.core.Seq(), locks: make(map[uint64]ackedLock)}
		for _, h := range m.core.Engine().Snapshot(m.clock()).Holders {
			st.locks[h.Token] = ackedLock{h.Key, s.now + h.LeaseLeft}
		}
		s.acked[m.idx] = st
	}
}

// checkAcked: a standby that becomes active after its active crashed,
// having applied nothing since, holds every lock it had applied whose
// lease has not run out.
func (s *sim) checkAcked(n *simNode) {
	st, ok := s.acked[n.idx]
	if !ok {
		return
	}
	delete(s.acked, n.idx)
	if n.core.Seq() != st.seq || s.splitSince(s.ackedAt) {
		// It applied more since; or two nodes served at once since the
		// crash, and n may have synced from the other lineage, whose
		// position can match its own by chance (a split brain's locks
		// are not all kept: docs/cluster.md's consistency section says so).
		return
	}
	held := make(map[uint64]string)
	for _, h := range n.core.Engine().Snapshot(n.clock()).Holders {
		held[h.Token] = h.Key
	}
	for tok, l := range st.locks {
		if l.until > s.now+time.Millisecond && held[tok] != l.key {
			s.fail("node %d became active without the lock %s=%d it had applied before the active crashed", n.idx, l.key, tok)
		}
	}
}

// splitSince reports whether two nodes served as active at the same
// moment after t.
func (s *sim) splitSince(t time.Duration) bool {
	end := func(sp activeSpan) time.Duration {
		if sp.till == 0 {
			return s.now + 1
		}
		return sp.till
	}
	for i, a := range s.activity {
		for _, b := range s.activity[i+1:] {
			if a.node != b.node && max(a.from, b.from, t) < min(end(a), end(b)) {
				return true
			}
		}
	}
	return false
}

// inSyncSomewhere reports whether an active waits for addr's
// acknowledgements.
// When no active is up, the one that went last counts, with the
// standbys it waited for when it went: they hold its last answers until
// another takes over.
func (s *sim) inSyncSomewhere(addr string) bool {
	up := false
	for _, m := range s.nodes {
		if m.state == nodeUp && m.core.Role() == Active && m.core.pausedSince.IsZero() {
			up = true
			if slices.Contains(m.core.inSync(), addr) {
				return true
			}
		}
	}
	return !up && slices.Contains(s.lastISR, addr)
}

// --- faults ---

func (s *sim) planFaults() {
	kinds := []string{"sigint", "handoff", "clientdrop", "clientdrop"}
	if !s.cfg.calm {
		// The races are where handoffs break: a fault a few milliseconds
		// after a handoff began, while its records are on the wire.
		kinds = append(kinds, "crash", "vanish", "freeze", "partition", "oneway", "sigint", "handoff", "handoff-race", "sigint-race", "handoff-race")
		if s.cfg.disk {
			// Restarts whose outcome the data directories decide.
			kinds = append(kinds, "crash-all", "restart")
		}
		kinds = append(kinds, moveKinds...)
		kinds = append(kinds, "takeback", "freeze-active", "double")
	}
	for range s.cfg.faults {
		at := time.Second + time.Duration(s.rng.Int64N(int64(s.cfg.length-time.Second)))
		kind := kinds[s.rng.IntN(len(kinds))]
		node := s.rng.IntN(len(s.nodes))
		if s.rng.IntN(2) == 0 {
			node = -1 // the node active when the fault strikes: the interesting one
		}
		dur := 300*time.Millisecond + time.Duration(s.rng.Int64N(int64(3*time.Second)))
		s.at(at, func() { s.fault(kind, node, dur) })
	}
}

func (s *sim) fault(kind string, i int, dur time.Duration) {
	s.endCold()
	s.events++
	if i < 0 {
		i = 0
		for _, m := range s.nodes {
			if m.state == nodeUp && m.core.Role() == Active {
				i = m.idx
			}
		}
	}
	n := s.nodes[i]
	switch kind {
	case "crash", "vanish":
		if n.state == nodeCrashed {
			return
		}
		if kind == "crash" {
			s.timeFailover(n)
		}
		// With synchronous replication a crash loses nothing a client
		// was told, while a standby acknowledges: unless the active is
		// degraded, or a standby in sync goes (then a later crash of the
		// active may promote one that missed answers). A node with a
		// data directory keeps on it what it acknowledged: see diskGoes.
		switch {
		case n.disk != nil:
			s.diskGoes(n, fmt.Sprintf("node %d: %s", i, kind))
		case s.allGo:
			// Every node goes at this instant: their state is wiped
			// (wipeCheck), and mutual exclusion starts over.
		case s.cfg.async:
			s.exempt(ruleAsync, fmt.Sprintf("node %d crashes", i))
		case n.state == nodeUp && n.core.Status(n.clock()).Degraded:
			s.exempt(ruleDegraded, fmt.Sprintf("node %d crashes degraded", i))
		case n.state == nodeUp && s.inSyncSomewhere(n.addr):
			s.exempt(ruleMemoryStandby, fmt.Sprintf("node %d crashes in sync", i))
		}
		if n.wasActv {
			s.recordAcked()
			s.lastISR = n.core.inSync()
		}
		n.gone = kind == "vanish"
		n.exit(kind)
		s.at(dur, func() { s.restart(n) })
	case "crash-all":
		// Every node is killed at once (a botched deploy, a power cut of
		// the rack), the active first, and each comes back within a
		// second or so.
		s.logf("every node crashes")
		for _, m := range append([]*simNode{n}, s.nodes...) {
			s.fault("crash", m.idx, 100*time.Millisecond+time.Duration(s.rng.Int64N(int64(1500*time.Millisecond))))
		}
	case "restart":
		// A kill -9 and a restart within the failure timeout, before the
		// peers give up on it: it comes back as its disk holds it.
		s.fault("crash", i, 50*time.Millisecond+time.Duration(s.rng.Int64N(int64(s.cfg.failure))))
	case "sigint":
		if n.state != nodeUp {
			return
		}
		s.logf("node %d: SIGINT", i)
		if n.disk == nil && !s.cfg.async && n.core.Role() == Standby && s.inSyncSomewhere(n.addr) {
			// A standby leaves with its copy: the same loss as a crash.
			s.exempt(ruleMemoryStandby, fmt.Sprintf("node %d stops in sync", i))
		}
		n.do(func() { n.core.Shutdown(n.clock()) })
		gen := n.gen
		s.at(s.cfg.handoff+s.cfg.failure+time.Second, func() {
			if n.gen == gen && n.state == nodeUp {
				// The shell stops waiting for the handoff.
				if what := fmt.Sprintf("node %d stops, its handoff unsettled", i); n.disk != nil {
					s.diskGoes(n, what)
				} else {
					s.exempt(ruleUnsettled, what)
				}
				n.exit("stopped: the handoff did not settle in time")
			}
		})
		s.at(dur+2*time.Second, func() { s.restart(n) })
	case "handoff":
		s.handoffCommand(i)
	case "double", "freeze-active", "takeback", "coldstart", "deny":
		s.move(kind, i, dur)
	case "clientdrop":
		// A network blip: every client connection to node i drops,
		// answers in flight lost; the clients re-send where they can.
		s.logf("client connections to node %d drop", i)
		for _, c := range s.clients {
			if c.conn != nil && c.conn.to == i {
				conn := c.conn
				conn.close(0, "connection reset")
				c.dropped(conn)
			}
		}
	case "handoff-race", "sigint-race":
		if kind == "handoff-race" {
			s.handoffCommand(i)
		} else {
			s.fault("sigint", i, dur)
		}
		next := []string{"crash", "vanish", "freeze", "partition", "oneway"}[s.rng.IntN(5)]
		j := s.rng.IntN(len(s.nodes))
		s.at(time.Duration(s.rng.IntN(4000))*time.Microsecond, func() { s.fault(next, j, dur) })
	case "crash-on-grant":
		if n.state == nodeUp {
			s.logf("node %d will die right after its next grant", i)
			n.crashOnGrant = true
		}
	case "freeze":
		if n.state != nodeUp {
			return
		}
		s.logf("node %d freezes for %s", i, dur)
		// A frozen active is a crashed one to its peers: when no standby
		// holds what it answered (asynchronous replication, or degraded),
		// whoever serves during the freeze starts behind. Under
		// synchronous replication with a standby in sync, a freeze
		// loses nothing, and exempts nothing.
		switch {
		case s.cfg.async && n.core.Role() != Standby:
			s.exempt(ruleAsync, fmt.Sprintf("node %d freezes", i))
		case n.core.Status(n.clock()).Degraded:
			s.exempt(ruleDegraded, fmt.Sprintf("node %d freezes degraded", i))
		}
		n.state = nodeFrozen
		s.at(dur, func() { s.thaw(n) })
	case "partition", "oneway":
		s.exempt(rulePartition, fmt.Sprintf("node %d cut off", i))
		s.logf("node %d cut off (%s) for %s", i, kind, dur)
		for j := range s.nodes {
			if j == i {
				continue
			}
			s.blocked[[2]int{j, i}] = true
			if kind == "partition" {
				s.blocked[[2]int{i, j}] = true
			}
		}
		s.at(dur, func() { s.unblock(i) })
	}
}

func (s *sim) restart(n *simNode) {
	if n.state != nodeCrashed || s.now >= s.cfg.length+s.cfg.quiet-2*time.Second {
		return
	}
	if w := s.cold; w != nil && s.now < w.from {
		// Every node starts at w.from, together.
		s.at(w.from-s.now, func() { s.restart(n) })
		return
	}
	addrs := make([]string, len(s.nodes))
	for i, m := range s.nodes {
		addrs[i] = m.addr
	}
	s.events++
	n.boot(addrs)
}

func (s *sim) thaw(n *simNode) {
	if n.state != nodeFrozen {
		return
	}
	s.logf("node %d thaws", n.idx)
	n.state = nodeUp
	q := n.frozenQ
	n.frozenQ = nil
	for _, f := range q {
		if n.state != nodeUp {
			break
		}
		f()
		n.after()
	}
	n.do(func() { n.core.Tick(n.clock()) })
}

func (s *sim) unblock(i int) {
	s.logf("node %d reconnected", i)
	s.cutTill = s.now
	for k := range s.blocked {
		if k[0] == i || k[1] == i {
			delete(s.blocked, k)
		}
	}
	for _, c := range s.conns {
		if c.open {
			c.flush()
		}
	}
}

// heal ends every fault: the quiet period begins.
func (s *sim) heal() {
	s.logf("heal: quiet from here on")
	s.quietAt = s.now
	for _, n := range s.nodes {
		if n.state == nodeFrozen {
			s.thaw(n)
		}
	}
	if len(s.blocked) > 0 {
		s.cutTill = s.now
	}
	clear(s.blocked)
	for _, c := range s.conns {
		if c.open {
			c.flush()
		}
	}
	for _, n := range s.nodes {
		if n.state == nodeCrashed {
			s.restart(n)
		}
	}
}

// handoffCommand is lockctl handoff: an admin's H to the node it
// believes active.
func (s *sim) handoffCommand(i int) {
	s.logf("lockctl handoff to node %d", i)
	s.commandHandoffs++
	asked := s.now
	s.dial(-1-1000, i, kindClient, func(c *simConn, err error) {
		if err != nil {
			return
		}
		c.onLine = func(line []byte) {
			ans := strings.TrimSpace(string(line))
			s.logf("handoff answer from node %d: %s", i, ans)
			s.handoffAnswers = append(s.handoffAnswers, fmt.Sprintf("%.4fs %s", asked.Seconds(), ans))
			c.close(0, "done")
		}
		c.toServer([]byte("H -\n"))
	})
}

// traceHandler writes a core's log lines into the run's trace, so that a
// failure report tells what each node decided and why.
type traceHandler struct {
	s     *sim
	node  int
	attrs []slog.Attr
}

func (h *traceHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("  node ")
	b.WriteString(strconv.Itoa(h.node))
	b.WriteString(": ")
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "self" {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
		}
		return true
	})
	h.s.logf("%s", b.String())
	return nil
}

func (h *traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &traceHandler{s: h.s, node: h.node, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *traceHandler) WithGroup(string) slog.Handler { return h }
