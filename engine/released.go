package engine

import (
	"hash/maphash"
	"time"
)

// A client that releases a lock and loses the answer (its connection
// drops, the node fails over) sends the release again. By then the token
// holds nothing, and "not held" would tell the client its lock was lost
// while it worked, which is false: it was released, by this very token.
// So the engine remembers, for a while, the tokens their holders
// released, and answers a release of one of them as done.
//
// Only releases are remembered: a lease that ran out was lost, and a
// late release of its token is told so.

// ReleasedMemory is how long a released token is remembered at least (a
// client re-sends a release for 5 seconds), unless more than
// ReleasedMax releases come in that time: then the oldest are forgotten
// sooner, which bounds the memory whatever the rate.
const (
	ReleasedMemory = 10 * time.Second
	ReleasedMax    = 1 << 16
)

// releasedSet holds the released tokens in two generations: cur, since
// curSince, and the one before it. A generation ends after
// ReleasedMemory or ReleasedMax entries, and the older one is dropped
// whole: a lookup costs two map reads, a release one write, and the
// memory is at most two generations.
type releasedSet struct {
	cur, old map[uint64]releasedToken
	curSince int64
}

// releasedToken is when a token was released (unix nanoseconds) and a
// hash of its key: a release names both.
type releasedToken struct {
	at      int64
	keyHash uint32
}

func (r *releasedSet) add(now int64, token uint64, keyHash uint32) {
	if r.cur == nil || now-r.curSince >= int64(ReleasedMemory) || len(r.cur) >= ReleasedMax {
		r.old, r.cur, r.curSince = r.cur, make(map[uint64]releasedToken), now
	}
	r.cur[token] = releasedToken{now, keyHash}
}

func (r *releasedSet) has(now int64, token uint64, keyHash uint32) bool {
	rt, ok := r.cur[token]
	if !ok {
		rt, ok = r.old[token]
	}
	return ok && rt.keyHash == keyHash && now-rt.at < int64(ReleasedMemory)
}

func (e *Engine) keyHash(key string) uint32 {
	return uint32(maphash.String(e.seed, key))
}

// WasReleased reports whether token released key (by Release, or by
// ApplyReleased on a standby) within the last ReleasedMemory.
func (e *Engine) WasReleased(now time.Time, key string, token uint64) bool {
	return e.released.has(now.UnixNano(), token, e.keyHash(key))
}

// ApplyReleased records, as replicated from the active, that token's
// holder released key, and frees its place as ApplyFree does.
func (e *Engine) ApplyReleased(now time.Time, key string, token uint64) {
	e.released.add(now.UnixNano(), token, e.keyHash(key))
	e.ApplyFree(key, token)
}
