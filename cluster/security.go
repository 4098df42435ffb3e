package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// Security is who may reach a node and what each caller may do.
type Security struct {
	// TLS, when set, serves every connection over TLS and dials peers
	// with it, verifying their node certificates.
	TLS *auth.TLS
	// Secrets of the client, admin and peer roles. With no admin secret
	// the client secret proves the admin role too.
	Secrets auth.Secrets
	// Insecure allows serving clients without authentication on an
	// address other than loopback.
	Insecure bool
	// ClientAddrs are HOST:PORT addresses clients dial to reach this
	// node besides Listen, Advertise and the address a connection
	// arrives at (a DNS name, a NAT or load balancer's address): a
	// client's handshake without TLS names the address it dialled, and
	// one naming an address that is not this node's is refused.
	ClientAddrs []string
}

// Limits bound what one client, or all of them together, can make a node
// hold. A zero field takes its default.
type Limits struct {
	MaxConns      int           // connections open at once
	MaxConnsPerIP int           // connections from one IP address; negative: no cap
	AuthTimeout   time.Duration // a connection must authenticate within this, where it must
	LineTimeout   time.Duration // a line that has begun must end within this
	MaxConnOutput int           // unread answers of one connection, in bytes
	MaxOutput     int64         // unread answers of every connection together, in bytes
}

// DefaultLimits are the limits lockd uses unless told otherwise.
var DefaultLimits = Limits{
	MaxConns: 10_000,
	// A tenth of MaxConns: one machine, even one holding the client
	// secret, cannot take every connection. An official client keeps
	// one or two per address; a thousand is a fleet of them behind one
	// NAT.
	MaxConnsPerIP: 1000,
	AuthTimeout:   10 * time.Second,
	LineTimeout:   10 * time.Second,
	MaxConnOutput: 8 << 20,
	MaxOutput:     512 << 20,
}

func (l *Limits) fill() {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultLimits.MaxConns
	}
	if l.MaxConnsPerIP == 0 {
		l.MaxConnsPerIP = DefaultLimits.MaxConnsPerIP
	}
	if l.AuthTimeout <= 0 {
		l.AuthTimeout = DefaultLimits.AuthTimeout
	}
	if l.LineTimeout <= 0 {
		l.LineTimeout = DefaultLimits.LineTimeout
	}
	if l.MaxConnOutput <= 0 {
		l.MaxConnOutput = DefaultLimits.MaxConnOutput
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultLimits.MaxOutput
	}
}

// Read-side backpressure: a connection whose unread answers pass
// readPauseAt is not read again until they fall below readResumeAt, so a
// client that sends without reading cannot make the node queue more.
const (
	readPauseAt  = 1 << 20
	readResumeAt = 256 << 10
)

// gate is what a node decides about callers once, at start.
type gate struct {
	secrets auth.Secrets
	// open is the role every connection has without proving anything.
	open auth.Role
	// peerAuth: peers prove themselves (by secret or by certificate).
	peerAuth bool
	// certsOnly: clients prove themselves by certificate alone.
	certsOnly bool
	// names: the addresses a client's handshake may name besides the one
	// its connection arrived at (see reaches); hostname, this machine's.
	names    []string
	hostname string
}

