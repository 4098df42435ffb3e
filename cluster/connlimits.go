package cluster

import (
	"net"
	"strconv"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// The caps on connections open at once, and the bounds on one that has
// not authenticated yet: it may be evicted to make room, it must
// authenticate within --auth-timeout, and only so many of its requests
// are answered.
//
// Who is evicted. A connection that has not authenticated is a
// stranger, and a stranger must never keep a client or a peer that
// proves itself out, neither at --max-conns nor at --max-conns-per-ip,
// where one flooding machine (or anyone behind the same NAT, or on a
// node's own machine) would otherwise lock out every legitimate caller
// from its address. So a new connection over either cap closes a
// stranger of the same scope (the node, or its IP) to make room, and is
// refused only when none is left: the cap is then full of connections
// that authenticated. Strangers that have made no progress go first,
// oldest first: a flood of idle sockets, reopened as fast as they are
// closed, never reaches a caller that has begun its handshake (a
// challenge answered, or its TLS handshake done), which goes only when
// no idle stranger is left, the one whose last step is oldest first.
// Every connection is in at most four lists, so each choice costs O(1).
//
// Strangers that have sent nothing. Whatever the order, a connection the
// node has taken and that has sent nothing yet cannot be told from a
// stranger's, and stays only until the cap of its scope has taken as
// many new ones: a flood that reopens each connection as it is closed
// brings hundreds of places round in milliseconds, less than a client on
// a busy machine may take between its connect and its first line. So
// where connections must authenticate, the kernel holds each one back
// until its client sends something, or for Limits.DeferAccept (Linux,
// deferAccept): a client's connection is taken with its first step in
// it, and is not evicted while a stranger that sent nothing is left;
// those are taken only once the wait is over, so a flood of them turns
// over once per wait for each connection it keeps open, not as fast as
// the node can close them. The kernel holds back as many as its listen
// backlog (net.core.somaxconn); past that it answers with SYN cookies
// and hands connections over at once, and elsewhere than on Linux there
// is no such wait: then the order above is what a client has.

// connLimitLocked makes room for a connection from ip over
// --max-conns or --max-conns-per-ip by evicting strangers, and returns
// the answer to a connection that may not stay, and the limit it hit;
// "" when it may. n.mu is held.
func (n *Node) connLimitLocked(ip string) (string, int) {
	lim := &n.cfg.Limits
	if len(n.conns)-n.evicting >= lim.MaxConns {
		if !n.evictLocked(&n.unauth, "too many connections") {
			n.limitHit(limMaxConns)
			return "too many connections (" + strconv.Itoa(lim.MaxConns) + ", lockd --max-conns); retry later", limMaxConns
		}
		n.limitHit(limMaxConns)
	}
	if ic := n.perIP[ip]; lim.MaxConnsPerIP > 0 && ic != nil && ic.n-ic.evicting >= lim.MaxConnsPerIP {
		if !n.evictLocked(&ic.strangers, "too many connections from "+ip) {
			n.limitHit(limMaxConnsPerIP)
			return "too many connections from " + ip + " (" + strconv.Itoa(lim.MaxConnsPerIP) + ", lockd --max-conns-per-ip); close some", limMaxConnsPerIP
		}
		n.limitHit(limMaxConnsPerIP)
	}
	return "", 0
}

// ipConns is what the node holds per remote IP: its connections open
// (evicting: those evicted, not dropped yet) and its strangers.
type ipConns struct {
	n, evicting int
	strangers   strangerLists
	watches     int // keys its connections watch (budgets.go)
}

// maxSpokeLook bounds the fresh strangers one eviction looks at for
// bytes sent; each is looked at once, as it moves to the engaged.
const maxSpokeLook = 64

// evictLocked closes the stranger of ls that is to make room, if there
// is one, and reports whether it did. A fresh stranger that has sent
// bytes, which its reader has not applied yet (a client's first step,
// a TLS client hello), is engaged, not evicted. n.mu is held.
func (n *Node) evictLocked(ls *strangerLists, why string) bool {
	for range maxSpokeLook {
		c := ls.fresh.head
		if c == nil || !c.hasSpoken() {
			break
		}
		n.engagedLocked(c)
	}
	c := ls.fresh.head
	if c == nil {
		c = ls.engaged.head
	}
	if c == nil {
		return false
	}
	n.forgetStrangerLocked(c)
	n.refusedLog.log(n.log, "connection closed", "remote", c.remote, "why", why+": one not authenticated makes room")
	c.evicted = true
	n.evicting++
	if ic := n.perIP[c.ip]; ic != nil {
		ic.evicting++
	}
	c.closeUnauthed(why + "; this one had not authenticated; closing it")
	return true
}

// hasSpoken reports whether c's client has sent anything: read by its
// reader or its TLS handshake, or waiting in its socket.
func (c *conn) hasSpoken() bool {
	if c.spoke.Load() {
		return true
	}
	if c.raw != nil && c.raw.unread() > 0 {
		c.spoke.Store(true)
		return true
	}
	return false
}

// spokeConn is the socket of a connection that has not authenticated,
// under its TLS handshake or its reader's wait for its first bytes,
// which notes that the client has sent something as it is read: a
// client hello before the handshake is done, a first line before the
// reader applies it.
type spokeConn struct {
	net.Conn
	c *conn
}

func (s spokeConn) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if n > 0 && !s.c.spoke.Load() {
		s.c.spoke.Store(true)
	}
	return n, err
}

