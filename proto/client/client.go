// Package client is the Go client of lockd.
//
// It owns the client side of the wire protocol described in package proto:
// persistent connections to every node, pipelined requests, matching each
// answer to its request (an acquire's by the ref=R it carries, so that
// acquires of one key from different goroutines never wait on each
// other's answers; others by (op, key)), withdrawing (X) an acquire whose
// caller gave up, keeping watches (L) on the active, following the active node when a
// standby redirects (M), moving an acquire to another connection when one
// drops, and re-sending releases until a node answers. It knows nothing of
// how a server grants locks.
//
// One Client is meant to be shared by many goroutines: every request is
// written to a connection at once, without waiting for the answers of
// earlier requests, and the answers are handed back to their callers in any
// order the server sends them.
//
// # A critical section
//
// Hold acquires a key and renews it in the background; the work stops
// when the hold's Done closes (the lock was lost), and every write carries
// the fencing token, which the protected resource checks (it refuses a
// token smaller than the largest it has seen):
//
//	c, err := client.New([]string{"10.0.0.1:7070", "10.0.0.2:7070"}, client.Options{})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	held, err := c.Hold(ctx, "deploy", 30*time.Second) // waits for the key
//	if err != nil {
//		return err
//	}
//	defer held.Release(context.Background())
//	for _, step := range steps {
//		select {
//		case <-held.Done():
//			return held.Err() // lost: another holder may have it now
//		default:
//		}
//		if err := store.Write(step, held.Token()); err != nil { // fenced
//			return err
//		}
//	}
//
// Acquire returns a Lock, which Release gives back; TryAcquire never
// waits; the Shared option takes a key as a reader; AcquireAll and
// HoldAll take up to MaxSetKeys keys at once, all or none (in a request
// line of at most proto.MaxLineLen bytes: a call whose line would be
// longer is refused before sending, matching ErrInvalidArgument); NewElection
// elects a leader, whose value Proclaim changes; Watch follows a key's
// holders and waiters, and QueueInfo reads them with their modes, sets,
// places and values. Each has a runnable example (example_test.go,
// example_election_test.go), which pkg.go.dev, or pkgsite run locally,
// shows beside it; go doc in a terminal shows no examples.
//
// # Liveness
//
// A node whose process is frozen (SIGSTOP, a paused VM, a long stall) or
// whose machine vanished closes nothing: its kernel even completes new
// TCP handshakes. So the client watches each connection itself, with
// Options.FailureTimeout (FT, 1s by default, lockd's own
// --failure-timeout):
//
//   - A new connection counts as up only once the node answered an S
//     request (within FT).
//   - A connection that has read nothing for FT/4 while requests wait on
//     it, or for FT when idle, sends a keep-alive: S, which every node
//     answers at once whatever its role, without touching a lock. A
//     waiting acquire gets no answer for as long as it waits, so the
//     keep-alive is a request of its own, answered beside it.
//   - A connection whose keep-alive has gone unanswered for FT/2 while
//     nothing at all was read for FT is closed, and treated as a drop:
//     acquires waiting there move to another connection with the wait
//     they have left and their id (every Acquire names itself with
//     proto's id=ID, so a node that granted or queued it answers that
//     again), releases are re-sent elsewhere, the node is left out of
//     the round-robin and re-dialled in the background.
//
// So a frozen node costs its clients FT to about 1.4 FT, the time its
// standbys take to promote one of them. A slow but live node is not
// mistaken for a dead one: anything it answers counts, and S costs a
// node no lock work, so a loaded node answers it in milliseconds, far
// inside the keep-alive's FT/2. A cluster run with a shorter
// --failure-timeout should get the same FailureTimeout here; under
// 100 ms the margin gets thin.
//
// A redirect (M) is followed at once; redirects in a row, each answered
// at once, for longer than three failure timeouts and more than 10 of
// them, mean the nodes disagree on which one is active (ErrDisagree).
// Nodes started or restarted together take up to a failure timeout or
// two to agree, and the client follows them meanwhile, pausing up to
// 100 ms between redirects. A request a node had taken in and
// redirected later (a waiting acquire moved by a handoff) starts the
// count afresh.
//
// A redirect to a node this client has marked down dials that node at
// once, not at the next background redial: the node named is either
// still failing, and the redirecting node has not seen it yet (a
// failover under way), or it is back, restarted or resumed, and took
// its role again. The call asks again shortly, which finds the node if
// it is back, or the node that took over. It gives up after ten FT,
// saying how long the node named has not answered this client.
//
// # Outages
//
// An acquire that waits (every acquire but a try: Acquire, AcquireWith,
// Hold and Election.Campaign, with a wait or without) waits through an
// outage too: where another call would return ErrUnavailable because no
// node can be reached, it keeps trying, dialling every node, until one
// serves it, its wait runs out or ctx ends. The outage counts against
// the wait (from the request's first send, or from the outage's start
// when it was never sent): an acquire whose wait runs out with no node
// back returns ErrUnavailable, not ErrTimeout, since no node said the
// key was busy. A client that has never reached any node waits so only
// while every node refuses the connection (nothing listens there yet: a
// cluster starting or restarting), and only for an acquire with a wait:
// one that waits forever returns ErrUnavailable at once, as it does when
// a node takes the connection and never answers, since its addresses may
// well be wrong and it would hang on them for good. A node that refuses
// the TLS handshake or the secret (a *SetupError) ends it at once too. A
// try (TryAcquire, Wait(0)) does not wait: it returns ErrUnavailable
// once every node was tried.
//
// A watch says when it loses the cluster: see WatchEvents.
package client

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// Defaults of Options.
const (
	defaultRedial       = 3 * time.Second
	defaultReleaseEvery = 200 * time.Millisecond
	defaultReleaseFor   = 5 * time.Second
	defaultDialTimeout  = 2 * time.Second
	// defaultFailureTimeout is lockd's own default --failure-timeout:
	// a node silent this long is down for its peers, and for clients.
	defaultFailureTimeout = time.Second
)