// newGate checks the security settings of a node listening on listen with
// peers other nodes.
func newGate(s Security, listen string, peers int) (gate, error) {
	g := gate{secrets: s.Secrets, names: slices.Clone(s.ClientAddrs)}
	if specificHost(listen) {
		g.names = append(g.names, listen)
	}
	g.hostname, _ = os.Hostname()
	if err := checkSecrets(s.Secrets); err != nil {
		return g, err
	}
	for _, a := range s.ClientAddrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return g, fmt.Errorf("--advertise-client %q is not HOST:PORT: %v", a, err)
		}
	}
	if g.secrets.Admin == nil {
		g.secrets.Admin = g.secrets.Client
	}
	clientCerts := s.TLS != nil && s.TLS.Files().ClientAuth
	g.peerAuth = s.Secrets.Peer != nil || (s.TLS != nil && s.TLS.HasCA() && s.TLS.Files().Cert != "")
	authOn := s.Secrets.Client != nil || s.Secrets.Admin != nil || s.Secrets.Peer != nil || clientCerts
	if s.TLS != nil && s.TLS.Files().Cert == "" {
		return g, errors.New("TLS needs this node's certificate: give --tls-cert and --tls-key (make them with lockd tls cert --host HOST)")
	}
	if authOn && peers > 0 && !g.peerAuth {
		return g, errors.New("with authentication on, peers must prove they are peers: add --peer-secret-file FILE (the same file on every node), or TLS with --tls-ca and node certificates (lockd tls cert --host HOST)")
	}
	clientOpen := s.Secrets.Client == nil && !clientCerts
	g.certsOnly = clientCerts && s.Secrets.Client == nil
	switch {
	case !clientOpen:
		g.open = auth.None
	case s.Secrets.Admin != nil:
		g.open = auth.Client
	case g.peerAuth:
		g.open = auth.Admin
	default:
		g.open = auth.Peer
	}
	if clientOpen && !s.Insecure && !isLoopback(listen) {
		return g, fmt.Errorf("--listen %s is reachable from the network, and without authentication anyone who reaches it could take and release every lock: add --secret-file FILE (clients send it: lockctl --secret-file FILE), or --tls-client-auth with certificates from lockd tls; or pass --insecure to serve a network you trust without authentication", listen)
	}
	return g, nil
}

// checkSecrets refuses secrets too weak to prove anything, and two roles
// with one secret: it proves the higher role to everyone who holds it for
// the lower.
func checkSecrets(s auth.Secrets) error {
	for _, sec := range []struct {
		flag string
		b    []byte
	}{{"secret-file", s.Client}, {"admin-secret-file", s.Admin}, {"peer-secret-file", s.Peer}} {
		if sec.b == nil {
			continue
		}
		if err := auth.CheckSecret(sec.b); err != nil {
			return fmt.Errorf("--%s: %v", sec.flag, err)
		}
	}
	const fresh = "make it a secret of its own: head -c 32 /dev/urandom | base64 > FILE"
	switch {
	case s.Peer != nil && s.Client != nil && bytes.Equal(s.Peer, s.Client):
		return errors.New("--secret-file and --peer-secret-file hold the same secret, so every client could act as a node of the cluster (replicate, take the active role): " + fresh + " for --peer-secret-file, the same on every node")
	case s.Peer != nil && s.Admin != nil && bytes.Equal(s.Peer, s.Admin):
		return errors.New("--admin-secret-file and --peer-secret-file hold the same secret, so every admin could act as a node of the cluster: " + fresh + " for --peer-secret-file, the same on every node")
	case s.Admin != nil && s.Client != nil && bytes.Equal(s.Admin, s.Client):
		return errors.New("--secret-file and --admin-secret-file hold the same secret, so every client is an admin: " + fresh + " for --admin-secret-file, or leave --admin-secret-file out to let every client move the active role")
	}
	return nil
}

// specificHost reports whether addr names one host: not the wildcard of
// a listener (":7070", "0.0.0.0:7070"), which a client on another
// machine that dials it reaches its own machine with.
func specificHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.IsUnspecified()
}

// isLoopback reports whether a listen address only accepts connections
// from this machine.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// needs is the role a request needs.
func needs(req *proto.Request) auth.Role {
	switch req.Op {
	case proto.OpAuth:
		return auth.None
	case proto.OpHandoff:
		if req.Key == core.TakebackLabel {
			return auth.Peer
		}
		return auth.Admin
	case proto.OpBeat, proto.OpSync, proto.RecTakeover, proto.OpResolve, proto.OpApplied:
		return auth.Peer
	}
	return auth.Client
}

// refusal is the E words for a request that needs more than have.
func (g *gate) refusal(need, have auth.Role) string {
	switch {
	case have == auth.None:
		if g.certsOnly {
			return "authenticate first: this node requires a client certificate (lockctl --tls-cert FILE --tls-key FILE)"
		}
		return "authenticate first: this node requires a secret (lockctl --secret-file FILE; by hand: I client SECRET)"
	case need == auth.Admin:
		return "this needs the admin role: authenticate with the admin secret (lockctl --secret-file ADMIN-SECRET-FILE) or an admin certificate (lockd tls cert --role admin)"
	default:
		return "peer messages are for lockd nodes: authenticate as a peer (--peer-secret-file, or a node certificate)"
	}
}

