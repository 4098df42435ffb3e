package core

import (
	"container/heap"
	"slices"
	"strconv"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// ListSlice is how many keys one KeysSlice call scans for a key listing
// (K): short enough that the shell serves other requests in between.
const ListSlice = 1024

// listing is a key listing (K) being scanned: the first
// proto.MaxListKeys matching keys in byte order so far, and how many
// matched. Keys that change during the listing may be missed or, in the
// total, counted twice.
type listing struct {
	pattern string
	taken   int64 // when the K was taken up, unix nanoseconds
	cursor  int
	total   int
	top     keyHeap // the smallest matches so far, largest on top
	inTop   map[string]bool
}

// listKeys begins the listing of pattern on cn; Out.Scan asks the shell
// for its first slice (KeysSlice).
func (c *Core) listKeys(cn *conn, pattern string) {
	taken := c.taking.at
	if taken == 0 {
		taken = c.lastEvent.UnixNano()
	}
	c.taking.open = false // answered by KeysSlice, later
	cn.lists = append(cn.lists, &listing{pattern: pattern, taken: taken, cursor: engine.ScanStart, inTop: make(map[string]bool)})
	if len(cn.lists) == 1 {
		c.act(Action{Kind: ActScan, Conn: cn.id}, nil)
	}
}

// KeysSlice scans the next ListSlice keys of the oldest key listing of
// connection id, and answers it once its scan is done, or with a redirect
// when this node is no longer active. While id has a listing left to
// scan it asks for the next slice with Out.Scan; the shell lets other
// events in between.
func (c *Core) KeysSlice(now time.Time, id ConnID) {
	cn := c.conns[id]
	if cn == nil || len(cn.lists) == 0 {
		return
	}
	c.noteTime(now)
	l := cn.lists[0]
	if c.role != Active {
		c.send(cn, answered(proto.OpKeys, l.pattern, Moved).takenAt(l.taken), proto.AppendMoved(c.buf[:0], l.pattern, c.redirectTarget(now)))
	} else {
		if c.serving() { // (a paused active fires no deadline)
			c.advance(now)
		}
		l.cursor = c.eng.Scan(now, l.cursor, ListSlice, func(h engine.Holder, _ bool) { l.add(h.Key) })
		if l.cursor != 0 {
			c.act(Action{Kind: ActScan, Conn: id}, nil)
			return
		}
		keys := []string(l.top)
		slices.Sort(keys)
		fields := append([]string{strconv.Itoa(l.total)}, keys...)
		c.send(cn, answered(proto.OpKeys, l.pattern, OK).takenAt(l.taken), proto.AppendFields(c.buf[:0], proto.OpKeys, l.pattern, fields...))
	}
	cn.lists[0] = nil
	cn.lists = cn.lists[1:]
	if len(cn.lists) == 0 {
		cn.lists = nil
		return
	}
	c.act(Action{Kind: ActScan, Conn: id}, nil)
}

// add counts key if it matches, and keeps it if it is among the smallest.
func (l *listing) add(key string) {
	if !proto.MatchKeys(l.pattern, key) || l.inTop[key] {
		return
	}
	l.total++
	switch {
	case len(l.top) < proto.MaxListKeys:
		heap.Push(&l.top, key)
		l.inTop[key] = true
	case key < l.top[0]:
		delete(l.inTop, l.top[0])
		l.top[0] = key
		heap.Fix(&l.top, 0)
		l.inTop[key] = true
	}
}

// keyHeap is a max-heap of keys.
type keyHeap []string

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
