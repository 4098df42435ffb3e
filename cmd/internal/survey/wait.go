package survey

import (
	"context"
	"errors"
	"time"
)

// ErrNotActive is WaitActive's error when the node did not report itself
// active in time.
var ErrNotActive = errors.New("not active in time")

// WaitActive asks addr for its status every poll until it reports itself
// active, and says how long that took. Each question may take what is
// left of timeout (50ms at least). When timeout passes first, the error
// is ErrNotActive and last is the node's last answer, or why it gave
// none; when ctx ends first, it is ctx's error.
func WaitActive(ctx context.Context, ask StatusFunc, addr string, timeout, poll time.Duration) (waited time.Duration, last Answer, err error) {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		qctx, cancel := context.WithTimeout(ctx, max(time.Until(deadline), 50*time.Millisecond))
		st, err := ask(qctx, addr)
		cancel()
		if ctx.Err() != nil {
			return time.Since(start), last, ctx.Err()
		}
		now := time.Now()
		last = Answer{Asked: addr, Status: st, Err: err}
		if err == nil && st.Role == RoleActive {
			return now.Sub(start), last, nil
		}
		if !now.Before(deadline) {
			return now.Sub(start), last, ErrNotActive
		}
		select {
		case <-ctx.Done():
			return time.Since(start), last, ctx.Err()
		case <-time.After(min(poll, time.Until(deadline))):
		}
	}
}