// Bounds of one call.
const (
	// maxMoves is how many M redirects in a row one send of a call
	// follows at least when each node answers at once that another is
	// active, and it follows them for settleFor at least (see
	// Client.settleFor). A handoff settles in one or two; more means
	// the nodes disagree on who is active. A redirect of a request a
	// node had taken in (a waiting acquire moved by a handoff) starts
	// the count again, so a wait survives any number of handoffs.
	maxMoves = 10
	// maxDrops is how many dropped connections one call survives before it
	// reports the cluster unavailable rather than trying forever.
	maxDrops = 8
	// maxDynamic bounds the connections added for addresses learnt from M
	// answers, so that a confused node cannot make the client dial without
	// end.
	maxDynamic = 16
)

// Options tune a Client. The zero value is ready to use.
type Options struct {
	ConnsPerAddr int           // 0: 1 per address, 2 when only one address is given
	Redial       time.Duration // 0: 3s  (background redial of a dropped connection)
	ReleaseEvery time.Duration // 0: 200ms (release re-send interval)
	ReleaseFor   time.Duration // 0: 5s   (give up re-sending a release after this)
	DialTimeout  time.Duration // 0: 2s
	Logger       *slog.Logger  // nil: discard

	// FailureTimeout bounds how long a node may stay silent before its
	// connection is treated as dropped (0: 1s, lockd's default
	// --failure-timeout). A frozen or vanished node closes nothing, so
	// the client watches for itself: see "Liveness" in the package
	// comment. Give it the cluster's --failure-timeout.
	FailureTimeout time.Duration

	// TLS, when set, speaks TLS to every node. An empty ServerName
	// verifies each node under the host of its address. Rotate the
	// client certificate with GetClientCertificate.
	TLS *tls.Config
	// Secret, when set, is proven on every connection as Role (Client
	// when zero) with the I handshake, which never sends it and checks
	// that the node knows it too.
	Secret []byte
	Role   auth.Role

	// Name says who this client is, to whoever looks at a key's holders
	// and waiters (Q, lockctl queues): it leads the id of every acquire,
	// NAME#SUFFIX, the suffix keeping each id unique (see proto's A).
	// lockctl uses user@host:pid. Spaces and control characters become
	// '_', and a name longer than MaxNameLen bytes is cut. "" sends ids
	// without a name.
	Name string
}

