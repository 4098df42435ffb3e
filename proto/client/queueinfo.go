package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockd-io/lockd/proto"
)

// QueueInfo is a Q or L answer read whole: the holders and waiters of
// proto.Queue, and what the answer says of shared holds, sets, places
// and values (proto's mode=, wmode=, set=, wset=, place= and value=
// words). A node that does not say leaves them zero.
type QueueInfo struct {
	proto.Queue
	// Shared says the key is held by readers (mode=shared): its holders
	// are readers, however many.
	Shared bool
	// HolderInfo and WaiterInfo go one for one with Queue.Holders and
	// Queue.Waiters, in their order.
	HolderInfo []HolderInfo
	WaiterInfo []WaiterInfo
}

// HolderInfo is what a Q or L answer says of one holder beyond its token
// and lease.
type HolderInfo struct {
	// Set is the id of the set the holder was granted with, as one of
	// its keys: the token of the set's first key (set=); 0 for a holder
	// of this key alone.
	Set uint64
	// Place is which place of a semaphore it holds, 1 to Limit (place=);
	// 0 when the answer does not say.
	Place int
	// Value is its value, decoded (value=): an election leader's.
	// "" when it has none.
	Value string
}

// WaiterInfo is what a Q or L answer says of one waiter beyond how long
// it has waited and where from.
type WaiterInfo struct {
	// Shared says it waits as a reader (wmode=).
	Shared bool
	// Set lists the keys of the set it waits for, this one among them,
	// in the order asked (wset=); nil for a waiter of this key alone.
	Set []string
}

// QueueInfo is Queue with what the answer says beyond proto.Queue: the
// key's mode, its holders' sets, places and values, and its waiters'
// modes and sets.
func (c *Client) QueueInfo(ctx context.Context, key string) (QueueInfo, error) {
	if err := checkKey("queue", key); err != nil {
		return QueueInfo{}, err
	}
	req := request{op: proto.OpQueue, key: key}
	a, cn, err := c.roundTrip(ctx, &req, true)
	if err != nil {
		return QueueInfo{}, callErr("queue", key, err)
	}
	qi, err := ParseQueueInfo(a)
	if err != nil {
		return qi, fmt.Errorf("queue %s: %s answered %w; check that client and server versions match", key, cn.addr, err)
	}
	return qi, nil
}

// ParseQueueInfo reads a Q or L answer as QueueInfo. Its Queue reads as
// Client.Queue's does: Limit 1 for a lock, where the wire leaves it out.
func ParseQueueInfo(a proto.Answer) (QueueInfo, error) {
	var qi QueueInfo
	shared := false
	for _, w := range a.Fields {
		if w == "mode=shared" {
			shared = true
		}
	}
	base, padded := a, shared && !hasLimitWord(a)
	if padded {
		// proto.ParseQueue refuses more holders than the limit, and a
		// reader key has no limit but MaxLimit: give it that to count
		// against, then read the key as the lock it is.
		base.Fields = append(append([]string(nil), a.Fields...), "limit="+strconv.Itoa(proto.MaxLimit))
	}
	q, err := proto.ParseQueue(base)
	if err != nil {
		return qi, err
	}
	if padded {
		q.Limit = 0
	}
	q.Limit = max(q.Limit, 1)
	qi.Queue, qi.Shared = q, shared
	qi.HolderInfo = make([]HolderInfo, len(q.Holders))
	qi.WaiterInfo = make([]WaiterInfo, len(q.Waiters))
	holder := func(word, tok string) (*HolderInfo, error) {
		t, err := strconv.ParseUint(tok, 10, 64)
		if err == nil {
			for i := range q.Holders {
				if q.Holders[i].Token == t {
					return &qi.HolderInfo[i], nil
				}
			}
		}
		return nil, fmt.Errorf("queue answer %s names no holder of the answer", strconv.Quote(word))
	}
	waiter := func(word, at string) (*WaiterInfo, error) {
		i, err := strconv.Atoi(at)
		if err != nil || i < 1 || i > len(q.Waiters) || at[0] == '+' {
			return nil, fmt.Errorf("queue answer %s names no waiter of the answer", strconv.Quote(word))
		}
		return &qi.WaiterInfo[i-1], nil
	}
	for _, w := range a.Fields[min(3, len(a.Fields)):] {
		name, val, ok := strings.Cut(w, "=")
		if !ok {
			continue
		}
		which, rest, _ := strings.Cut(val, ",")
		switch name {
		case "wmode":
			wi, err := waiter(w, which)
			if err != nil {
				return qi, err
			}
			wi.Shared = rest == "shared"
		case "wset":
			wi, err := waiter(w, which)
			if err != nil {
				return qi, err
			}
			if rest == "" {
				return qi, fmt.Errorf("queue answer %s lists no key", strconv.Quote(w))
			}
			wi.Set = strings.Split(rest, "+")
		case "set":
			hi, err := holder(w, which)
			if err != nil {
				return qi, err
			}
			if hi.Set, err = strconv.ParseUint(rest, 10, 64); err != nil || hi.Set == 0 {
				return qi, fmt.Errorf("queue answer %s: the set is not a token", strconv.Quote(w))
			}
		case "place":
			hi, err := holder(w, which)
			if err != nil {
				return qi, err
			}
			if hi.Place, err = strconv.Atoi(rest); err != nil || hi.Place < 1 || rest[0] == '+' {
				return qi, fmt.Errorf("queue answer %s: the place is not a whole number from 1", strconv.Quote(w))
			}
		case "value":
			hi, err := holder(w, which)
			if err != nil {
				return qi, err
			}
			if hi.Value, err = decodeValue(rest); err != nil {
				return qi, fmt.Errorf("queue answer %s: %w", strconv.Quote(w), err)
			}
		}
	}
	return qi, nil
}

// hasLimitWord reports whether a Q or L answer carries limit=N.
func hasLimitWord(a proto.Answer) bool {
	for _, w := range a.Fields {
		if strings.HasPrefix(w, "limit=") {
			return true
		}
	}
	return false
}
