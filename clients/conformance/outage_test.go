package conformance

import (
	"math"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Cases of what a client does when the cluster fails under it: a release
// whose answer was lost, a watch with no node to serve it, a wait through
// an outage, a redirect to a node it has down; and the checks of what a
// caller asks for that no failover would keep (a held lease too short),
// and of a node's status read into typed values.

func init() {
	cases = append(cases, outageCases...)
}

// away makes a scripted node go away as a killed process does: its
// connections close, and every dial is taken and closed at once.
func (s *scripted) away() {
	s.set(func(s *scripted) { s.onAccept = func(int) bool { return false } })
	for _, c := range s.openConns() {
		c.close()
	}
}

// back makes a scripted node that went away serve again.
func (s *scripted) back() {
	s.set(func(s *scripted) { s.onAccept = nil })
}

// pending fails the case if any of chs has a result: a call that
// returned while it should still wait.
func pending(t *testing.T, what string, chs ...<-chan res) {
	t.Helper()
	for _, ch := range chs {
		select {
		case r := <-ch:
			t.Fatalf("%s: %s", what, r)
		default:
		}
	}
}

// stillPending fails the case if any of chs has a result within d
// (pending, checked every 50 ms).
func stillPending(t *testing.T, d time.Duration, what string, chs ...<-chan res) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		pending(t, what, chs...)
		time.Sleep(50 * time.Millisecond)
	}
}

// ranOutUnavailable checks the result on ch of an acquire with a wait of
// a second that ran out with no node to serve it (when): unavailable, as
// no node said the key was busy, and not before the second.
func ranOutUnavailable(t *testing.T, d *driver, ch <-chan res, when string) {
	t.Helper()
	r := d.wait(ch, 5*time.Second)
	if r.ok() || r.errKind() != "unavailable" {
		t.Errorf("an acquire whose wait of 1 s ran out %s: %s, want error unavailable", when, r)
	}
	if r.ms() < 900*time.Millisecond {
		t.Errorf("an acquire with a wait of 1 s gave up after %s %s, before its wait ran out", r.ms(), when)
	}
}

// shortest matches how a client names the shortest held lease of a
// failure timeout of 1 s: 2 seconds, with its unit.
var shortest = regexp.MustCompile(`\b(2(\.0+)? ?s(econds?)?|2000 ?ms)\b`)