// MaxNameLen is the longest Options.Name an acquire id has room for,
// beside the suffix that makes it unique.
const MaxNameLen = proto.MaxIDLen - idSuffixLen

// idSuffixLen is the most an id adds to its name: '#', 16 hex digits of
// the client's random prefix, '-' and a count of its acquires in base 36
// (13 digits at most).
const idSuffixLen = 1 + 16 + 1 + 13

// cleanName makes name fit an acquire id: no byte that cannot stand in a
// word of the protocol, at most MaxNameLen bytes, not cut inside a UTF-8
// sequence.
func cleanName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c <= ' ' || c == 0x7f {
			b[i] = '_'
		}
	}
	if len(b) > MaxNameLen {
		b = b[:MaxNameLen]
		// Drop a rune cut in two.
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	return string(b)
}

// Lock is a granted lock, or one place of a semaphore. Token is its
// fencing token: hand it to the protected resource, which refuses tokens
// smaller than the last it saw (for a semaphore, see Limit).
type Lock struct {
	Key   string
	Token uint64
	Lease time.Duration
	// Limit is how many may hold Key at once: 1 for a lock. The holders
	// of a semaphore each have a token of their own, unique and larger
	// than every earlier one; a resource fenced per place keys its fence
	// by token (or by place), not by key alone.
	Limit int
	// ID is the id the acquire carried, as Q shows it: Options.Name, '#',
	// and what makes it unique.
	ID string
	// Shared says the lock is held as a reader (the Shared option).
	Shared bool
	// Place is which place of a semaphore (Limit > 1) the grant holds,
	// 1 to Limit, the lowest that was free: a resource may fence by
	// place and token. It is 0 for a lock, a reader, a key of a set,
	// and from a node that does not say.
	Place int

	c *Client // the client that acquired it, for Release
}

// Client talks to the lockd nodes at a fixed list of addresses, plus any
// address a node names as the active one. It is safe for concurrent use.
type Client struct {
	opts  Options
	log   *slog.Logger
	addrs []string
	dial  func(ctx context.Context, addr string) (net.Conn, error)
	now   func() time.Time

	// ctx ends when the client is closed; every goroutine watches it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	conns   []*conn
	dynamic int
	active  string
	rr      uint64
	changed chan struct{} // closed and replaced whenever a connection changes state
	closed  bool
	lastErr error
	everUp  bool // a connection was up at some point

	// waits counts the times a call waited for a connection to come up;
	// tests use it to know a call is blocked.
	waits atomic.Int64

	// idPrefix and ids make the acquire ids: Options.Name and '#' when
	// named, then random to this client, then a count of its acquires.
	idPrefix string
	ids      atomic.Uint64

	// watches are the keys watched, one subscription each (Watch); wmu
	// is taken before any group's own mutex.
	wmu     sync.Mutex
	watches map[string]*watchGroup
}

// hooks let tests replace the network and the clock.
type hooks struct {
	dial func(ctx context.Context, addr string) (net.Conn, error)
	now  func() time.Time
}

// New returns a client of the nodes at addrs (HOST:PORT each). It dials in
// the background and returns at once; the first request waits for the
// first dial attempt. It fails only when addrs is empty or malformed.
func New(addrs []string, opts Options) (*Client, error) {
	return newClient(addrs, opts, hooks{})
}

