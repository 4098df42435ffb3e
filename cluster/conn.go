package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// The kernel's send buffer of an accepted connection. Left to itself,
// Linux grows it up to 4 MiB (net.ipv4.tcp_wmem) for a peer that does
// not read: some fifty states of a 90 KB key for each watcher that
// stopped reading, all copied into the kernel before the node sees that
// the watcher has no room, while its other clients wait. A client's
// answers are short lines and a watch state is one key's, so 256 KiB
// (the kernel doubles it) costs them no speed and bounds what each
// connection pins in the kernel. A peer's replication stream carries
// snapshots: its connection gets 4 MiB once it speaks as a peer.
const (
	clientSendBuffer = 256 << 10
	peerSendBuffer   = 4 << 20
)

// conn is one accepted connection: a client, a peer's heartbeat link, or a
// standby's replication stream.
type conn struct {
	n        *Node
	id       uint64
	tcp      *net.TCPConn // the TCP socket (under TLS when it is on), nil when not TCP
	nc       net.Conn
	remote   string
	ip       string // remote IP, for --max-conns-per-ip
	accepted time.Time

	// authed: role is Client or more (read by the reader without n.mu).
	authed atomic.Bool
	// expired: counted as closed by --auth-timeout.
	expired atomic.Bool
	// spoke: its client has sent bytes (connlimits.go's hasSpoken).
	spoke atomic.Bool
	tls   bool

	// Guarded by n.mu.
	role     auth.Role
	hs       auth.Handshake
	refusals int // requests refused before it authenticated
	// While c has not authenticated (connlimits.go): its places in the
	// node's and its IP's strangers (listed), whether it made progress
	// in a handshake, and the timer that closes it at --auth-timeout.
	nodeLinks, ipLinks strangerLinks
	listed, engaged    bool
	authTimer          *time.Timer
	gone               bool
	evicted            bool // closed to make room for a new connection
	// watches: the keys it watches, as the core last said (budgets.go).
	watches int

	// peer: it carries peer messages, not client requests (stats.go).
	peer atomic.Bool
	// The core's ActScan and ActFeed (carry.go): the slices of its key
	// listings, or of the snapshot it streams to a standby.
	scan, feed duty

	// For the request duration (reader only): batches read, and when the
	// batch being applied was read (since n.base), if it is timed.
	batches uint32
	timed   bool
	readAt  time.Duration

	// out owns what is written to c (outwriter.go).
	out outWriter
	// raw: the socket for raw reads and writes, on Linux (over TLS, only
	// for hasSpoken's look at what waits unread).
	raw *rawIO
}

func newConn(n *Node, id uint64, nc net.Conn) *conn {
	c := &conn{n: n, id: id, nc: nc, remote: nc.RemoteAddr().String()}
	c.ip = c.remote
	if h, _, err := net.SplitHostPort(c.remote); err == nil {
		c.ip = h
	}
	c.raw = rawOf(nc)
	c.tcp, _ = nc.(*net.TCPConn)
	c.tls = n.tlsConfig != nil
	sock, direct := socketOf(nc, c.raw, c.tls)
	c.out.init(&n.output, c, sock, direct)
	c.role = n.gate.open
	c.authed.Store(c.role >= auth.Client)
	c.accepted = time.Now()
	return c
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
			tc.SetWriteBuffer(clientSendBuffer)
		}
		n.mu.Lock()
		if n.closing {
			n.mu.Unlock()
			nc.Close()
			continue
		}
		n.nextConnID++
		c := newConn(n, n.nextConnID, nc)
		// At a limit, make room by closing a connection that has not
		// proven who it is (connlimits.go).
		if why, _ := n.connLimitLocked(c.ip); why != "" {
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
		n.applyMu.Lock() // the Readies carried out read n.conns
		n.conns[c.id] = c
		n.applyMu.Unlock()
		n.addStrangerLocked(c)
		n.core.ConnOpened(n.now(), core.ConnID(c.id), c.remote)
		// Added under the mutex, before shutdown (which sets closing
		// under it) can start waiting. The reader starts the writer.
		n.wg.Add(1)
		n.mu.Unlock()
		go c.readLoop()
	}
}

// handshakeTLS runs the server side of TLS on c, bounded by the
// authentication timeout, and gives c the role of its client certificate.
func (c *conn) handshakeTLS(cfg *tls.Config) bool {
	n := c.n
	tc := tls.Server(spokeConn{c.nc, c}, cfg)
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Limits.AuthTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			c.authExpired()
		}
		n.refusedLog.log(n.log, "TLS handshake failed", "remote", c.remote, "err", err.Error())
		c.nc.Close()
		return false
	}
	n.mu.Lock()
	c.nc = tc
	c.out.useSocket(netSocket{tc})
	if r := auth.CertRole(tc.ConnectionState()); r > c.role {
		c.role = r
		c.authed.Store(r >= auth.Client)
		if r >= auth.Client {
			n.forgetStrangerLocked(c)
		}
	}
	if !c.authed.Load() {
		n.engagedLocked(c)
	}
	n.mu.Unlock()
	return true
}

// isClosed reports whether nothing more can be written to c: an answer
// for it would be lost.
func (c *conn) isClosed() bool { return c.out.isClosed() }

// flushAndClose writes what is queued, then closes.
func (c *conn) flushAndClose() { c.out.flushAndClose() }

// write queues b, and reports false when c is closed: b is lost.
func (c *conn) write(b []byte) bool { return c.out.queue(b, nil) }

// send queues the line fn writes: for the shell's own answers (limits,
// authentication); the core's come through carry.go's send.
func (c *conn) send(fn func([]byte) []byte) { c.write(fn(nil)) }

// limitClosed: c's writer closed it over a limit.
func (c *conn) limitClosed(hit int, why string) {
	c.n.limitHit(hit)
	c.n.refusedLog.log(c.n.log, "connection closed", "remote", c.remote, "why", why)
}

// watchRoom: c wrote what it held when watch news waited for it.
func (c *conn) watchRoom() { c.n.watchSlice(c) }

// dropConn forgets c: its waiters leave their queues.
func (n *Node) dropConn(c *conn) {
	c.flushAndClose()
	c.nc.SetReadDeadline(time.Now())
	n.mu.Lock()
	if c.gone {
		n.mu.Unlock()
		return
	}
	c.gone = true
	n.forgetStrangerLocked(c)
	if c.evicted {
		n.evicting--
	}
	n.dropIPLocked(c)
	n.applyMu.Lock() // the Readies carried out read n.conns
	delete(n.conns, c.id)
	n.applyMu.Unlock()
	if n.connGone != nil {
		close(n.connGone)
		n.connGone = nil
	}
	n.core.ConnClosed(n.now(), core.ConnID(c.id))
	n.unlock(nil)
}