// authStep serves an I request on c. A key that is no role may be a
// secret typed in the wrong place: it is neither logged nor echoed.
func (n *Node) authStep(c *conn, req *proto.Request) {
	key := req.Key
	if _, ok := auth.ParseRole(key); !ok {
		key = proto.WordNone
	}
	to := auth.Target{Self: n.self}
	if !c.tls {
		to.Reaches = func(addr string) bool { return n.gate.reaches(addr, c.nc.LocalAddr()) }
	}
	now := time.Now()
	var err error
	var reply []string
	role := c.role
	if wait := n.authFails.penalty(c.ip, now); wait > 0 {
		err = fmt.Errorf("too many wrong secrets from this address: retry in %s", wait.Round(10*time.Millisecond))
	} else {
		reply, role, err = c.hs.Step(n.gate.secrets, n.gate.open, c.role, to, req.Key, req.Args)
		if errors.Is(err, auth.ErrWrongSecret) {
			n.authFails.failed(c.ip, now)
		}
	}
	if err != nil {
		n.refusedLog.log(n.log, "refused authentication", "remote", c.remote, "role", key, "why", err.Error())
		c.send(func(b []byte) []byte {
			return proto.AppendError(b, key, proto.OpAuth, err.Error()+"; closing this connection")
		})
		c.flushAndClose()
		return
	}
	if role > c.role {
		n.log.Debug("authenticated", "remote", c.remote, "role", role.String())
	}
	c.role = role
	c.authed.Store(role >= auth.Client)
	if role >= auth.Client {
		n.forgetStrangerLocked(c)
	}
	c.send(func(b []byte) []byte { return proto.AppendFields(b, proto.OpAuth, key, reply...) })
}