func newClient(addrs []string, opts Options, h hooks) (*Client, error) {
	list, err := checkAddrs(addrs)
	if err != nil {
		return nil, err
	}
	if opts.ConnsPerAddr <= 0 {
		opts.ConnsPerAddr = 1
		if len(list) == 1 {
			// One node only: a second connection keeps service going
			// while the first is re-dialled.
			opts.ConnsPerAddr = 2
		}
	}
	if opts.Redial <= 0 {
		opts.Redial = defaultRedial
	}
	if opts.ReleaseEvery <= 0 {
		opts.ReleaseEvery = defaultReleaseEvery
	}
	if opts.ReleaseFor <= 0 {
		opts.ReleaseFor = defaultReleaseFor
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = defaultDialTimeout
	}
	if opts.FailureTimeout <= 0 {
		opts.FailureTimeout = defaultFailureTimeout
	}
	if opts.Role == auth.None {
		opts.Role = auth.Client
	}
	c := &Client{
		opts:    opts,
		log:     opts.Logger,
		addrs:   list,
		dial:    h.dial,
		now:     h.now,
		changed: make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.dial == nil {
		d := &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 15 * time.Second}
		c.dial = func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	if c.now == nil {
		c.now = time.Now
	}
	var prefix [8]byte
	rand.Read(prefix[:])
	c.idPrefix = hex.EncodeToString(prefix[:])
	if opts.Name != "" {
		c.idPrefix = cleanName(opts.Name) + string(proto.IDSep) + c.idPrefix
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.Lock()
	for _, a := range list {
		for range opts.ConnsPerAddr {
			c.addConnLocked(a, false)
		}
	}
	c.mu.Unlock()
	c.wg.Add(1)
	go c.watchLiveness()
	return c, nil
}

// acquireID names one Acquire call, the same on each of its sends:
// proto's id=ID, which makes re-sending an acquire safe. Ids are this
// client's random prefix and a count, unique without coordination.
func (c *Client) acquireID() string {
	return c.idPrefix + "-" + strconv.FormatUint(c.ids.Add(1), 36)
}

// watchLiveness runs every connection's liveness check (conn.checkLive)
// ten times per FailureTimeout.
func (c *Client) watchLiveness() {
	defer c.wg.Done()
	t := time.NewTicker(min(max(c.opts.FailureTimeout/10, time.Millisecond), 100*time.Millisecond))
	defer t.Stop()
	for {
		var now time.Time
		select {
		case <-c.ctx.Done():
			return
		case now = <-t.C:
		}
		c.mu.Lock()
		conns := c.conns // only ever appended to
		c.mu.Unlock()
		for _, cn := range conns {
			cn.checkLive(now)
		}
	}
}

func checkAddrs(addrs []string) ([]string, error) {
	if len(addrs) == 0 {
		return nil, errors.New("lockd client: no address given; pass at least one HOST:PORT of a lockd node")
	}
	var list []string
	seen := make(map[string]bool)
	for i, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("lockd client: address %d of %d is blank; pass HOST:PORT for every node", i+1, len(addrs))
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("lockd client: address %q is not HOST:PORT (%v); write it like 127.0.0.1:7070", a, err)
		}
		if !seen[a] {
			seen[a] = true
			list = append(list, a)
		}
	}
	return list, nil
}

