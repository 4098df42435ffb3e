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
	rest         restClock // when the reader goes on in a new goroutine (readtimeout.go)
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

// A connection's reader applies its requests itself, deep in the core
// and the engine, and its goroutine's stack grows doing it; Go shrinks a
// stack only during a collection, and an idle node collects nothing. So
// a reader that has been idle for restAfter, with nothing buffered, goes
// on in a new goroutine, whose stack starts at the smallest size (see
// below), and the old one ends (readOn). An idle connection then holds
// one smallest stack (and no writer goroutine: outwriter.go).
//
// The cost is one timer per restAfter per connection that was active in
// it (the read deadline, armed lazily, as the bounds are), and one new
// goroutine per connection that goes idle; never anything per request.
//
// The stack the old goroutine grew goes back to the runtime, not to the
// OS: an idle node collects no garbage, so the runtime does not return
// it. After a wave of rests trimLoop does (trim.go).
const restAfter = 5 * time.Second

// errRest is what a reader gets when its connection has been idle for
// restAfter: it hands the connection to a new goroutine.
var errRest = errors.New("idle: go on in a new goroutine")

// restClock says when a connection's reader last rested.
type restClock struct {
	at     time.Time // when the reader may rest; zero: not armed
	mark   uint32    // conn.batches when at was armed
	rested uint32    // conn.batches when it last rested
	ever   bool      // it has rested
}

// armRest arms the rest when nothing is buffered, none is armed, and
// the connection applied a batch since the reader last rested: a reader
// that rested and was not used since has nothing to shed.
func (d *deadlineReader) armRest() {
	r := &d.rest
	if !r.at.IsZero() || d.br.Buffered() > 0 || r.ever && d.c.batches == r.rested {
		return
	}
	r.at = time.Now().Add(restAfter)
	r.mark = d.c.batches
}

// next is the deadline to arm: the earlier of the bound and the rest.
func (d *deadlineReader) next() time.Time {
	due, _ := d.due()
	if at := d.rest.at; !at.IsZero() && (due.IsZero() || at.Before(due)) {
		return at
	}
	return due
}

// restDue reports, when a read deadline fired at now, whether the reader
// is to rest now: idle since the rest was armed, nothing buffered. A
// rest armed on a connection that was used since is armed again.
func (d *deadlineReader) restDue(now time.Time) bool {
	r := &d.rest
	if r.at.IsZero() || now.Before(r.at) {
		return false
	}
	r.at = time.Time{}
	if d.c.batches == r.mark && d.br.Buffered() == 0 {
		r.rested, r.ever = d.c.batches, true
		d.c.n.rests.Add(1)
		return true
	}
	d.armRest()
	return false
}

// The reader blocks in a read with conn.serve's frame on its stack, and
// the runtime starts a goroutine (a rested reader's among them) with a
// stack the size of what the goroutines it last scanned used on average,
// plus a guard, rounded up to a power of two. With no idle writer
// goroutines (outwriter.go) to bring that average down, a large serve frame
// would double the stack of every rested reader. So what serve does for
// a line (appendParsed, readloop.go) and its rare ends (closeLineTooLong,
// closeOverBound) are functions of their own, as is the timeout handling
// of deadlineReader.Read: serve's frame stays small, a blocked reader's
// stack leaves the start at the smallest size, and applying a request
// grows fewer readers' stacks.
