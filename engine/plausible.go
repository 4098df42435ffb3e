package engine

import "time"

// Plausible reports whether token could have been issued by a node whose
// clock agrees with now within MaxEpochAhead: its epoch is not further
// ahead. A token that is not plausible comes from a broken clock or a
// forger, and must not enter the state: a node that later promotes would
// start its epoch past it, and tokens near 2^64 would wrap.
func (e *Engine) Plausible(now time.Time, token uint64) bool {
	return token>>CounterBits <= uint64(max(now.UnixMilli(), 1))+uint64(e.cfg.MaxEpochAhead/time.Millisecond)
}