// open dials addr and makes the connection ready for requests: TLS when
// configured, then the secret, then a first keep-alive answered. The
// reader returned is the connection's.
func (c *Client) open(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error) {
	nc, err := c.dial(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	nc, r, err := secure(ctx, nc, addr, &c.opts)
	if err != nil {
		return nil, nil, err
	}
	if err := hello(nc, r, addr, c.opts.FailureTimeout, c.opts.TLS == nil); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, r, nil
}

// hello sends a keep-alive on a fresh connection and waits up to
// FailureTimeout for its answer. The kernel of a frozen process still
// completes TCP handshakes, so a connection that merely opened proves
// nothing; one that answered S serves. plain says the connection is not
// TLS: a node that speaks TLS then waits for the rest of a record, and
// its silence is worth naming.
func hello(nc net.Conn, r *bufio.Reader, addr string, ft time.Duration, plain bool) error {
	nc.SetDeadline(time.Now().Add(ft))
	if _, err := nc.Write([]byte("S " + probeLabel + "\n")); err != nil {
		return err
	}
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > maxAnswerLen {
			return fmt.Errorf("%w: %s answered a line longer than %d bytes; check that a lockd node, not another service, listens there", ErrNotLockd, addr, maxAnswerLen)
		}
		line = append(line, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			hint := ""
			if plain {
				hint = "; " + silentPlainHint
			}
			return fmt.Errorf("%w: %s took the connection but did not answer a status request within %s (the failure timeout)%s", ErrNoAnswer, addr, ft, hint)
		}
		if err != nil {
			return err
		}
		break
	}
	nc.SetDeadline(time.Time{})
	a, err := proto.ParseAnswer(line)
	if err != nil || (a.Kind != proto.OpStatus && a.Kind != proto.KindError) {
		return fmt.Errorf("%w: %s answered %q to a status request; check that a lockd node, not another service, listens there", ErrNotLockd, addr, strings.TrimSpace(string(line[:min(len(line), 64)])))
	}
	return nil
}

// silentPlainHint is what a node silent to a client without TLS may be.
const silentPlainHint = "a frozen node does that, and so does one that speaks TLS to a client without TLS (set Options.TLS)"

// secure makes a dialled connection ready for requests: TLS when
// configured, then the secret.
func secure(ctx context.Context, nc net.Conn, addr string, opts *Options) (net.Conn, *bufio.Reader, error) {
	if opts.TLS == nil && opts.Secret == nil {
		return nc, bufio.NewReaderSize(nc, 16<<10), nil
	}
	nc.SetDeadline(time.Now().Add(opts.DialTimeout))
	if opts.TLS != nil {
		cfg := opts.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = addr
			if h, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = h
			}
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, nil, fmt.Errorf("%w: %s took the connection but did not finish the TLS handshake within %s", ErrNoAnswer, addr, opts.DialTimeout)
			}
			return nil, nil, &SetupError{Addr: addr, What: "TLS", Err: err}
		}
		nc = tc
	}
	r := bufio.NewReaderSize(nc, 16<<10)
	if opts.Secret != nil {
		role := opts.Role
		if role == auth.None {
			role = auth.Client
		}
		if _, err := auth.Authenticate(nc, r, role, opts.Secret, addr, true); err != nil {
			nc.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, nil, fmt.Errorf("%w: %s took the connection but did not answer the authentication within %s", ErrNoAnswer, addr, opts.DialTimeout)
			}
			return nil, nil, &SetupError{Addr: addr, What: "the secret", Err: err}
		}
	}
	nc.SetDeadline(time.Time{})
	return nc, r, nil
}

// Close stops every goroutine of the client and closes its connections.
// Calls still waiting return ErrClosed. Locks still held stay held until
// their lease ends.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.cancel()
	conns := c.conns
	c.notifyLocked()
	c.mu.Unlock()
	for _, cn := range conns {
		cn.closeNet()
	}
	c.wg.Wait()
	return nil
}

// Active is the address of the node last known to be active: named by an
// M answer, or the node that last served a lock request. It is "" until
// one is known.
func (c *Client) Active() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

func (c *Client) setActive(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if addr != c.active {
		c.log.Info("lockd active node", "addr", addr, "was", c.active)
		c.active = addr
	}
}

// notifyLocked wakes every call waiting for a connection to change state.
func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// addConnLocked registers a connection to addr and starts dialling it.
func (c *Client) addConnLocked(addr string, dynamic bool) *conn {
	cn := newConn(c, addr)
	c.conns = append(c.conns, cn)
	if dynamic {
		c.dynamic++
	}
	c.wg.Add(2)
	go cn.run()
	go cn.writeLoop()
	return cn
}

