package conformance

import (
	"testing"
	"time"
)

// Cases of the client API beyond the connection rules (proto/doc.go: try-lock,
// refs, withdraw, watch): a client without it answers "unsupported" and the
// case is skipped as such.

func holderTokens(r res) []string {
	hs, _ := r["holders"].([]any)
	var out []string
	for _, h := range hs {
		if m, ok := h.(map[string]any); ok {
			out = append(out, res(m).str("token"))
		}
	}
	return out
}

func init() {
	cases = append(cases, extraCases...)
	cases = append(cases, electionCases...)
}

var extraCases = []testCase{
	{
		name:   "try_lock",
		source: fromWire + ", A: acquire",
		rule:   "wait is the longest the request stays in the key's queue; 0 waits forever, and - never queues: the try-lock, answered at once with A key token (granted) or T key (held by others).",
		run: func(t *testing.T, d *driver) {
			try := map[string]any{"cmd": "try", "key": "try", "lease_ms": 10000}
			// On the wire: the wait is "-".
			s := startScripted(t)
			s.set(func(s *scripted) {
				s.auto = func(l line) string {
					if l.op == "A" {
						return "T " + l.key + l.ref()
					}
					return ""
				}
			})
			d2 := startDriver(t, d.spec)
			d2.open([]string{s.addr}, nil)
			if r := d2.must(try); r["acquired"] != false {
				t.Errorf("a T answer to a try: want acquired false: %s", r)
			}
			if ls := s.got("A"); len(ls) != 1 || len(ls[0].args) < 2 || ls[0].args[1] != "-" {
				t.Errorf("a try is sent as A key lease - ...; got %v", s.lines())
			}
			// On a real node.
			n := startNode(t)
			d.open([]string{n.addr}, nil)
			a := d.must(try)
			if a["acquired"] != true || a.str("token") == "" {
				t.Fatalf("try of a free key: want acquired with a token: %s", a)
			}
			b := d.must(try)
			if b["acquired"] != false || b.ms() > time.Second {
				t.Errorf("try of a held key: want acquired false at once, got %s", b)
			}
			if q := d.must(map[string]any{"cmd": "queue", "key": "try"}); q.num("nwaiters") != 0 {
				t.Errorf("a try must never queue: %s", q)
			}
			d.must(map[string]any{"cmd": "release", "key": "try", "token": a.str("token")})
			if c := d.must(try); c["acquired"] != true {
				t.Errorf("try after the release: want acquired: %s", c)
			}
		},
	},
	{
		name:   "same_key_ref",
		source: fromWire + ", Pipelining and matching answers",
		rule:   "Acquires that carry ref=R are the exception, and are matched by their ref instead ... A client that puts ref= on every acquire (the official clients do) matches A, T, M and E-of-A answers that carry a ref by ref alone",
		run: func(t *testing.T, d *driver) {
			n := startScripted(t)
			d.open([]string{n.addr}, map[string]any{"conns_per_addr": 1}, "ref")
			first := d.send(acquireCmd("ref", 10*time.Second, 0))
			n.waitLines("A", 1, 5*time.Second)
			second := d.send(acquireCmd("ref", 10*time.Second, 0))
			ls := n.waitLines("A", 2, 5*time.Second)
			r0, r1 := ls[0].arg("ref"), ls[1].arg("ref")
			if r0 == "" || r1 == "" || r0 == r1 {
				t.Fatalf("every acquire carries a ref= of its own: %q and %q", ls[0].text, ls[1].text)
			}
			// The later acquire is granted first; it must not wait.
			ls[1].conn.send("A ref 3002 ref=" + r1)
			if r := d.wait(second, 5*time.Second); r.str("token") != "3002" {
				t.Errorf("the second acquire, answered first by its ref, should get token 3002: %s", r)
			}
			ls[0].conn.send("A ref 3001 ref=" + r0)
			if r := d.wait(first, 5*time.Second); r.str("token") != "3001" {
				t.Errorf("the first acquire should get token 3001: %s", r)
			}
		},
	},
	{
		name:   "withdraw_on_cancel",
		source: fromWire + ", X: withdraw",
		rule:   "a client that gives up waiting (its caller was interrupted, its deadline passed) sends X rather than leaving a waiter that would be granted and released for nothing. X withdraws only an acquire sent on the same connection.",
		run: func(t *testing.T, d *driver) {
			c := acquireCmd("wd", 10*time.Second, 0)
			c["cancel_after_ms"] = 300
			// On the wire: X key ID on the acquire's connection, ID its id=.
			s := startScripted(t)
			d.open([]string{s.addr}, map[string]any{"conns_per_addr": 1}, "withdraw")
			r := d.send(c)
			acq := s.waitLines("A", 1, 5*time.Second)[0]
			x := s.waitLines("X", 1, 5*time.Second)[0]
			if len(x.args) < 1 || x.key != "wd" || x.args[0] != acq.arg("id") || x.conn != acq.conn {
				t.Errorf("withdraw is X key ID on the acquire's connection, ID its id=: acquire %q, withdraw %q", acq.text, x.text)
			}
			x.conn.send("T wd" + acq.ref())
			x.conn.send("X wd ok")
			if res := d.wait(r, 5*time.Second); res.errKind() != "cancelled" {
				t.Errorf("an acquire cancelled after 300 ms: want error cancelled: %s", res)
			}
			// On a real node: the waiter leaves the queue at once, while
			// its connection stays open.
			n := startNode(t)
			d2 := startDriver(t, d.spec)
			d2.open([]string{n.addr}, nil, "withdraw")
			a := d2.must(acquireCmd("wd", 10*time.Second, 5*time.Second))
			if r := d2.do(c); r.errKind() != "cancelled" {
				t.Fatalf("an acquire cancelled after 300 ms: want error cancelled, got %s", r)
			}
			deadline := time.Now().Add(time.Second)
			for {
				q := d2.must(map[string]any{"cmd": "queue", "key": "wd"})
				if q.num("nwaiters") == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the cancelled acquire still waits on the node a second later; the client should withdraw it (X): %s", q)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// Released, the key passes to nobody: it is free.
			d2.must(map[string]any{"cmd": "release", "key": "wd", "token": a.str("token")})
			if q := d2.must(map[string]any{"cmd": "queue", "key": "wd"}); len(holderTokens(q)) != 0 {
				t.Errorf("the withdrawn acquire was granted after the release: %s", q)
			}
		},
	},
	{
		name:   "hold_renews",
		source: "proto/client/hold.go, Client.Hold",
		rule:   "Hold acquires key ... and then keeps it: it renews the lease in the background every third of lease, retrying a renewal that fails for as long as the lease lasts, until Release, a loss, MaxHold or Close.",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			// A failure timeout short enough for a short lease: at least
			// twice it.
			d.open([]string{n.addr}, map[string]any{"failure_timeout_ms": 600})
			h := d.must(map[string]any{"cmd": "hold", "key": "hold", "lease_ms": 1200, "wait_ms": 5000})
			// Three leases later it still holds the key, same token.
			time.Sleep(3600 * time.Millisecond)
			q := d.must(map[string]any{"cmd": "queue", "key": "hold"})
			if tk := holderTokens(q); len(tk) != 1 || tk[0] != h.str("token") {
				t.Errorf("a hold of lease 1.2 s should still hold the key 3.6 s later with its token %s: %s", h.str("token"), q)
			}
			if st := d.must(map[string]any{"cmd": "hold_state", "hold": h.num("hold")}); st["lost"] != false {
				t.Errorf("a renewed hold is not lost: %s", st)
			}
			d.must(map[string]any{"cmd": "hold_release", "hold": h.num("hold")})
			d.waitEvent(2*time.Second, func(e res) bool {
				return e.str("event") == "lost" && e.num("hold") == h.num("hold") && e.str("reason") == "released"
			})
			if q := d.must(map[string]any{"cmd": "queue", "key": "hold"}); len(holderTokens(q)) != 0 {
				t.Errorf("a released hold frees the key: %s", q)
			}
		},
	},
	{
		name:   "hold_lost_signal",
		source: "proto/client/hold.go, Held",
		rule:   "Done is closed the moment the lock can no longer be proven held: when the lease that the last acknowledged renewal started ... ends, when lockd says the token no longer holds the key",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, map[string]any{"failure_timeout_ms": 450})
			// Broken from outside: the node says notheld to the next renewal.
			h := d.must(map[string]any{"cmd": "hold", "key": "lost", "lease_ms": 900, "wait_ms": 5000})
			d.must(map[string]any{"cmd": "release", "key": "lost", "token": h.str("token")})
			e := d.waitEvent(3*time.Second, func(e res) bool { return e.str("event") == "lost" && e.num("hold") == h.num("hold") })
			if e.str("reason") != "notheld" {
				t.Errorf("a hold whose token was released elsewhere: want reason notheld: %s", e)
			}
			// The node freezes: no renewal is acknowledged, and the loss
			// is signalled by the end of the lease.
			h2 := d.must(map[string]any{"cmd": "hold", "key": "lost2", "lease_ms": 1200, "wait_ms": 5000})
			n.freeze()
			defer n.thaw()
			frozen := time.Now()
			e = d.waitEvent(5*time.Second, func(e res) bool { return e.str("event") == "lost" && e.num("hold") == h2.num("hold") })
			if e.str("reason") != "expired" {
				t.Errorf("a hold on a frozen node: want reason expired: %s", e)
			}
			if took := time.Since(frozen); took > 1500*time.Millisecond {
				t.Errorf("the loss of a hold of lease 1.2 s was signalled %s after the node froze; it must be by the lease's end", took)
			}
		},
	},
	{
		name:   "watch",
		source: fromWire + ", L: watch, U: unwatch",
		rule:   "L subscribes the connection to key's holders and waiters. It is answered at once with L key BODY ... and again with a fresh L key BODY after every change of the key's holders or waiters ... U ends the watch: U key ok, after which no L key line follows.",
		run: func(t *testing.T, d *driver) {
			// On the wire: L, its answers as events, U; after a drop, L
			// again on the other connection and its state delivered.
			s := startScripted(t)
			d.open([]string{s.addr}, nil)
			w := d.sendSupported(map[string]any{"cmd": "watch", "key": "wk"})
			l := s.waitLines("L", 1, 5*time.Second)[0]
			l.conn.send("L wk - - 0")
			wr := d.wait(w, 5*time.Second)
			d.need(wr)
			if !wr.ok() {
				t.Fatalf("watch failed: %s", wr)
			}
			sid := wr.num("watch")
			ofS := func(e res) bool { return e.str("event") == "watch" && e.num("watch") == sid }
			d.waitEvent(3*time.Second, func(e res) bool { return ofS(e) && len(holderTokens(e)) == 0 })
			l.conn.send("L wk 5001 9.5 0")
			d.waitEvent(3*time.Second, func(e res) bool { tk := holderTokens(e); return ofS(e) && len(tk) == 1 && tk[0] == "5001" })
			l.conn.close()
			l2 := s.waitLines("L", 2, 5*time.Second)[1]
			l2.conn.send("L wk 5002 9 1 0.1,127.0.0.1:9")
			d.waitEvent(3*time.Second, func(e res) bool {
				tk := holderTokens(e)
				return ofS(e) && len(tk) == 1 && tk[0] == "5002" && e.num("nwaiters") == 1
			})
			d.must(map[string]any{"cmd": "unwatch", "watch": sid})
			if u := s.waitLines("U", 1, 5*time.Second)[0]; u.key != "wk" || u.conn != l2.conn {
				t.Errorf("unwatch is U key on the watching connection: %q", u.text)
			}
			// On a real node.
			n := startNode(t)
			d = startDriver(t, d.spec)
			d.open([]string{n.addr}, nil)
			w2 := d.must(map[string]any{"cmd": "watch", "key": "wk"})
			id := w2.num("watch")
			of := func(e res) bool { return e.str("event") == "watch" && e.num("watch") == id }
			d.waitEvent(3*time.Second, func(e res) bool { return of(e) && len(holderTokens(e)) == 0 })
			mark := d.eventCount()
			a := d.must(acquireCmd("wk", 10*time.Second, 5*time.Second))
			d.waitEventFrom(mark, 3*time.Second, func(e res) bool {
				tk := holderTokens(e)
				return of(e) && len(tk) == 1 && tk[0] == a.str("token")
			})
			mark = d.eventCount()
			d.must(map[string]any{"cmd": "release", "key": "wk", "token": a.str("token")})
			d.waitEventFrom(mark, 3*time.Second, func(e res) bool {
				// After the grant's event, one with no holder.
				return of(e) && len(holderTokens(e)) == 0 && e.num("nwaiters") == 0
			})
			d.must(map[string]any{"cmd": "unwatch", "watch": id})
			before := d.eventCount()
			d.must(acquireCmd("wk", 10*time.Second, 5*time.Second))
			time.Sleep(300 * time.Millisecond)
			d.mu.Lock()
			evs := d.events[before:]
			d.mu.Unlock()
			for _, e := range evs {
				if of(e) {
					t.Errorf("a watch event after unwatch: %s", e)
				}
			}
		},
	},
	{
		name:   "watch_follows_moved",
		source: fromWire + ", L: watch, U: unwatch",
		rule:   "When the active gives its role up (a handoff, a demotion), every watch on it is answered M key addr and ends: a client that reads an M matching no outstanding request of its own, while it watches key, watches key again at addr, and delivers the state it first reads there.",
		run: func(t *testing.T, d *driver) {
			a, b := startScripted(t), startScripted(t)
			d.open([]string{a.addr}, nil)
			w := d.sendSupported(map[string]any{"cmd": "watch", "key": "wm"})
			l := a.waitLines("L", 1, 5*time.Second)[0]
			l.conn.send("L wm - - 0")
			wr := d.wait(w, 5*time.Second)
			d.need(wr)
			if !wr.ok() {
				t.Fatalf("watch failed: %s", wr)
			}
			id := wr.num("watch")
			// The active gives its role up: its watches get M and end.
			l.conn.send("M wm " + b.addr)
			lb := b.waitLines("L", 1, 5*time.Second)[0]
			lb.conn.send("L wm 6001 9 0")
			d.waitEvent(3*time.Second, func(e res) bool {
				tk := holderTokens(e)
				return e.str("event") == "watch" && e.num("watch") == id && len(tk) == 1 && tk[0] == "6001"
			})
		},
	},
	{
		name:   "watch_follows_failover",
		source: "proto/client/watch.go, Client.Watch",
		rule:   "The watch follows the active node: when the connection drops, or the active hands its role over, the client subscribes again where the role went and delivers the current state there first, so a reader sees the key as the new active has it.",
		run: func(t *testing.T, d *driver) {
			c := startCluster(t)
			d.open(c.addrs(), map[string]any{"failure_timeout_ms": ms(clusterFT)})
			w := d.must(map[string]any{"cmd": "watch", "key": "wf"})
			id := w.num("watch")
			of := func(e res) bool { return e.str("event") == "watch" && e.num("watch") == id }
			d.waitEvent(3*time.Second, of)
			c.nodes[0].kill()
			c.nodes[1].waitRole("active", "")
			a := d.must(acquireCmd("wf", 10*time.Second, 10*time.Second))
			d.waitEvent(10*time.Second, func(e res) bool {
				tk := holderTokens(e)
				return of(e) && len(tk) == 1 && tk[0] == a.str("token")
			})
		},
	},
}