var outageCases = []testCase{
	{
		name:   "release_answer_lost",
		source: "proto/client/ops.go, Client.Release",
		rule:   "It returns nil when a node answers ok, also to a re-send after a connection dropped under an earlier one, and an error wrapping ErrNotHeld when the node answers that the token does not hold the key",
		run: func(t *testing.T, d *driver) {
			// The node applies the first send of a release and drops its
			// answer with the connection; the re-send is answered as lockd
			// answers a release it applied: ok, or, in the last round, as
			// a node that never knew the token: notheld.
			var tok uint64Counter
			n := startScripted(t)
			var drop bool
			again := "ok"
			n.set(func(s *scripted) {
				s.auto = func(l line) string {
					switch l.op {
					case "A":
						return "A " + l.key + " " + tok.next() + l.ref()
					case "N":
						return "N " + l.key + " ok"
					case "R":
						n.mu.Lock()
						first, word := drop, again
						drop = false
						n.mu.Unlock()
						if first {
							l.conn.close()
							return ""
						}
						return "R " + l.key + " " + word
					}
					return ""
				}
			})
			d.open([]string{n.addr}, nil)
			n.waitFor(5*time.Second, "two connections", func(s *scripted) bool { return len(s.openLocked()) >= 2 })
			n.settle()
			dropNext := func(word string) {
				n.mu.Lock()
				drop, again = true, word
				n.mu.Unlock()
			}
			a := d.must(acquireCmd("ra", 10*time.Second, 5*time.Second))
			dropNext("ok")
			if r := d.do(map[string]any{"cmd": "release", "key": "ra", "token": a.str("token")}); !r.ok() {
				t.Errorf("a release applied, its answer lost and the re-send answered ok: want released, got %s", r)
			}
			rs := n.got("R")
			if len(rs) != 2 || rs[0].text != rs[1].text || rs[0].conn == rs[1].conn {
				t.Errorf("want the release sent again, the same, on the other connection: %v", n.lines())
			}
			// A hold's release the same: the hold ends released.
			h := d.must(map[string]any{"cmd": "hold", "key": "rh", "lease_ms": 3000, "wait_ms": 5000})
			n.waitFor(5*time.Second, "a second connection", func(s *scripted) bool { return len(s.openLocked()) >= 2 })
			n.settle()
			dropNext("ok")
			if r := d.do(map[string]any{"cmd": "hold_release", "hold": h.num("hold")}); !r.ok() {
				t.Errorf("a hold's release applied, its answer lost and the re-send answered ok: want released, got %s", r)
			}
			d.waitEvent(3*time.Second, func(e res) bool {
				return e.str("event") == "lost" && e.num("hold") == h.num("hold") && e.str("reason") == "released"
			})
			// notheld stays notheld: a client does not guess.
			b := d.must(acquireCmd("rn", 10*time.Second, 5*time.Second))
			n.waitFor(5*time.Second, "a second connection", func(s *scripted) bool { return len(s.openLocked()) >= 2 })
			n.settle()
			dropNext("notheld")
			if r := d.do(map[string]any{"cmd": "release", "key": "rn", "token": b.str("token")}); r.errKind() != "notheld" {
				t.Errorf("a re-sent release answered notheld: want notheld, got %s", r)
			}
		},
	},
	{
		name:   "watch_stale_current",
		source: "proto/client/watch.go, Client.WatchEvents",
		rule:   "besides each state of key, it delivers a Stale event when the watch loses the cluster, and then the state it reads once it subscribes again, which says it is current again.",
		run: func(t *testing.T, d *driver) {
			n := startScripted(t)
			state := "- - 0"
			n.set(func(s *scripted) {
				s.auto = func(l line) string {
					switch l.op {
					case "L":
						n.mu.Lock()
						defer n.mu.Unlock()
						return "L " + l.key + " " + state
					case "U":
						return "U " + l.key + " ok"
					}
					return ""
				}
			})
			const ft = 300 * time.Millisecond
			d.open([]string{n.addr}, map[string]any{"failure_timeout_ms": ms(ft), "redial_ms": 300})
			w := d.sendSupported(map[string]any{"cmd": "watch", "key": "ws"})
			wr := d.wait(w, 5*time.Second)
			d.need(wr)
			if !wr.ok() {
				t.Fatalf("watch failed: %s", wr)
			}
			o := d.must(map[string]any{"cmd": "observe", "key": "ws"})
			wid, oid := wr.num("watch"), o.num("watch")
			of := func(id float64, kind string) func(res) bool {
				return func(e res) bool { return e.num("watch") == id && e.str("event") == kind }
			}
			d.waitEvent(3*time.Second, of(wid, "watch"))
			d.waitEvent(3*time.Second, of(oid, "leader"))
			// Serving, it is current: a while passes without word.
			time.Sleep(2 * ft)
			mark := d.eventCount()
			d.mu.Lock()
			for _, e := range d.events {
				if k := e.str("event"); k == "stale" || k == "current" {
					t.Errorf("a %s event while the node serves: %s", k, e)
				}
			}
			d.mu.Unlock()

			gone := time.Now()
			n.away()
			d.waitEventFrom(mark, 10*ft, of(wid, "stale"))
			d.waitEventFrom(mark, 10*ft, of(oid, "stale"))
			if took := time.Since(gone); took < ft {
				t.Errorf("stale %s after the node went away, before the failure timeout (%s)", took, ft)
			}

			mark = d.eventCount()
			n.mu.Lock()
			state = "7001 9 0 id=7001,node-b#1"
			n.mu.Unlock()
			n.back()
			d.waitEventFrom(mark, 10*time.Second, func(e res) bool {
				tk := holderTokens(e)
				return of(wid, "watch")(e) && len(tk) == 1 && tk[0] == "7001"
			})
			d.waitEventFrom(mark, 10*time.Second, func(e res) bool { return of(oid, "leader")(e) && e.str("value") == "node-b" })
			// In order: current, then the state there.
			d.mu.Lock()
			evs := d.events[mark:]
			d.mu.Unlock()
			for _, id := range []float64{wid, oid} {
				var kinds []string
				for _, e := range evs {
					if e.num("watch") == id {
						kinds = append(kinds, e.str("event"))
					}
				}
				if len(kinds) < 2 || kinds[0] != "current" {
					t.Errorf("watch %v once the node is back: want current, then the state there; got %v", id, kinds)
				}
			}
		},
	},
	{
		name:   "wait_through_outage",
		source: "proto/client/client.go, Outages",
		rule:   "An acquire that waits (every acquire but a try: Acquire, AcquireWith, Hold and Election.Campaign, with a wait or without) waits through an outage too ... until one serves it, its wait runs out or ctx ends ... an acquire whose wait runs out with no node back returns ErrUnavailable, not ErrTimeout",
		run: func(t *testing.T, d *driver) {
			var tok uint64Counter
			n := startScripted(t)
			n.set(func(s *scripted) { s.auto = granting(&tok) })
			d.open([]string{n.addr}, map[string]any{"failure_timeout_ms": 300, "redial_ms": 300})
			d.must(acquireCmd("before", 10*time.Second, 5*time.Second))
			n.away()
			acq := d.send(acquireCmd("wa", 10*time.Second, 0))
			bounded := d.send(acquireCmd("wb", 10*time.Second, 8*time.Second))
			short := d.send(acquireCmd("ws", 10*time.Second, time.Second))
			hold := d.send(map[string]any{"cmd": "hold", "key": "wh", "lease_ms": 3000})
			camp := d.send(campaignCmd("wc", "node-a", 3*time.Second))
			// An outage of 3.5 s: long past the failure timeout, and past
			// the 10 failure timeouts a call without a wait keeps asking.
			stillPending(t, 3500*time.Millisecond, "returned during the outage; it waits until its wait or its caller ends it", acq, bounded, hold, camp)
			n.back()
			for what, ch := range map[string]<-chan res{"acquire": acq, "acquire with a wait of 8 s": bounded, "hold": hold, "campaign": camp} {
				if r := d.wait(ch, 15*time.Second); !r.ok() {
					t.Errorf("%s once the node is back: %s", what, r)
				}
			}
			ranOutUnavailable(t, d, short, "in the outage")
		},
	},
	{
		name:   "wait_for_nodes_not_up_yet",
		source: "proto/client/client.go, Outages",
		rule:   "A client that has never reached any node waits so only while every node refuses the connection (nothing listens there yet: a cluster starting or restarting), and only for an acquire with a wait: one that waits forever returns ErrUnavailable at once",
		run: func(t *testing.T, d *driver) {
			// A client made while its only node is not up yet.
			var tok uint64Counter
			n, listen := scriptedNotYet(t)
			n.set(func(s *scripted) { s.auto = granting(&tok) })
			d.open([]string{n.addr}, map[string]any{"failure_timeout_ms": 300, "redial_ms": 300, "dial_timeout_ms": 500})
			start := time.Now()
			if r := d.do(acquireCmd("forever", 10*time.Second, 0)); r.ok() || r.errKind() != "unavailable" {
				t.Errorf("an acquire that waits forever, nothing listening at the client's only address: %s, want error unavailable at once", r)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("an acquire that waits forever on an address never reached gave up after %s, want at once", took)
			}
			bounded := d.send(acquireCmd("bounded", 10*time.Second, 8*time.Second))
			short := d.send(acquireCmd("short", 10*time.Second, time.Second))
			stillPending(t, 1500*time.Millisecond, "an acquire with a wait of 8 s returned while nothing listened yet; it waits for a node until its wait ends", bounded)
			listen()
			if r := d.wait(bounded, 15*time.Second); !r.ok() {
				t.Errorf("an acquire with a wait of 8 s, once the node listens: %s", r)
			}
			ranOutUnavailable(t, d, short, "while nothing listened")
		},
	},
	{
		name:   "moved_to_down_node",
		source: "proto/client/client.go, Liveness",
		rule:   "A redirect to a node this client has marked down dials that node at once, not at the next background redial",
		run: func(t *testing.T, d *driver) {
			// The active is killed and restarted and takes its role back:
			// the standby names it while the client still has it down.
			a, b := startScripted(t), startScripted(t)
			a.set(func(s *scripted) {
				s.auto = func(l line) string {
					if l.op == "Q" {
						return "Q " + l.key + " - - 0"
					}
					return ""
				}
			})
			b.set(func(s *scripted) {
				s.auto = func(l line) string { return "M " + l.key + " " + a.addr + l.ref() }
			})
			d.open([]string{a.addr, b.addr}, map[string]any{"failure_timeout_ms": 300, "redial_ms": 60000})
			for _, n := range []*scripted{a, b} {
				n.waitFor(5*time.Second, "a connection", func(s *scripted) bool { return len(s.openLocked()) >= 1 })
				n.settle()
			}
			a.away()
			a.mu.Lock()
			before := len(a.accepts)
			a.mu.Unlock()
			q := d.send(map[string]any{"cmd": "queue", "key": "mq"})
			b.waitLines("Q", 1, 5*time.Second)
			a.waitFor(2*time.Second, "a dial of the node the redirect names (the background redial is a minute away)", func(s *scripted) bool { return len(s.accepts) > before })
			a.back()
			r := d.wait(q, 10*time.Second)
			if !r.ok() {
				t.Fatalf("the queue, redirected to the node once it is back: %s", r)
			}
			if len(a.got("Q")) != 1 {
				t.Errorf("the node back should have served the queue: it got %v", a.lines())
			}
		},
	},
	{
		name:   "redirects_while_nodes_settle",
		source: "proto/client/client.go, Client",
		rule:   "Nodes started or restarted together take up to a failure timeout or two to agree, and the client follows them meanwhile",
		run: func(t *testing.T, d *driver) {
			// Two nodes that name each other as the active for 1.2 s, as
			// standbys restarted together may, then agree on a: longer
			// than ten paced redirects take, shorter than three failure
			// timeouts.
			var tok uint64Counter
			var settled atomic.Int64
			settled.Store(math.MaxInt64)
			a, b := startScripted(t), startScripted(t)
			grant := granting(&tok)
			bounce := func(other *scripted, serves bool) func(s *scripted) {
				return func(s *scripted) {
					s.auto = func(l line) string {
						switch {
						case l.op != "A":
							return grant(l)
						case time.Now().UnixNano() < settled.Load():
							return "M " + l.key + " " + other.addr + l.ref()
						case serves:
							return grant(l)
						}
						return "M " + l.key + " " + other.addr + l.ref()
					}
				}
			}
			a.set(bounce(b, true))
			b.set(bounce(a, false))
			d.open([]string{a.addr, b.addr}, map[string]any{"failure_timeout_ms": 600})
			for _, n := range []*scripted{a, b} {
				n.waitFor(5*time.Second, "a connection", func(s *scripted) bool { return len(s.openLocked()) >= 1 })
				n.settle()
			}
			settled.Store(time.Now().Add(1200 * time.Millisecond).UnixNano())
			r := d.wait(d.send(acquireCmd("settle", 10*time.Second, 5*time.Second)), 10*time.Second)
			if !r.ok() {
				t.Fatalf("an acquire redirected back and forth for 1.2 s, with a failure timeout of 600 ms, then served: %s", r)
			}
			if n := len(a.got("A")) + len(b.got("A")); n <= 10 {
				t.Errorf("the nodes got %d acquires: want more than ten redirects followed", n)
			}
		},
	},
	{
		name:   "hold_lease_too_short",
		source: "proto/client/hold.go, Client.MinHoldLease",
		rule:   "MinHoldLease is the shortest lease Hold takes: twice Options.FailureTimeout.",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, map[string]any{"failure_timeout_ms": 1000})
			r := d.do(map[string]any{"cmd": "hold", "key": "hs", "lease_ms": 30, "wait_ms": 1000})
			d.need(r)
			if r.errKind() != "invalid" || !shortest.MatchString(r.str("message")) {
				// A hold that took the key renews it every few
				// milliseconds: the campaign below would wait out the
				// driver's timeout behind it.
				t.Fatalf("a hold of 30 ms with a failure timeout of 1 s: want error invalid naming the shortest, 2 s with its unit: %s", r)
			}
			if r := d.do(campaignCmd("hs", "node-a", 1500*time.Millisecond)); r.errKind() != "invalid" {
				t.Errorf("a campaign with a lease of 1.5 s: want error invalid: %s", r)
			}
			if q := d.must(map[string]any{"cmd": "queue", "key": "hs"}); len(holderTokens(q)) != 0 {
				t.Errorf("a refused hold took the key: %s", q)
			}
			h := d.must(map[string]any{"cmd": "hold", "key": "hs", "lease_ms": 2000, "wait_ms": 1000})
			d.must(map[string]any{"cmd": "hold_release", "hold": h.num("hold")})
		},
	},
	{
		name:   "status_typed",
		source: "clients/README.md, Client behaviour",
		rule:   "Each reads a node's status (S) into typed values: numbers for counts and positions, booleans for flags, a list for the peers",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, nil)
			a := d.must(acquireCmd("st", 10*time.Second, 5*time.Second))
			s := d.must(map[string]any{"cmd": "status"})
			f, _ := s["fields"].(map[string]any)
			if f == nil {
				t.Fatalf("status: no fields: %s", s)
			}
			if v, ok := f["keys"].(float64); !ok || v != 1 {
				t.Errorf("keys: want the number 1, got %#v", f["keys"])
			}
			if v, ok := f["waiters"].(float64); !ok || v != 0 {
				t.Errorf("waiters: want the number 0, got %#v", f["waiters"])
			}
			if v, ok := f["uptime_ms"].(float64); !ok || v <= 0 {
				t.Errorf("uptime_ms: want a number above 0, got %#v", f["uptime_ms"])
			}
			for _, k := range []string{"sticky", "degraded"} {
				if v, ok := f[k].(bool); !ok || v {
					t.Errorf("%s: want the boolean false, got %#v", k, f[k])
				}
			}
			if tk, err := strconv.ParseUint(res(f).str("token"), 10, 64); err != nil || tk < mustU(t, a.str("token")) {
				t.Errorf("token: want the decimal string of a u64 at least the grant's %s, got %#v", a.str("token"), f["token"])
			}
			if _, err := strconv.ParseUint(res(f).str("seq"), 10, 64); err != nil {
				t.Errorf("seq: want the decimal string of a u64, got %#v", f["seq"])
			}
			if f["self"] != n.addr || f["role"] != "active" || f["active"] != n.addr {
				t.Errorf("self, role, active: want %s, active, %s: %s", n.addr, n.addr, s)
			}
			ps, _ := f["peers"].([]any)
			if len(ps) != 1 {
				t.Fatalf("peers: want a list of one node, got %#v", f["peers"])
			}
			p, _ := ps[0].(map[string]any)
			if p == nil || p["addr"] != n.addr || p["role"] != "active" || p["up"] != true {
				t.Errorf("peers[0]: want addr %s, role active, up true: %#v", n.addr, ps[0])
			}
		},
	},
}

func mustU(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a u64: %v", s, err)
	}
	return v
}
