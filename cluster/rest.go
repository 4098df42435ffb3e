package cluster

import (
	"errors"
	"time"
)

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
// a line (appendParsed, buffers.go) and its rare ends (closeLineTooLong,
// closeOverBound) are functions of their own, as is the timeout handling
// of deadlineReader.Read: serve's frame stays small, a blocked reader's
// stack leaves the start at the smallest size, and applying a request
// grows fewer readers' stacks.