// attempt is what one call remembers of the connections it tried, so that
// it moves on instead of trying the same broken one again.
type attempt struct {
	// busyKey, for an acquire, is its key: a connection with an older
	// acquire of that key outstanding is used only when no other will
	// do, because the server answers one (op, key) in send order and the
	// older acquire's wait would hold this one's answer back.
	busyKey string
	target  string           // address named by an M answer to this call
	failed  map[*conn]uint64 // generation of the connection that failed this call
	fresh   map[*conn]bool   // a dial attempt was made while this call waited
	drops   int
	moves   int // redirects in a row, each answered at once
	// movedSince is when the first of those redirects came.
	movedSince time.Time
	lastErr    error
	// stale counts redirects to a node this client finds dead, since
	// staleSince: a failover the redirecting node has not seen yet.
	stale      int
	staleSince time.Time
}

// redirected counts a redirect answered at once and reports whether the
// call should give up: more than maxMoves of them in a row, for longer
// than settle. Nodes that start together may redirect to each other
// until they agree on an active node, which takes a failure timeout or
// two; a count alone would give up within a fraction of a second.
func (at *attempt) redirected(settle time.Duration) bool {
	now := time.Now()
	if at.moves == 0 {
		at.movedSince = now
	}
	at.moves++
	return at.moves > maxMoves && now.Sub(at.movedSince) > settle
}

func (at *attempt) fail(cn *conn, gen uint64, err error) {
	if at.failed == nil {
		at.failed = make(map[*conn]uint64)
	}
	at.failed[cn] = gen
	at.drops++
	at.lastErr = err
}

func (at *attempt) markFresh(cn *conn) {
	if at.fresh == nil {
		at.fresh = make(map[*conn]bool)
	}
	at.fresh[cn] = true
}

// choose picks the connection for the next send of a call: round-robin
// over the live connections to the active node when one is known (or to
// at.target), else over all live connections. When none is live it starts
// a dial of the connections this call has not seen tried, and returns a
// channel that is closed when a connection changes state. It reports
// ErrUnavailable when every connection has been tried.
func (c *Client) choose(at *attempt) (*conn, uint64, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, 0, nil, ErrClosed
	}
	target := at.target
	if target == "" {
		target = c.active
	}
	if target != "" && c.deadLocked(target) {
		// Its connections failed and have not come back: ask the others,
		// which name the active, rather than wait for this one.
		target = ""
	}
	if target != "" {
		if c.dynamic < maxDynamic && !c.hasConnLocked(target) {
			c.addConnLocked(target, true)
		}
		if cn, wait := c.pickLocked(target, at); cn != nil {
			return cn, cn.gen, nil, nil
		} else if wait {
			return nil, 0, c.changed, nil
		}
		// The active is unreachable: another node may have taken over,
		// and the others redirect us if not.
	}
	cn, wait := c.pickLocked("", at)
	if cn != nil {
		return cn, cn.gen, nil, nil
	}
	if wait {
		return nil, 0, c.changed, nil
	}
	return nil, 0, nil, c.unavailableLocked(at.lastErr)
}

// upLocked reports whether a connection to addr is up.
func (c *Client) upLocked(addr string) bool {
	for _, cn := range c.conns {
		if cn.addr == addr && cn.state == stateUp {
			return true
		}
	}
	return false
}

// deadLocked reports whether every connection to addr failed since it was
// last up (dropped, refused, or silent past FailureTimeout) and none has
// come back. An address not dialled yet is not dead.
func (c *Client) deadLocked(addr string) bool {
	found := false
	for _, cn := range c.conns {
		if cn.addr != addr {
			continue
		}
		if cn.state == stateUp || cn.lastErr == nil {
			return false
		}
		found = true
	}
	return found
}