// closeUnauthed closes c, which has not authenticated, saying why when
// it can. Before its writer may start (its reader has not run yet, or its
// TLS handshake is not done) the line is written straight to a plain TCP
// socket, as to a connection refused (a fresh socket's buffer takes it
// at once), and a TLS connection, which cannot be told anything, is
// closed at once, which ends its handshake. n.mu is held.
func (c *conn) closeUnauthed(msg string) {
	line := proto.AppendError(nil, proto.WordNone, '?', msg)
	if !c.out.isReady() {
		c.flushAndClose()
		if !c.tls {
			c.nc.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
			c.nc.Write(line)
		}
		c.out.closeSocket()
		return
	}
	c.write(line)
	c.flushAndClose()
}

// strangerLists are the strangers of a scope (the node, or one IP),
// oldest first: those that proved nothing yet (fresh), and those that
// made progress in a handshake (engaged), by their last step.
type strangerLists struct{ fresh, engaged strangers }

// strangers is a list of connections linked through the connections
// themselves, so that a list never keeps a closed connection, or its
// buffers, alive: a connection leaves as it authenticates or closes. A
// connection is in one list of the node's and one of its IP's (byIP).
// Guarded by n.mu.
type strangers struct {
	head, tail *conn
	byIP       bool
}

// strangerLinks are a connection's neighbours in one list.
type strangerLinks struct{ prev, next *conn }

func (l *strangers) links(c *conn) *strangerLinks {
	if l.byIP {
		return &c.ipLinks
	}
	return &c.nodeLinks
}

func (l *strangers) push(c *conn) {
	*l.links(c) = strangerLinks{prev: l.tail}
	if l.tail == nil {
		l.head = c
	} else {
		l.links(l.tail).next = c
	}
	l.tail = c
}

func (l *strangers) remove(c *conn) {
	lc := l.links(c)
	if lc.prev == nil && l.head != c {
		return // not in the list
	}
	if lc.prev == nil {
		l.head = lc.next
	} else {
		l.links(lc.prev).next = lc.next
	}
	if lc.next == nil {
		l.tail = lc.prev
	} else {
		l.links(lc.next).prev = lc.prev
	}
	*lc = strangerLinks{}
}

// of is the list of ls where c belongs.
func (ls *strangerLists) of(c *conn) *strangers {
	if c.engaged {
		return &ls.engaged
	}
	return &ls.fresh
}

// addStrangerLocked counts a new connection from c.ip and, if it must
// authenticate, lists it among the fresh strangers and starts its auth
// timer. n.mu is held.
func (n *Node) addStrangerLocked(c *conn) {
	ic := n.perIP[c.ip]
	if ic == nil {
		ic = &ipConns{strangers: strangerLists{strangers{byIP: true}, strangers{byIP: true}}}
		n.perIP[c.ip] = ic
	}
	ic.n++
	if c.authed.Load() {
		return
	}
	n.unauth.fresh.push(c)
	ic.strangers.fresh.push(c)
	c.listed = true
	c.authTimer = time.AfterFunc(n.cfg.Limits.AuthTimeout, c.authTimeout)
}

// engagedLocked says stranger c made progress in a handshake: it goes
// to the end of the engaged strangers, the last to be evicted. n.mu is
// held.
func (n *Node) engagedLocked(c *conn) {
	if !c.listed {
		return
	}
	ic := n.perIP[c.ip]
	n.unauth.of(c).remove(c)
	ic.strangers.of(c).remove(c)
	c.engaged = true
	n.unauth.engaged.push(c)
	ic.strangers.engaged.push(c)
}

// forgetStrangerLocked takes c out of the strangers, as it
// authenticates or closes: it leaves the eviction lists and its auth
// timer stops (a pending timer would keep c alive until it fired). n.mu
// is held.
func (n *Node) forgetStrangerLocked(c *conn) {
	if c.listed {
		c.listed = false
		n.unauth.of(c).remove(c)
		if ic := n.perIP[c.ip]; ic != nil {
			ic.strangers.of(c).remove(c)
		}
	}
	if c.authTimer != nil {
		c.authTimer.Stop()
		c.authTimer = nil
	}
}

// dropIPLocked uncounts c from its IP, as it is dropped. n.mu is held.
func (n *Node) dropIPLocked(c *conn) {
	ic := n.perIP[c.ip]
	if ic == nil {
		return
	}
	if c.evicted {
		ic.evicting--
	}
	ic.watches -= c.watches
	if ic.n--; ic.n <= 0 {
		delete(n.perIP, c.ip)
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
	if c.gone || c.isClosed() {
		return
	}
	msg := "not authenticated within " + c.n.cfg.Limits.AuthTimeout.String() + "; closing this connection"
	c.n.log.Debug("connection closed", "remote", c.remote, "why", msg)
	c.authExpired()
	c.closeUnauthed(msg)
	c.nc.SetReadDeadline(time.Now())
}

// authExpired counts c in limit_hits{auth_timeout}, once however many of
// the auth timer, the read deadline and the TLS handshake's see it.
func (c *conn) authExpired() {
	if c.expired.CompareAndSwap(false, true) {
		c.n.limitHit(limAuthTimeout)
	}
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
