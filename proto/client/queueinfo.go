package client

import (
	"context"
	"fmt"

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
// The words of readers, sets, places and values are proto.ParseQueue's
// reading of them (a set's keys and a holder's value percent-decoded),
// copied into HolderInfo and WaiterInfo.
func ParseQueueInfo(a proto.Answer) (QueueInfo, error) {
	q, err := proto.ParseQueue(a)
	if err != nil {
		return QueueInfo{}, err
	}
	q.Limit = max(q.Limit, 1)
	qi := QueueInfo{Queue: q, Shared: q.Shared}
	qi.HolderInfo = make([]HolderInfo, len(q.Holders))
	for i, h := range q.Holders {
		qi.HolderInfo[i] = HolderInfo{Set: h.Set, Place: h.Place, Value: h.Value}
	}
	qi.WaiterInfo = make([]WaiterInfo, len(q.Waiters))
	for i, w := range q.Waiters {
		qi.WaiterInfo[i] = WaiterInfo{Shared: w.Shared, Set: w.Set}
	}
	return qi, nil
}
