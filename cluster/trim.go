package cluster

import (
	"runtime/debug"
	"time"
)

// After a mass release, an idle node would keep the memory the keys took
// for good: the Go runtime collects garbage when the heap grows, and a
// node that no longer allocates never grows it again; until a collection
// runs, the runtime keeps the heap it had (up to its goal, twice the
// live heap it last saw) and returns none of it to the OS. trimLoop
// watches the keys and waiters the engine holds, and once they fall to a
// quarter of a peak of at least trimMin, it runs one collection and
// returns the free room to the OS (debug.FreeOSMemory), on its own
// goroutine, once per such fall: never on a request's path. A plain
// runtime.GC was not enough: measured, the runtime's background
// scavenger returned nothing of 40 MB freed within 20 s. The engine has
// shrunk its index, key list, heaps and maps by then (engine's shrink),
// so what goes is most of what the keys took.
const (
	trimEvery = 250 * time.Millisecond
	trimMin   = 100_000
)

func (n *Node) trimLoop() {
	defer n.wg.Done()
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	peak := 0
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.mu.Lock()
		keys, waiters := n.core.Engine().Stats()
		n.mu.Unlock()
		size := keys + waiters
		peak = max(peak, size)
		if peak >= trimMin && size < peak/4 {
			n.log.Debug("returning memory to the OS after a mass release", "keys_and_waiters", size, "peak", peak)
			debug.FreeOSMemory()
			peak = size
		}
	}
}
