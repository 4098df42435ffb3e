package engine

import (
	"container/heap"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Places and values. A semaphore's holder has a place, 1 to its limit,
// the lowest free at its grant, so that a resource can fence by place;
// any holder may have a value, given by its acquire and replaced by a
// renewal (an election's leader and its Proclaim). Both are kept beside
// the holders, in a map that is empty, and costs a length check, while
// no semaphore is held and no acquire carried a value: a lock's grant
// costs what it did before.

// holdInfo is what a holder has beside its token and lease.
type holdInfo struct {
	place int32
	value string
}

// infoOf is h's place and value.
func (e *Engine) infoOf(h *holder) holdInfo {
	if e.nholdInfo == 0 {
		return holdInfo{}
	}
	return e.holdInfo[h]
}

// setInfo records h's place and value; none forgets them.
func (e *Engine) setInfo(h *holder, hi holdInfo) {
	if hi == (holdInfo{}) {
		if e.nholdInfo > 0 {
			e.forgetInfo(h)
		}
		return
	}
	if e.holdInfo == nil {
		e.holdInfo = make(map[*holder]holdInfo)
	}
	e.holdInfo[h] = hi
	e.nholdInfo = len(e.holdInfo)
	e.holdInfoPeak = max(e.holdInfoPeak, e.nholdInfo)
}

// forgetInfo forgets the place and value of h, a holder that goes.
func (e *Engine) forgetInfo(h *holder) {
	delete(e.holdInfo, h)
	e.holdInfo = shrinkMap(e.holdInfo, &e.holdInfoPeak)
	e.nholdInfo = len(e.holdInfo)
}

// granted gives h, just granted a place of ks, its place if ks is a
// semaphore, and value.
func (e *Engine) granted(ks *keyState, h *holder, value string) holdInfo {
	var hi holdInfo
	if ks.limit() > 1 {
		hi.place = e.freePlace(ks, h)
	}
	hi.value = value
	e.setInfo(h, hi)
	return hi
}

// freePlace is the lowest place of semaphore ks that no holder but h
// has: a bitmap of the places taken, on the stack up to 1024 of them.
// Its cost is the key's holders, at most its limit.
func (e *Engine) freePlace(ks *keyState, h *holder) int32 {
	limit := ks.limit()
	var room [16]uint64
	taken := room[:]
	if limit > 64*len(room) {
		taken = make([]uint64, (limit+63)/64)
	}
	for o := range ks.holders {
		if o == h {
			continue
		}
		if p := int(e.infoOf(o).place); p >= 1 && p <= limit {
			taken[(p-1)/64] |= 1 << ((p - 1) % 64)
		}
	}
	for i, w := range taken {
		if w != ^uint64(0) {
			for b := 0; b < 64; b++ {
				if w&(1<<b) == 0 {
					if p := i*64 + b + 1; p <= limit {
						return int32(p)
					}
					return 0
				}
			}
		}
	}
	return 0
}

// waiterValue is the value wt's acquire carried, "" when none.
func (e *Engine) waiterValue(wt *waiter) string {
	if len(e.waitValue) == 0 {
		return ""
	}
	return e.waitValue[wt]
}

// setWaiterValue records the value wt's acquire carried.
func (e *Engine) setWaiterValue(wt *waiter, value string) {
	if value == "" {
		if len(e.waitValue) > 0 {
			delete(e.waitValue, wt)
		}
		return
	}
	if e.waitValue == nil {
		e.waitValue = make(map[*waiter]string)
	}
	e.waitValue[wt] = value
}

// MaxValueLen is the longest value a holder may have, in bytes.
const MaxValueLen = 1024

// ErrValueLen: a value longer than MaxValueLen.
var ErrValueLen = errors.New("value longer than " + strconv.Itoa(MaxValueLen) + " bytes")

// AcquireValue is AcquireSet whose grant gives the holder of every key
// value ("" for none): what Holder.Value and the Granted events say of
// it, until a RenewValue replaces it.
func (e *Engine) AcquireValue(now time.Time, keys []SetKey, lease, wait time.Duration, id, value string, w Waiter, out []Event) ([]Event, error) {
	if len(value) > MaxValueLen {
		return out, ErrValueLen
	}
	if len(keys) == 1 {
		k := keys[0]
		return e.acquire(now, k.Key, k.Limit, k.Mode, lease, wait, false, id, value, w, out)
	}
	return e.acquireSet(now, keys, lease, wait, false, id, value, w, out)
}

// TryAcquireValue is TryAcquireSet with a value, as AcquireValue.
func (e *Engine) TryAcquireValue(now time.Time, keys []SetKey, lease time.Duration, id, value string, w Waiter, out []Event) ([]Event, error) {
	if len(value) > MaxValueLen {
		return out, ErrValueLen
	}
	if len(keys) == 1 {
		k := keys[0]
		return e.acquire(now, k.Key, k.Limit, k.Mode, lease, 0, true, id, value, w, out)
	}
	return e.acquireSet(now, keys, lease, 0, true, id, value, w, out)
}

// RenewValue is Renew that also replaces the holder's value with value
// when set is true (an election's Proclaim); the Renewed event says the
// value the holder has after it.
func (e *Engine) RenewValue(now time.Time, key string, token uint64, lease time.Duration, value string, set bool, out []Event) ([]Event, error) {
	if len(value) > MaxValueLen {
		return out, ErrValueLen
	}
	out = e.Advance(now, out)
	if lease <= 0 || lease > e.cfg.MaxLease {
		return out, fmt.Errorf("%w: lease must be more than 0 and at most %g seconds (the node's longest lease)", ErrLeaseRange, e.cfg.MaxLease.Seconds())
	}
	ks := e.lookup(key)
	if ks == nil {
		return out, ErrNotHeld
	}
	h := ks.find(token)
	if h == nil {
		return out, ErrNotHeld
	}
	h.deadline = now.UnixNano() + int64(lease)
	heap.Fix(&e.leases, int(h.heapIdx))
	hi := e.infoOf(h)
	if set && hi.value != value {
		hi.value = value
		e.setInfo(h, hi)
	}
	return append(out, Event{Kind: Renewed, Key: key, Token: token, Lease: lease, Limit: ks.limit(), Mode: ks.mode(), Set: e.holderSet(h), Place: hi.place, Value: hi.value}), nil
}
