package core

import "github.com/lockd-io/lockd/proto"

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
// until the Ready that holds it is handed back (Advance).
type Send struct {
	Conn    ConnID
	Op      proto.Op // the op answered; 0 with NoOutcome
	Outcome Outcome
	Limit   Limit
	Key     string
	Token   uint64 // a grant's
	Line    []byte
}

// answer is what an answer says, before it has a connection and bytes.
type answer struct {
	op      proto.Op
	outcome Outcome
	limit   Limit
	key     string
	token   uint64
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
