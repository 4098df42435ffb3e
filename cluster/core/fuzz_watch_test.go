package core

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// watchOut carries out a core's actions for FuzzWatchWithdraw: it checks
// every line the core sends and keeps each connection's last L line of
// each key. A paced one lets watch news through to a connection only
// when the fuzzer says it has room (room), and keeps the connections
// owed a WatchSlice (due); an unpaced one says at once that the news
// was written.
type watchOut struct {
	t    *testing.T
	c    *Core
	now  func() time.Time
	open map[ConnID]bool
	last map[ConnID]map[string]proto.Queue
	// tokens: the last token granted of each key, to release it.
	tokens map[string]uint64
	paced  bool
	room   map[ConnID]bool
	due    map[ConnID]bool
}

func (o *watchOut) apply(act Action) {
	switch act.Kind {
	case ActSend:
		s := act.Send
		if !o.open[s.Conn] {
			o.c.Undelivered(o.now(), s)
			return
		}
		a, err := proto.ParseAnswer(s.Line)
		if err != nil {
			o.t.Fatalf("conn %d was sent %q: %v", s.Conn, s.Line, err)
		}
		switch a.Kind {
		case proto.OpWatch:
			q, err := proto.ParseQueue(a)
			if err != nil {
				o.t.Fatalf("conn %d was sent the L line %q: %v", s.Conn, s.Line, err)
			}
			if o.last[s.Conn] == nil {
				o.last[s.Conn] = map[string]proto.Queue{}
			}
			o.last[s.Conn][a.Key] = q
		case proto.OpAcquire:
			if len(a.Fields) > 0 {
				if tok, err := proto.ParseToken(a.Fields[0]); err == nil {
					o.tokens[a.Key] = tok
				}
			}
		}
	case ActWatchDrain:
		if o.paced && !o.room[act.Conn] {
			o.due[act.Conn] = true
			return
		}
		o.c.WatchSlice(o.now(), act.Conn)
	}
}

// FuzzWatchWithdraw drives a single node's core with acquires that wait
// and are withdrawn (X), releases, watches (L, U), closes, the passing of
// time and, on a node that paces watch news, connections that have room
// or not. Every line it sends must parse, every L line as a queue; and
// once every watcher has room, the last L line each watcher got of each
// key it watches shows the key's state now: its holder and its waiters,
// in order.
func FuzzWatchWithdraw(f *testing.F) {
	f.Add(false, []byte{2, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1})
	f.Add(true, []byte{2, 0, 0, 0, 0, 0, 0, 1, 0, 7, 0, 0, 0, 1, 0, 1, 0, 1, 7, 0, 1})
	f.Add(true, []byte{2, 1, 1, 0, 2, 1, 4, 2, 1, 1, 2, 1, 6, 0, 0, 5, 1, 0, 7, 1, 1, 3, 1, 1})
	f.Fuzz(func(t *testing.T, paced bool, ops []byte) {
		if len(ops) > 3*256 {
			ops = ops[:3*256]
		}
		now := time.Unix(1_700_000_000, 0)
		c, err := New(Config{Self: "127.0.0.1:7070"}, now)
		if err != nil {
			t.Fatal(err)
		}
		wo := &watchOut{t: t, c: c, now: func() time.Time { return now }, open: map[ConnID]bool{}, last: map[ConnID]map[string]proto.Queue{}, tokens: map[string]uint64{},
			paced: paced, room: map[ConnID]bool{}, due: map[ConnID]bool{}}
		step := func() { drain(c, wo.apply) }
		const conns = 3
		for id := ConnID(1); id <= conns; id++ {
			c.ConnOpened(now, id, fmt.Sprintf("127.0.0.1:%d", 5000+id))
			wo.open[id] = true
		}
		step()
		next := ConnID(conns + 1)
		ids := 0
		req := func(id ConnID, line string) {
			r, err := proto.Parse([]byte(line))
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			c.Request(now, id, r)
			step()
		}
		live := func(n byte) ConnID { // one of the conns open, by n
			var open []ConnID
			for id, ok := range wo.open {
				if ok {
					open = append(open, id)
				}
			}
			slices.Sort(open)
			return open[int(n)%len(open)]
		}
		for i := 0; i+2 < len(ops); i += 3 {
			op, id, key := ops[i]%8, live(ops[i+1]), fmt.Sprintf("k%d", ops[i+2]%3)
			switch op {
			case 0: // a waiting acquire, with an id to withdraw it by
				ids++
				req(id, fmt.Sprintf("A %s 30 0 id=w%d", key, ids))
			case 1: // withdraw the newest waiter of this connection
				req(id, fmt.Sprintf("X %s w%d", key, ids))
			case 2:
				req(id, "L "+key)
			case 3:
				req(id, "U "+key)
			case 4:
				if tok, ok := wo.tokens[key]; ok {
					req(id, fmt.Sprintf("R %s %d", key, tok))
				}
			case 5: // a connection closes, another opens
				wo.open[id] = false
				delete(wo.last, id)
				step()
				c.ConnClosed(now, id)
				c.ConnOpened(now, next, fmt.Sprintf("127.0.0.1:%d", 5000+next))
				wo.open[next] = true
				next++
				step()
			case 6:
				now = now.Add(time.Duration(ops[i+2]) * 200 * time.Millisecond)
				c.Tick(now)
				step()
			case 7: // a paced connection's room comes or goes
				if paced {
					wo.room[id] = !wo.room[id]
					if wo.room[id] && wo.due[id] {
						wo.due[id] = false
						c.WatchSlice(now, id)
						step()
					}
				}
			}
		}
		if paced {
			for id := range wo.open {
				wo.room[id] = true
			}
			for id, due := range wo.due {
				if due && wo.open[id] {
					wo.due[id] = false
					c.WatchSlice(now, id)
					step()
				}
			}
		}
		for id, ok := range wo.open {
			if !ok {
				continue
			}
			for key := range c.conns[id].watches {
				got, ok := wo.last[id][key]
				if !ok {
					t.Fatalf("conn %d watches %s and was never sent its state", id, key)
				}
				want := c.queueOf(now, key)
				if got.Held != want.Held || got.Token != want.Token || got.Waiting != want.Waiting || !slices.Equal(waiterIDs(got), waiterIDs(want)) {
					t.Fatalf("conn %d's last state of %s: held %v token %d, %d waiting %v; the key now: held %v token %d, %d waiting %v",
						id, key, got.Held, got.Token, got.Waiting, waiterIDs(got), want.Held, want.Token, want.Waiting, waiterIDs(want))
				}
			}
		}
	})
}

func waiterIDs(q proto.Queue) []string {
	var ids []string
	for _, w := range q.Waiters {
		ids = append(ids, w.ID)
	}
	return ids
}