// stale reports whether addr is dead (deadLocked), and if it is, dials
// its connections at once instead of after Redial: a node named by an M
// answer is one the cluster says is active, so a restarted or resumed
// node there is worth finding now, not at the next background redial.
func (c *Client) stale(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.deadLocked(addr) {
		return false
	}
	for _, cn := range c.conns {
		if cn.addr == addr {
			cn.dialNowLocked()
		}
	}
	return true
}

// heardLocked is when a node at addr last answered this client: the
// last line read on any of its connections, zero if none ever was.
func (c *Client) heardLocked(addr string) time.Time {
	var last int64
	for _, cn := range c.conns {
		if cn.addr == addr && cn.gen > 0 {
			last = max(last, cn.lastRead.Load())
		}
	}
	if last == 0 {
		return time.Time{}
	}
	return time.Unix(0, last)
}

// silence says how long addr has not answered this client, in words.
func (c *Client) silence(addr string) string {
	c.mu.Lock()
	heard := c.heardLocked(addr)
	c.mu.Unlock()
	if heard.IsZero() {
		return "which this client has never reached"
	}
	return fmt.Sprintf("which has not answered this client for %s", time.Since(heard).Round(time.Millisecond))
}

// anyUp reports whether a connection to any node is up.
func (c *Client) anyUp() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		if cn.state == stateUp {
			return true, c.changed
		}
	}
	return false, c.changed
}

func (c *Client) hasConnLocked(addr string) bool {
	for _, cn := range c.conns {
		if cn.addr == addr {
			return true
		}
	}
	return false
}

// pickLocked picks round-robin among the live connections to addr (to any
// address when addr is "") that this call has not seen fail. When there is
// none, it reports whether waiting may help: a dial is under way, or it
// started one.
func (c *Client) pickLocked(addr string, at *attempt) (*conn, bool) {
	usable := func(cn *conn) bool {
		if cn.state != stateUp || (addr != "" && cn.addr != addr) {
			return false
		}
		g, ok := at.failed[cn]
		return !ok || cn.gen > g
	}
	if at.busyKey != "" {
		base := usable
		free := func(cn *conn) bool { return base(cn) && !cn.acquiring(at.busyKey) }
		for _, cn := range c.conns {
			if free(cn) {
				usable = free
				break
			}
		}
	}
	n := 0
	for _, cn := range c.conns {
		if usable(cn) {
			n++
		}
	}
	if n > 0 {
		i := int(c.rr % uint64(n))
		c.rr++
		for _, cn := range c.conns {
			if usable(cn) {
				if i == 0 {
					return cn, false
				}
				i--
			}
		}
	}
	wait := false
	for _, cn := range c.conns {
		if addr != "" && cn.addr != addr {
			continue
		}
		switch {
		case cn.state == stateDialing:
			at.markFresh(cn)
			wait = true
		case cn.state == stateDown && !at.fresh[cn]:
			at.markFresh(cn)
			cn.dialNowLocked()
			wait = true
		}
	}
	return nil, wait
}

// unavailableLocked is the error of a call that found no connection.
func (c *Client) unavailableLocked(last error) error {
	if last == nil {
		last = c.lastErr
	}
	var addrs []string
	seen := make(map[string]bool)
	for _, cn := range c.conns {
		if !seen[cn.addr] {
			seen[cn.addr] = true
			addrs = append(addrs, cn.addr)
		}
	}
	return unavailable(addrs, last)
}

func unavailable(addrs []string, last error) error {
	hint := "check that lockd is running there, and that the client was given its address"
	if last == nil {
		return fmt.Errorf("%w: tried %s; %s", ErrUnavailable, strings.Join(addrs, ", "), hint)
	}
	return fmt.Errorf("%w: tried %s (%w); %s", ErrUnavailable, strings.Join(addrs, ", "), last, hint)
}
