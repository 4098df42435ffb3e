package engine

import (
	"container/heap"
	"slices"
	"time"
)

// DelayGhosts gives every ghost d more grace: the node did not serve for
// d (it was stopped, or paused until its peers were heard again), so no
// client could claim its place meanwhile. A client that re-sent its
// acquire while the node did not run finds its place kept.
func (e *Engine) DelayGhosts(d time.Duration) {
	if d <= 0 || len(e.ghostWait) == 0 {
		return
	}
	// By heap position, not map order: the same heap every run.
	ghosts := make([]*waiter, 0, len(e.ghostWait))
	for wt := range e.ghostWait {
		if wt.heapIdx >= 0 {
			ghosts = append(ghosts, wt)
		}
	}
	slices.SortFunc(ghosts, func(a, b *waiter) int { return int(a.heapIdx) - int(b.heapIdx) })
	for _, wt := range ghosts {
		e.waits[wt.heapIdx].deadline += int64(d)
		heap.Fix(&e.waits, int(wt.heapIdx))
	}
}