// reaches reports whether addr, the address a client says it dialled,
// is this node's, for a connection that arrived at local: one of the
// node's names, or an address with local's port whose host is local's
// IP, or a name of this machine that leads there (localhost on
// loopback, its host name).
func (g *gate) reaches(addr string, local net.Addr) bool {
	for _, a := range g.names {
		if strings.EqualFold(addr, a) {
			return true
		}
	}
	host, port, err := net.SplitHostPort(addr)
	la, ok := local.(*net.TCPAddr)
	if err != nil || !ok || port != strconv.Itoa(la.Port) {
		return false
	}
	lip, ok := netip.AddrFromSlice(la.IP)
	if !ok {
		return false
	}
	lip = lip.Unmap()
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().WithZone("") == lip.WithZone("")
	}
	switch {
	case strings.EqualFold(host, "localhost"):
		return lip.IsLoopback()
	case g.hostname != "" && strings.EqualFold(host, g.hostname):
		return true
	}
	for _, a := range g.names {
		if h, _, err := net.SplitHostPort(a); err == nil && strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

// unechoed is pe as c is answered it: its key is not echoed where it
// may be a secret typed in the wrong place: the key of an I line that is
// no role ("I SECRET" alone), or any key on a connection that has not
// authenticated, whose lines may be a mistyped I ("i SECRET"). Nothing
// matches such an answer by its key.
func unechoed(c *conn, pe *proto.ParseError) *proto.ParseError {
	if pe.Key == proto.WordNone {
		return pe
	}
	if pe.Op == proto.OpAuth {
		if _, isRole := auth.ParseRole(pe.Key); isRole {
			return pe
		}
	} else if c.role != auth.None {
		return pe
	}
	masked := *pe
	masked.Key = proto.WordNone
	return &masked
}

// Failed authentications slow down the next ones from the same source:
// the first authFreeFailures wrong secrets cost nothing (a person's
// typos), each one after refuses every authentication from there for
// twice as long as the one before, from authPenaltyBase up to
// authPenaltyMax, and a source is forgotten authForget after its last
// failure. A guesser gets one secret every few seconds from an address,
// where it got thousands a second; a correct secret from the same source during the penalty
// is refused too (it cannot be told from a guess), told when to retry.
const (
	authFreeFailures = 3
	authPenaltyBase  = 250 * time.Millisecond
	authPenaltyMax   = 5 * time.Second
	authForget       = time.Minute
	// maxAuthSources bounds the sources remembered: past it, those
	// forgotten already go first, then any.
	maxAuthSources = 4096
)

// authBackoff counts failed authentications by source: an IPv4 address,
// or an IPv6 /64 (one machine usually holds the whole of it). Guarded
// by n.mu.
type authBackoff struct {
	m map[string]*authFailures
}

type authFailures struct {
	n     int       // failures since the source was last forgotten
	last  time.Time // the last one
	until time.Time // authentications are refused until then
}

// authSource is what failures from remote IP ip count against.
func authSource(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Unmap().Is6() {
		return ip
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// penalty is how long authentications from ip are still refused.
func (b *authBackoff) penalty(ip string, now time.Time) time.Duration {
	if b.m == nil {
		return 0
	}
	f := b.m[authSource(ip)]
	if f == nil {
		return 0
	}
	return max(f.until.Sub(now), 0)
}

// failed counts a wrong secret from ip.
func (b *authBackoff) failed(ip string, now time.Time) {
	src := authSource(ip)
	if b.m == nil {
		b.m = make(map[string]*authFailures)
	}
	f := b.m[src]
	if f != nil && now.Sub(f.last) > authForget {
		f.n = 0
	}
	if f == nil {
		if len(b.m) >= maxAuthSources {
			b.makeRoom(now)
		}
		f = &authFailures{}
		b.m[src] = f
	}
	f.n++
	f.last = now
	if k := f.n - authFreeFailures; k > 0 {
		d := authPenaltyMax
		if k <= 8 {
			d = min(authPenaltyBase<<(k-1), authPenaltyMax)
		}
		f.until = now.Add(d)
	}
}

// makeRoom forgets, among a few sources (a map range starts anywhere),
// those whose last failure is older than authForget, or the first when
// none is: a bounded cost per failure however many sources fail.
func (b *authBackoff) makeRoom(now time.Time) {
	const look = 32
	first, seen, freed := "", 0, false
	for src, f := range b.m {
		if now.Sub(f.last) > authForget {
			delete(b.m, src)
			freed = true
		} else if first == "" {
			first = src
		}
		if seen++; seen == look {
			break
		}
	}
	if !freed {
		delete(b.m, first)
	}
}

// rateLog logs one line per interval, counting the ones it skipped, so a
// flood of refusals cannot flood the log.
type rateLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (r *rateLog) log(l interface {
	Warn(string, ...any)
}, msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last) < time.Second {
		r.skipped++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.last, r.skipped = now, 0
	r.mu.Unlock()
	if skipped > 0 {
		args = append(args, "similar_skipped", skipped)
	}
	l.Warn(msg, args...)
}

// dialPeer opens an authenticated link to the peer at addr: TCP, TLS when
// configured (the peer must present a node certificate), then the peer
// secret when there is one. The reader it returns is the link's.
func (n *Node) dialPeer(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error) {
	d := net.Dialer{Timeout: n.cfg.FailureTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	nc.SetDeadline(time.Now().Add(n.cfg.FailureTimeout))
	// certPeer: TLS verified the node at addr as a peer by its node
	// certificate, and this node's own certificate, presented in the
	// same handshake, proves this node to it the same way.
	certPeer := false
	if t := n.cfg.Security.TLS; t != nil {
		tc := tls.Client(nc, t.ClientConfig(addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			if ctx.Err() == nil && !isTimeout(err) {
				err = &peerAuthError{fmt.Errorf("TLS: %w", err)}
			}
			return nil, nil, err
		}
		if t.HasCA() {
			cs := tc.ConnectionState()
			certPeer = len(cs.PeerCertificates) > 0 && auth.RoleOfCert(cs.PeerCertificates[0]) == auth.Peer
		}
		nc = tc
	}
	r := bufio.NewReaderSize(nc, 64<<10)
	sec := n.cfg.Security.Secrets.Peer
	switch {
	case sec != nil:
		// Strict unless the certificates proved both ends already: a
		// node that grants the role without proving the secret is not
		// followed.
		if _, err := auth.Authenticate(nc, r, auth.Peer, sec, addr, !certPeer); err != nil {
			nc.Close()
			var re *auth.RefusedError
			if errors.As(err, &re) || errors.Is(err, auth.ErrOpen) || errors.Is(err, auth.ErrBadProof) {
				err = &peerAuthError{fmt.Errorf("peer secret: %w", err)}
			}
			return nil, nil, err
		}
	case n.gate.peerAuth && !certPeer:
		nc.Close()
		return nil, nil, &peerAuthError{fmt.Errorf("its certificate is not a node certificate (OU %s); make one with lockd tls cert --host, or set --peer-secret-file on every node", auth.OUPeer)}
	}
	nc.SetDeadline(time.Time{})
	return nc, r, nil
}

// peerAuthError is a peer link that failed past TCP: TLS or the peer
// secret. It is a configuration to fix, not a node that is down.
type peerAuthError struct{ err error }

func (e *peerAuthError) Error() string { return e.err.Error() }
func (e *peerAuthError) Unwrap() error { return e.err }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// deadlineReader is a connection's read side, bounding how long a client
// may take: to authenticate, where the node requires it, and to finish a
// line it has begun. It sets the socket's read deadline lazily (at most
// about once per bound), so a busy connection pays for no timer per read.
type deadlineReader struct {
	c  *conn
	nc net.Conn
	br *lineReader // whose Buffered bytes are a partial line when it reads

	start        time.Time
	partialSince time.Time
	armed        time.Time // the deadline set on the socket (zero: none)
	rest         restClock // when the reader goes on in a new goroutine (rest.go)
}

// errReadBound ends a connection that overran a bound; its message is
// the one the client gets.
type errReadBound struct{ msg string }

func (e errReadBound) Error() string { return e.msg }

// lineDone says a whole line was read: the next partial line's clock
// starts when it first needs more bytes.
func (d *deadlineReader) lineDone() { d.partialSince = time.Time{} }

func (d *deadlineReader) Read(p []byte) (int, error) {
	for {
		d.arm()
		n, err := d.nc.Read(p) // TLS, or not Linux: plain TCP on Linux reads in push
		if err == nil || n > 0 {
			return n, err
		}
		if err := d.timedOut(err); err != nil {
			return 0, err
		}
	}
}

// timedOut looks into err, which ended a read that read nothing: nil
// when it was a deadline that moves on (Read reads again), else the
// error that ends the read. Not part of Read: its frame would be on the
// stack of every reader blocked in a read.
func (d *deadlineReader) timedOut(err error) error {
	if !isTimeout(err) {
		return err
	}
	return d.expired()
}

// arm sets the read deadline before a read that may wait: when none is
// armed or the bound comes sooner than the one armed. A later or
// vanished bound is left to expired, which re-arms.
func (d *deadlineReader) arm() {
	d.armRest()
	if due := d.next(); !due.IsZero() && (d.armed.IsZero() || due.Before(d.armed)) {
		d.nc.SetReadDeadline(due)
		d.armed = due
	}
}

// expired is what the read deadline firing means: an errReadBound when a
// bound was overrun, errRest when the reader is to rest, or nil, with
// the next deadline armed, when the one that fired belonged to a bound
// already met.
func (d *deadlineReader) expired() error {
	due, why := d.due()
	now := time.Now()
	if !due.IsZero() && !now.Before(due) {
		return errReadBound{why}
	}
	if d.restDue(now) {
		d.nc.SetReadDeadline(due)
		d.armed = due
		return errRest
	}
	next := d.next()
	d.nc.SetReadDeadline(next)
	d.armed = next
	return nil
}

// due is the bound in force now and what overrunning it means.
func (d *deadlineReader) due() (time.Time, string) {
	lim := &d.c.n.cfg.Limits
	var due time.Time
	why := ""
	if !d.c.authed.Load() {
		due = d.start.Add(lim.AuthTimeout)
		why = "not authenticated within " + lim.AuthTimeout.String() + "; closing this connection"
	}
	if d.br.Buffered() > 0 {
		if d.partialSince.IsZero() {
			d.partialSince = time.Now()
		}
		if t := d.partialSince.Add(lim.LineTimeout); due.IsZero() || t.Before(due) {
			due = t
			why = "line not finished within " + lim.LineTimeout.String() + "; closing this connection"
		}
	}
	return due, why
}

// evictUnauthLocked closes the oldest connection that has not
// authenticated, if there is one, and reports whether it did.
func (n *Node) evictUnauthLocked() bool {
	c := n.unauth.head
	if c == nil {
		return false
	}
	n.forgetStrangerLocked(c)
	n.refusedLog.log(n.log, "connection closed", "remote", c.remote, "why", "too many connections: the oldest not authenticated makes room")
	c.send(func(b []byte) []byte {
		return proto.AppendError(b, proto.WordNone, '?', "too many connections; this one had not authenticated; closing it")
	})
	c.evicted = true
	n.evicting++
	c.flushAndClose()
	return true
}

// strangers is the list of the connections that have not authenticated,
// oldest first, linked through the connections themselves: a connection
// leaves it as it authenticates or closes, so that the list never keeps
// a closed connection, or its buffers, alive. Guarded by n.mu.
type strangers struct{ head, tail *conn }

func (l *strangers) push(c *conn) {
	c.strangerPrev, c.strangerNext = l.tail, nil
	if l.tail == nil {
		l.head = c
	} else {
		l.tail.strangerNext = c
	}
	l.tail = c
}

func (l *strangers) remove(c *conn) {
	if c.strangerPrev == nil && l.head != c {
		return // not in the list
	}
	if c.strangerPrev == nil {
		l.head = c.strangerNext
	} else {
		c.strangerPrev.strangerNext = c.strangerNext
	}
	if c.strangerNext == nil {
		l.tail = c.strangerPrev
	} else {
		c.strangerNext.strangerPrev = c.strangerPrev
	}
	c.strangerPrev, c.strangerNext = nil, nil
}

// forgetStrangerLocked takes c out of the connections that have not
// authenticated, as it authenticates or closes: it leaves the eviction
// list and its auth timer stops (a pending timer would keep c alive
// until it fired). n.mu is held.
func (n *Node) forgetStrangerLocked(c *conn) {
	n.unauth.remove(c)
	if c.authTimer != nil {
		c.authTimer.Stop()
		c.authTimer = nil
	}
}

// authTimeout closes c if it has not authenticated within --auth-timeout,
// even when its reader is paused or blocked in a TLS handshake.
func (c *conn) authTimeout() {
	if c.authed.Load() {
		return
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.gone {
		return
	}
	msg := "not authenticated within " + c.n.cfg.Limits.AuthTimeout.String() + "; closing this connection"
	c.n.log.Debug("connection closed", "remote", c.remote, "why", msg)
	c.send(func(b []byte) []byte { return proto.AppendError(b, proto.WordNone, '?', msg) })
	c.flushAndClose()
	c.nc.SetReadDeadline(time.Now())
}

// maxRefusals is how many requests a connection that has not
// authenticated may send before it is closed: its answers must not let a
// stranger fill the node's buffers. Every request counts, refused, not
// parsed, or a step of I that proved nothing yet: an official client
// authenticates within two.
const maxRefusals = 16

// strangerRefusedLocked counts a request of c answered while c has not
// authenticated, and closes c at the maxRefusals-th. It reports whether
// c is finished. n.mu is held.
func (n *Node) strangerRefusedLocked(c *conn) bool {
	if c.role != auth.None {
		return false
	}
	if c.isClosed() {
		return true
	}
	if c.refusals++; c.refusals < maxRefusals {
		return false
	}
	c.send(func(b []byte) []byte {
		return proto.AppendError(b, proto.WordNone, '?', "too many requests before authenticating; closing this connection")
	})
	c.flushAndClose()
	return true
}

// connLimit is the answer to a connection over --max-conns or
// --max-conns-per-ip, "" when it may stay.
func (n *Node) connLimitLocked(ip string, evicted bool) string {
	lim := &n.cfg.Limits
	if !evicted && len(n.conns)-n.evicting >= lim.MaxConns {
		return "too many connections (" + strconv.Itoa(lim.MaxConns) + ", lockd --max-conns); retry later"
	}
	if lim.MaxConnsPerIP > 0 && n.perIP[ip] >= lim.MaxConnsPerIP {
		return "too many connections from " + ip + " (" + strconv.Itoa(lim.MaxConnsPerIP) + ", lockd --max-conns-per-ip); close some"
	}
	return ""
}

// byteSize writes a size the way the flags take it: 8MiB, 512MiB, 1GiB.
func byteSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return strconv.FormatInt(b>>30, 10) + "GiB"
	case b >= 1<<20:
		return strconv.FormatInt(b>>20, 10) + "MiB"
	case b >= 1<<10:
		return strconv.FormatInt(b>>10, 10) + "KiB"
	}
	return strconv.FormatInt(b, 10) + "B"
}
