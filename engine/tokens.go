package engine

import (
	"time"
)

// nextToken issues the next token: larger than every token issued or
// observed before.
func (e *Engine) nextToken(now time.Time) uint64 {
	e.counter++
	if e.counter > counterMax {
		e.epoch = max(e.epoch+1, uint64(max(now.UnixMilli(), 1)))
		e.counter = 1
	}
	tok := e.epoch<<CounterBits | e.counter<<NodeBits | uint64(e.cfg.Node)
	e.last = tok
	if tok > e.seen {
		e.seen = tok
	}
	return tok
}

// LastToken is the highest token this engine has issued, 0 if none.
func (e *Engine) LastToken() uint64 { return e.last }

// HighWater is the highest token this engine knows of, issued here or
// observed from elsewhere.
func (e *Engine) HighWater() uint64 { return e.seen }

// Observe records a token issued elsewhere (by a previous or a competing
// active). If it is above every token issued here and belongs to this
// engine's epoch or a later one, the epoch moves past it, so every later
// token here is larger than it and than every other token of its epoch,
// seen or not. Tokens at or below the last one issued here (a standby
// echoing this node's own tokens) change nothing.
//
// Observe reports false, changing nothing, when the token's epoch is more
// than Config.MaxEpochAhead ahead of now: forged, or from a clock that is
// far ahead. Taking it would push every later token here past the wall
// clock (near 2^64, past wrapping). The caller logs it, with the sender.
func (e *Engine) Observe(now time.Time, token uint64) bool {
	if token>>CounterBits > uint64(max(now.UnixMilli(), 1))+uint64(e.cfg.MaxEpochAhead/time.Millisecond) {
		return false
	}
	if token > e.seen {
		e.seen = token
	}
	if token > e.last && token>>CounterBits >= e.epoch {
		e.epoch = max(token>>CounterBits+1, uint64(max(now.UnixMilli(), 1)))
		e.counter = 0
	}
	return true
}

// Raise records token as known, whatever the clock says: a token this
// node read back from its own disk was issued, so every later token must
// be above it even when the clock stepped back (Succeed then starts the
// epoch past it). Unlike Observe it trusts the token and leaves the epoch
// to Succeed.
func (e *Engine) Raise(token uint64) {
	e.seen = max(e.seen, token)
}

// Succeed starts a new epoch above every token this engine has issued or
// observed. A node calls it when it becomes active, so that its tokens
// exceed those of the node it replaces, including tokens that node issued
// in its epoch after the last change that was replicated here.
func (e *Engine) Succeed(now time.Time) {
	e.epoch = max(e.epoch+1, e.seen>>CounterBits+1, uint64(max(now.UnixMilli(), 1)))
	e.counter = 0
}
