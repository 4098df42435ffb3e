package cluster

import (
	"strconv"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// The caps on connections open at once, and the bounds on one that has
// not authenticated yet: the oldest is evicted to make room, it must
// authenticate within --auth-timeout, and only so many of its requests
// are answered.

// connLimitLocked is the answer to a connection over --max-conns or
// --max-conns-per-ip, and the limit it hit; "" when it may stay.
func (n *Node) connLimitLocked(ip string, evicted bool) (string, int) {
	lim := &n.cfg.Limits
	if !evicted && len(n.conns)-n.evicting >= lim.MaxConns {
		return "too many connections (" + strconv.Itoa(lim.MaxConns) + ", lockd --max-conns); retry later", limMaxConns
	}
	if lim.MaxConnsPerIP > 0 && n.perIP[ip] >= lim.MaxConnsPerIP {
		return "too many connections from " + ip + " (" + strconv.Itoa(lim.MaxConnsPerIP) + ", lockd --max-conns-per-ip); close some", limMaxConnsPerIP
	}
	return "", 0
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
