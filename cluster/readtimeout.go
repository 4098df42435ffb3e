package cluster

import (
	"errors"
	"net"
	"time"

	"github.com/lockd-io/lockd/proto"
)

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
type errReadBound struct {
	msg string
	lim int // the limit it hit, an index of LimitNames
}

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
	due, bound := d.due()
	now := time.Now()
	if !due.IsZero() && !now.Before(due) {
		return bound
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
func (d *deadlineReader) due() (time.Time, errReadBound) {
	lim := &d.c.n.cfg.Limits
	var due time.Time
	var why errReadBound
	if !d.c.authed.Load() {
		due = d.start.Add(lim.AuthTimeout)
		why = errReadBound{"not authenticated within " + lim.AuthTimeout.String() + "; closing this connection", limAuthTimeout}
	}
	if d.br.Buffered() > 0 {
		if d.partialSince.IsZero() {
			d.partialSince = time.Now()
		}
		if t := d.partialSince.Add(lim.LineTimeout); due.IsZero() || t.Before(due) {
			due = t
			why = errReadBound{"line not finished within " + lim.LineTimeout.String() + "; closing this connection", limLineTimeout}
		}
	}
	return due, why
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readBound returns the bound err reports, if it is one.
func readBound(err error) (errReadBound, bool) {
	if err == nil {
		return errReadBound{}, false
	}
	var bound errReadBound
	ok := errors.As(err, &bound)
	return bound, ok
}

// closeOverBound ends c, whose client overran a read bound, after
// applying the lines it had sent whole.
func (c *conn) closeOverBound(bound errReadBound, batch []item) {
	if bound.lim == limAuthTimeout {
		c.authExpired()
	} else {
		c.n.limitHit(bound.lim)
	}
	if len(batch) > 0 {
		c.n.apply(c, batch, nil)
	}
	c.n.log.Debug("connection closed", "remote", c.remote, "why", bound.msg)
	c.send(func(b []byte) []byte { return proto.AppendError(b, proto.WordNone, '?', bound.msg) })
	c.flushAndClose()
}
