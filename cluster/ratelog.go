package cluster

import (
	"sync"
	"time"
)

// rateLog logs one line per interval, counting the ones it skipped, so a
// flood of refusals cannot flood the log.
type rateLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (r *rateLog) log(l interface {
	Warn(string, ...any)
}, msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last) < time.Second {
		r.skipped++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.last, r.skipped = now, 0
	r.mu.Unlock()
	if skipped > 0 {
		args = append(args, "similar_skipped", skipped)
	}
	l.Warn(msg, args...)
}
