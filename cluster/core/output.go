package core

import (
	"time"

	"github.com/lockd-io/lockd/proto"
)

// Outcome is what an answer says of the client request it answers, so
// that the shell counts requests without reading the answer's bytes.
type Outcome uint8

const (
	// NoOutcome: the line answers no client request (a replication
	// record, an answer to a peer's message).
	NoOutcome Outcome = iota
	Granted           // A key token
	TimedOut          // T key
	OK                // R/H/N ok, and the answers of Q, K, S
	NotHeld           // R/N notheld
	Moved             // M key addr
	Refused           // E key op: words
)

// Limit is the bound a refused acquire hit, for the limits-hit counter.
type Limit uint8

const (
	NoLimit           Limit = iota
	LimitKeys               // engine.Config.MaxKeys
	LimitWaiters            // engine.Config.MaxWaiters: the key's queue is full
	LimitTotalWaiters       // engine.Config.MaxTotalWaiters
	LimitConnWaiters        // MaxConnWaiters
)

// Send is one output for a connection: Line, one or more whole lines to
// write, and what they mean. An answer to a client request names the
// request's op and key (as the answer echoes them) and its outcome; a
// grant its token; a refused acquire names the limit it hit, if any.
// Replication records and answers to peers have NoOutcome. Line is valid
// until the shell takes the next Ready into the one that holds it.
type Send struct {
	Conn    ConnID
	Op      proto.Op // the op answered; 0 with NoOutcome
	Outcome Outcome
	Limit   Limit
	Key     string
	Token   uint64 // a grant's
	// AtOnce: the answer to the request the event being handled
	// carried (Request, RequestError, Refuse), given by that event.
	AtOnce bool
	// Waited is how long the request it answers waited for it, from
	// when the core took it up (a waiter's grant or timeout, a request
	// held back during a handoff, an answer held for the standbys or the
	// disk, a key listing scanned in slices); 0 with AtOnce, and for a
	// line that answers no client request.
	Waited time.Duration
	Line   []byte
}

// answer is what an answer says, before it has a connection and bytes.
type answer struct {
	op      proto.Op
	outcome Outcome
	limit   Limit
	key     string
	token   uint64
	// taken is when the core took up the request answered, in unix
	// nanoseconds, for an answer given after that event; 0: the event
	// being handled took it up.
	taken int64
}

// takenAt is a with the request it answers taken up at t (unix
// nanoseconds; 0 leaves it as the event being handled).
func (a answer) takenAt(t int64) answer {
	a.taken = t
	return a
}

// taking is the client request the event being handled carries, whose
// answer, given by that event, is AtOnce.
type taking struct {
	id   ConnID
	op   proto.Op
	key  string
	open bool // not answered yet
	// at is when a request held back and served now was taken up, in
	// unix nanoseconds; 0 for one read now.
	at int64
}

// take says the event being handled carries request (op, key) of id, as
// its answer will echo them, taken up at at (0: now).
func (c *Core) take(id ConnID, op proto.Op, key string, at int64) {
	if key == "" {
		key = proto.WordNone
	}
	c.taking = taking{id: id, op: errorOp(op), key: key, open: true, at: at}
}

// stamp sets what s says of the wait of the request it answers, given
// its answer a, as the core hands it to the shell.
func (c *Core) stamp(s *Send, a answer) {
	if a.outcome == NoOutcome {
		return
	}
	t := &c.taking
	now := c.lastEvent.UnixNano()
	switch {
	case a.taken != 0:
		s.Waited = time.Duration(max(now-a.taken, 0))
	case t.open && t.id == s.Conn && t.op == a.op && t.key == a.key:
		t.open = false
		if t.at != 0 {
			s.Waited = time.Duration(max(now-t.at, 0))
		} else {
			s.AtOnce = true
		}
	}
}

// grant is the answer that grants key to token.
func grant(key string, token uint64) answer {
	a := answered(proto.OpAcquire, key, Granted)
	a.token = token
	return a
}

// record is a line that answers no client request.
var record = answer{}

func answered(op proto.Op, key string, o Outcome) answer {
	if key == "" {
		key = proto.WordNone
	}
	return answer{op: op, outcome: o, key: key}
}

// errorOp is the op an E answer names for op: '?' when the line had none
// that could be read.
func errorOp(op proto.Op) proto.Op {
	if op < 'A' || op > 'Z' {
		return '?'
	}
	return op
}

func refused(op proto.Op, key string, lim Limit) answer {
	if key == "" {
		key = proto.WordNone
	}
	return answer{op: errorOp(op), outcome: Refused, limit: lim, key: key}
}
