package client

import (
	"strconv"
	"strings"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// An AcquireOption changes what AcquireWith, Hold and TryAcquire ask for.
// The zero value changes nothing.
type AcquireOption struct {
	apply func(*acquireOptions)
}

// acquireOptions is what a list of AcquireOption asked for.
type acquireOptions struct {
	limit    int
	limitSet bool
	wait     time.Duration
	waitSet  bool
	name     string
	nameSet  bool
	id       string // a whole id, set by Election
	maxHold  time.Duration
	shared   bool
	value    string // the holder's value (value=V), set by Election
}

// Limit makes an acquire take one of n places of key, a semaphore: up to
// n hold it at once, each with a token and a lease of its own, renewed
// and released by that token as a lock is; the next acquire waits in the
// same FIFO queue. Limit(1), like no option, is a lock. The first
// acquire of a key sets its limit; while the key is held or waited on, an
// acquire with another limit is refused with an error matching
// ErrLimitMismatch.
func Limit(n int) AcquireOption {
	return AcquireOption{func(o *acquireOptions) { o.limit, o.limitSet = n, true }}
}

// Wait bounds how long an acquire waits for the key: up to d, then it
// fails with an error matching ErrTimeout. Wait(0) does not wait: it is
// the try-lock of TryAcquire, granted at once or failing at once with an
// error matching ErrHeld (and ErrTimeout), queued never. Without Wait,
// Hold waits until its ctx ends; AcquireWith takes Wait in place of its
// wait argument; TryAcquire refuses it.
func Wait(d time.Duration) AcquireOption {
	return AcquireOption{func(o *acquireOptions) { o.wait, o.waitSet = max(d, 0), true }}
}

// Name says who acquires, to whoever looks at the key's holders and
// waiters (Client.Queue, Client.Watch, lockctl queues), for this acquire
// only: it replaces Options.Name in the acquire's id. It is cleaned and
// cut as Options.Name is (at most MaxNameLen bytes).
func Name(s string) AcquireOption {
	return AcquireOption{func(o *acquireOptions) { o.name, o.nameSet = s, true }}
}

// Shared makes an acquire take the key as a reader (proto's
// mode=shared): any number of readers hold a key at once, never beside a
// writer (an acquire without Shared). The queue is FIFO-fair: a reader
// never passes a writer queued before it, and when a writer releases,
// the readers queued behind it are granted together, each with a token
// of its own. Shared with Limit(n), n > 1, is refused: a semaphore's
// places are all alike.
func Shared() AcquireOption {
	return AcquireOption{func(o *acquireOptions) { o.shared = true }}
}

// MaxHold caps how long Hold keeps renewing the lock: d after the grant
// the lock's last lease ends (the last renewal asks for no more than
// what is left of d) and the Held is done with an error matching
// ErrMaxHold. So a holder whose work hangs cannot keep the lock forever.
// Without MaxHold, Hold renews until Release or a loss. Only Hold reads
// it.
func MaxHold(d time.Duration) AcquireOption {
	return AcquireOption{func(o *acquireOptions) { o.maxHold = d }}
}

func gatherOptions(op, key string, opts []AcquireOption) (acquireOptions, error) {
	if len(opts) == 0 {
		// The defaults, valid: returned before o, which the options'
		// functions make the compiler place on the heap.
		return acquireOptions{limit: 1}, nil
	}
	o := acquireOptions{limit: 1}
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&o)
		}
	}
	if o.limit < 1 || o.limit > proto.MaxLimit {
		return o, argErrorf("%s %s: limit %d is out of range: a key allows 1 (a lock) to %d holders at once", op, key, o.limit, proto.MaxLimit)
	}
	if o.shared && o.limit > 1 {
		return o, argErrorf("%s %s: Shared and Limit(%d) do not go together: a semaphore's places are all alike; take Shared for a reader of a lock, or Limit alone for a semaphore", op, key, o.limit)
	}
	if o.waitSet && o.wait > proto.MaxSeconds*time.Second {
		return o, argErrorf("%s %s: wait %s is out of range: at most %d seconds (leave Wait out to wait forever)", op, key, o.wait, proto.MaxSeconds)
	}
	if o.maxHold < 0 {
		return o, argErrorf("%s %s: MaxHold %s is negative: give how long the hold may renew itself, or leave MaxHold out", op, key, o.maxHold)
	}
	return o, nil
}

// idFor is the id of one acquire: the client's own (acquireID) unless the
// options name the acquire, or give the whole id.
func (c *Client) idFor(o acquireOptions) string {
	switch {
	case o.id != "":
		return o.id
	case o.nameSet:
		rnd := c.idPrefix[strings.LastIndexByte(c.idPrefix, proto.IDSep)+1:]
		n := strconv.FormatUint(c.ids.Add(1), 36)
		if name := cleanName(o.name); name != "" {
			return name + string(proto.IDSep) + rnd + "-" + n
		}
		return rnd + "-" + n
	}
	return c.acquireID()
}
