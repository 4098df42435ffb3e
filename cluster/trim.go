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
// runtime.GC is not enough: the runtime's background scavenger returns
// freed memory to the OS too slowly to count on. The engine has
// shrunk its index, key list, heaps and maps by then (engine's shrink),
// so what goes is most of what the keys took.
//
// Idle connections leave memory behind the same way: a reader that rests
// (readtimeout.go) frees the stack it grew applying requests, larger than its
// successor's, and the runtime keeps it: after a wave of connections
// that each made a request and went idle, those stacks nearly double
// what the idle connections hold. So once at least trimRests readers
// have rested since the last trim and a tick passes with none resting
// (the wave is over), trimLoop returns the free room to the OS too: a
// collection per trimRests readers rested at most, none while a wave of
// rests goes on, and none within restAfter of the last.
//
// So do the output buffers that a backlog of answers grew, which a
// connection drops as its reader rests (outWriter.shedOut): once trimShed
// bytes of them were dropped since the last trim, on the same terms.
//
// A burst of keys or waiters leaves the same behind it: the requests'
// lines, the buffers their connections grew to read them, and a heap
// goal twice the live heap. So once the engine's keys and waiters grew
// by trimMin or more since the fewest seen since the last trim, and a
// tick passes with their count unchanged (the burst is over), trimLoop
// returns the free room to the OS too: once per trimMin of growth at
// most, none while it goes on.
//
// And so do the releases the engine remembers for a release sent again
// (engine.ReleasedMemory, up to engine.ReleasedMax of them, a few MB with
// their keys): the engine forgets them only as later releases come, so
// after a burst of releases and none since it would keep the last ones
// for good. trimLoop has it forget them each tick, and once it gave back
// room for trimReleased releases or more, returns that to the OS.
const (
	trimEvery    = 250 * time.Millisecond
	trimMin      = 100_000
	trimRests    = 1000
	trimShed     = 32 << 20
	trimReleased = 16 << 10
)

func (n *Node) trimLoop() {
	defer n.wg.Done()
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	var tr trimmer
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-t.C:
			n.mu.Lock()
			keys, waiters := n.core.Engine().Stats()
			forgot := n.core.Engine().ForgetReleases(n.now())
			n.mu.Unlock()
			why := tr.tick(now, keys+waiters, n.rests.Load(), n.output.shed.Load())
			if why == "" && forgot >= trimReleased {
				why = "the releases remembered after a burst were forgotten"
			}
			if why != "" {
				n.log.Debug("returning memory to the OS", "after", why)
				debug.FreeOSMemory()
			}
		}
	}
}

// trimmer decides, a tick at a time, when trimLoop returns memory to the
// OS.
type trimmer struct {
	peak      int       // keys and waiters: the most since the last trim
	low       int       // keys and waiters: the fewest since the last trim
	lastSize  int       // keys and waiters at the last tick
	rests     uint64    // Node.rests at the last trim
	lastRests uint64    // Node.rests at the last tick
	shed      uint64    // Node.output.shed at the last trim
	lastShed  uint64    // Node.output.shed at the last tick
	trimmed   time.Time // the last trim that rests made
}

// tick takes the keys and waiters the engine holds at now, how many
// readers have rested so far and how many bytes of output buffers were
// shed, and says why memory is to be returned now, or "".
func (t *trimmer) tick(now time.Time, size int, rests, shed uint64) string {
	t.peak, t.low = max(t.peak, size), min(t.low, size)
	why := ""
	quiet := rests == t.lastRests && shed == t.lastShed && now.Sub(t.trimmed) >= restAfter
	switch {
	case t.peak >= trimMin && size < t.peak/4:
		why = "a mass release"
	case size-t.low >= trimMin && size == t.lastSize:
		why = "a burst of keys or waiters settled"
	case rests-t.rests >= trimRests && quiet:
		why = "idle connections rested"
		t.trimmed = now
	case shed-t.shed >= trimShed && quiet:
		why = "idle connections shed their output buffers"
		t.trimmed = now
	default:
		t.lastRests, t.lastShed, t.lastSize = rests, shed, size
		return ""
	}
	t.peak, t.low, t.lastSize = size, size, size
	t.rests, t.lastRests, t.shed, t.lastShed = rests, rests, shed, shed
	return why
}
