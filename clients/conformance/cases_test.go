package conformance

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
	"github.com/lockd-io/lockd/proto/client/porttest"
)

// A case proves one rule on one client.
type testCase struct {
	name string
	// rule is the sentence the case proves, quoted from where it is
	// written (the client behaviour in clients/README.md, the protocol in
	// proto/doc.go, proto/client's documentation); " ... " leaves words
	// out.
	rule string
	// source says where rule is written: a file of the repository, then
	// the part of it.
	source string
	run    func(t *testing.T, d *driver)
}

// Where rules are written: each source names a file of the repository
// first, in which TestRulesQuoted finds the rule's words.
const (
	fromSpec = "clients/README.md, Client behaviour"
	fromWire = "proto/doc.go"
)

// ms is a duration as a driver's _ms field.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func acquireCmd(key string, lease, wait time.Duration) map[string]any {
	return map[string]any{"cmd": "acquire", "key": key, "lease_ms": ms(lease), "wait_ms": ms(wait)}
}

// gaps returns the time between each of ts and the one before.
func gaps(ts []time.Time) []time.Duration {
	var g []time.Duration
	for i := 1; i < len(ts); i++ {
		g = append(g, ts[i].Sub(ts[i-1]))
	}
	return g
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// ruleRelease is the release rule of the client behaviour, which two
// cases prove.
const ruleRelease = "A release is re-sent for 5 seconds, every 200 ms, so that even if the connection is down at the moment of release, the lock does not stay stuck on the server longer than needed (the lease would reclaim it in the end, but this hands it to the next waiter sooner)."

var cases = []testCase{
	{
		name:   "two_conns_single_addr",
		source: fromSpec,
		rule:   "One persistent connection per address, managed in the background. If only one address is given, two connections to that node are kept, so that one dropping for a moment does not interrupt service.",
		run: func(t *testing.T, d *driver) {
			one := startScripted(t)
			d.open([]string{one.addr}, nil)
			one.waitFor(5*time.Second, "two connections from one client given one address", func(s *scripted) bool { return len(s.openLocked()) >= 2 })
			one.settle()
			if n := len(one.openConns()); n != 2 {
				t.Errorf("a client given one address keeps 2 connections to it, not %d", n)
			}
			// One of them drops: service goes on at once on the other.
			one.set(func(s *scripted) { s.auto = granting(&uint64Counter{}) })
			one.openConns()[0].close()
			r := d.must(acquireCmd("k", 10*time.Second, 5*time.Second))
			if r.ms() > 2*time.Second {
				t.Errorf("acquire took %s while one of two connections was down; the other should have served at once", r.ms())
			}
			// And with two addresses, one connection each.
			a, b := startScripted(t), startScripted(t)
			d2 := startDriver(t, d.spec)
			d2.open([]string{a.addr, b.addr}, nil)
			for _, s := range []*scripted{a, b} {
				s.waitFor(5*time.Second, "a connection from a client given two addresses", func(s *scripted) bool { return len(s.openLocked()) >= 1 })
				s.settle()
				if n := len(s.openConns()); n != 1 {
					t.Errorf("a client given two addresses keeps one connection to each, not %d", n)
				}
			}
		},
	},
	{
		name:   "round_robin",
		source: fromSpec,
		rule:   "Connections are chosen round-robin.",
		run: func(t *testing.T, d *driver) {
			// Only the active serves, so a client sends to the connections
			// of the node that served last: three of them here.
			var tok uint64Counter
			n := startScripted(t)
			n.set(func(s *scripted) { s.auto = granting(&tok) })
			d.open([]string{n.addr}, map[string]any{"conns_per_addr": 3})
			n.waitFor(5*time.Second, "three connections", func(s *scripted) bool { return len(s.openLocked()) >= 3 })
			n.settle()
			const calls = 12
			for i := range calls {
				d.must(acquireCmd("rr"+strconv.Itoa(i), 10*time.Second, 5*time.Second))
			}
			per := map[*sconn]int{}
			for _, l := range n.got("A") {
				per[l.conn]++
			}
			for i, c := range n.openConns() {
				if got := per[c]; got < 3 || got > 5 {
					t.Errorf("connection %d of 3 carried %d of %d sequential acquires; round-robin gives each about %d", i, got, calls, calls/3)
				}
			}
		},
	},
	{
		name:   "dropped_node_left_out",
		source: fromSpec,
		rule:   "A node whose connection dropped is left out automatically, and reconnection is retried in the background every 3 seconds.",
		run: func(t *testing.T, d *driver) {
			var tok uint64Counter
			a, b := startScripted(t), startScripted(t)
			for _, n := range []*scripted{a, b} {
				n.set(func(s *scripted) { s.auto = granting(&tok) })
			}
			d.open([]string{a.addr, b.addr}, nil)
			for _, n := range []*scripted{a, b} {
				n.waitFor(5*time.Second, "a connection", func(s *scripted) bool { return len(s.openLocked()) >= 1 })
				n.settle()
			}
			a.set(func(s *scripted) { s.onAccept = func(int) bool { return false } })
			a.openConns()[0].close()
			for i := range 6 {
				r := d.must(acquireCmd("out"+strconv.Itoa(i), 10*time.Second, 5*time.Second))
				if r.ms() > time.Second {
					t.Errorf("acquire %d took %s with one node down; the client should leave it out and use the other at once", i, r.ms())
				}
			}
			if n := len(a.got("A")); n != 0 {
				t.Errorf("the node whose connection dropped got %d acquires; it should be left out until it is back", n)
			}
		},
	},
	{
		name:   "redial_every_3s",
		source: fromSpec,
		rule:   "A node whose connection dropped is left out automatically, and reconnection is retried in the background every 3 seconds.",
		run: func(t *testing.T, d *driver) {
			a, b := startScripted(t), startScripted(t)
			d.open([]string{a.addr, b.addr}, nil)
			a.waitFor(5*time.Second, "a connection", func(s *scripted) bool { return len(s.openLocked()) >= 1 })
			// From now on, a takes each dial and closes it at once.
			a.set(func(s *scripted) { s.onAccept = func(int) bool { return false } })
			dropped := time.Now()
			a.openConns()[0].close()
			a.waitFor(4500*time.Millisecond, "a redial within 4.5 s of the drop", func(s *scripted) bool { return len(s.accepts) >= 2 })
			a.waitFor(4500*time.Millisecond, "a second redial within 4.5 s of the first", func(s *scripted) bool { return len(s.accepts) >= 3 })
			a.mu.Lock()
			ts := append([]time.Time{dropped}, a.accepts[1:3]...)
			a.mu.Unlock()
			for i, g := range gaps(ts) {
				if g < 2500*time.Millisecond || g > 4500*time.Millisecond {
					t.Errorf("redial %d came %s after the one before; the rule is every 3 s", i+1, g)
				}
			}
		},
	},
	{
		name:   "pipelined_out_of_order",
		source: fromSpec,
		rule:   "Requests are pipelined. The next request may be sent without waiting for the answer, and answers may come back in a different order from the requests: the client matches each answer to its request by the echoed (op, key).",
		run: func(t *testing.T, d *driver) {
			n := startScripted(t)
			d.open([]string{n.addr}, map[string]any{"conns_per_addr": 1})
			first := d.send(acquireCmd("p1", 10*time.Second, 0))
			ls := n.waitLines("A", 1, 5*time.Second)
			second := d.send(acquireCmd("p2", 10*time.Second, 0))
			queue := d.send(map[string]any{"cmd": "queue", "key": "p3"})
			// Both sent with p1 unanswered: pipelined.
			n.waitFor(5*time.Second, "the second acquire and the queue while the first is unanswered", func(s *scripted) bool {
				return len(s.gotLocked("A")) >= 2 && len(s.gotLocked("Q")) >= 1
			})
			ls = n.got("A")
			if ls[0].conn != ls[1].conn {
				t.Fatalf("with conns_per_addr 1 both acquires should share one connection")
			}
			// A waiting acquire delays no answer: Q first, then p2, then p1.
			q := n.got("Q")[0]
			q.conn.send("Q p3 - - 0")
			if r := d.wait(queue, 5*time.Second); !r.ok() {
				t.Errorf("queue of p3, answered while two acquires wait, failed: %s", r)
			}
			ls[1].conn.send("A p2 2002" + ls[1].ref())
			r2 := d.wait(second, 5*time.Second)
			ls[0].conn.send("A p1 2001" + ls[0].ref())
			r1 := d.wait(first, 5*time.Second)
			if r1.str("token") != "2001" || r2.str("token") != "2002" {
				t.Errorf("answers matched to the wrong requests: p1 got token %q (want 2001), p2 %q (want 2002)", r1.str("token"), r2.str("token"))
			}
		},
	},
	{
		name:   "same_op_key_in_order",
		source: fromSpec,
		rule:   "Several requests with the same (op, key) are matched in the order they were sent.",
		run: func(t *testing.T, d *driver) {
			n := startScripted(t)
			d.open([]string{n.addr}, map[string]any{"conns_per_addr": 1})
			first := d.send(map[string]any{"cmd": "renew", "key": "s", "token": "11", "lease_ms": 5000})
			n.waitLines("N", 1, 5*time.Second)
			second := d.send(map[string]any{"cmd": "renew", "key": "s", "token": "12", "lease_ms": 5000})
			ls := n.waitLines("N", 2, 5*time.Second)
			if ls[0].conn != ls[1].conn {
				t.Fatalf("with conns_per_addr 1 both renewals should share one connection")
			}
			// Answers in send order: the first is refused, the second ok.
			ls[0].conn.send("N s notheld")
			ls[1].conn.send("N s ok")
			r1, r2 := d.wait(first, 5*time.Second), d.wait(second, 5*time.Second)
			if r1.errKind() != "notheld" || !r2.ok() {
				t.Errorf("two renewals of one key: the first answer belongs to the first sent (want notheld, then ok); got %s and %s", r1, r2)
			}
		},
	},
	{
		name:   "acquire_moves_on_drop",
		source: fromSpec,
		rule:   "If the connection drops during an acquire, the client switches to the next connection automatically.",
		run: func(t *testing.T, d *driver) {
			var tok uint64Counter
			a, b := startScripted(t), startScripted(t)
			// Whichever node gets the acquire first drops it; the other grants.
			var dropper *scripted
			for _, n := range []*scripted{a, b} {
				n.set(func(s *scripted) {
					s.auto = func(l line) string {
						if l.op != "A" {
							return ""
						}
						a.mu.Lock() // one lock decides for both nodes
						first := dropper == nil
						if first {
							dropper = s
						}
						mine := dropper == s
						a.mu.Unlock()
						if mine {
							l.conn.close()
							return ""
						}
						return "A " + l.key + " " + tok.next() + l.ref()
					}
				})
			}
			d.open([]string{a.addr, b.addr}, nil)
			r := d.must(acquireCmd("mv", 10*time.Second, 8*time.Second))
			if r.str("token") == "" {
				t.Errorf("acquire moved to the other connection should return its grant: %s", r)
			}
			if r.ms() > 3*time.Second {
				t.Errorf("the acquire took %s to move; it should switch at once", r.ms())
			}
		},
	},
	{
		name:   "error_only_when_all_tried",
		source: fromSpec,
		rule:   "An error is reported only when every registered connection has been tried and none is available.",
		run: func(t *testing.T, d *driver) {
			// One node refuses every dial, the other serves: no error.
			var tok uint64Counter
			live := startScripted(t)
			live.set(func(s *scripted) { s.auto = granting(&tok) })
			dead := porttest.Reserve(t).Addr
			d.open([]string{dead, live.addr}, map[string]any{"dial_timeout_ms": 500})
			for i := range 3 {
				d.must(acquireCmd("e"+strconv.Itoa(i), 10*time.Second, 5*time.Second))
			}
			// Two nodes that each drop the acquire, then go away (every
			// dial taken and closed at once): the error comes, and only
			// after both were tried.
			x, y := startScripted(t), startScripted(t)
			for _, n := range []*scripted{x, y} {
				n.set(func(s *scripted) {
					s.auto = func(l line) string {
						if l.op == "A" {
							s.away()
						}
						return ""
					}
				})
			}
			d2 := startDriver(t, d.spec)
			d2.open([]string{x.addr, y.addr}, map[string]any{"dial_timeout_ms": 500})
			x.waitFor(5*time.Second, "a connection", func(s *scripted) bool { return len(s.openLocked()) >= 1 })
			y.waitFor(5*time.Second, "a connection", func(s *scripted) bool { return len(s.openLocked()) >= 1 })
			// An acquire waits through an outage until its wait runs out.
			r := d2.wait(d2.send(acquireCmd("gone", 10*time.Second, 2*time.Second)), 20*time.Second)
			if r.ok() || r.errKind() != "unavailable" {
				t.Errorf("with every node gone the acquire should fail as unavailable: %s", r)
			}
			if len(x.got("A")) == 0 || len(y.got("A")) == 0 {
				t.Errorf("the error came before every connection was tried: first node got %d acquires, second %d", len(x.got("A")), len(y.got("A")))
			}
			// Nothing listening anywhere: unavailable too.
			d3 := startDriver(t, d.spec)
			d3.open([]string{porttest.Reserve(t).Addr, porttest.Reserve(t).Addr}, map[string]any{"dial_timeout_ms": 500})
			if r := d3.do(acquireCmd("none", 10*time.Second, time.Second)); r.errKind() != "unavailable" {
				t.Errorf("no node listening: want error unavailable, got %s", r)
			}
		},
	},
	{
		name:   "release_resent_200ms_5s",
		source: fromSpec,
		rule:   ruleRelease,
		run: func(t *testing.T, d *driver) {
			n := startScripted(t)
			d.open([]string{n.addr}, nil)
			// The node never answers R: the client re-sends it.
			rel := d.send(map[string]any{"cmd": "release", "key": "rel", "token": "42"})
			d.wait(rel, 15*time.Second)
			time.Sleep(400 * time.Millisecond) // a re-send past 5 s would show now
			ls := n.got("R")
			var ts []time.Time
			for _, l := range ls {
				if l.key != "rel" || l.args[0] != "42" {
					t.Fatalf("release sent as %q, want R rel 42", l.text)
				}
				ts = append(ts, l.at)
			}
			if len(ts) < 18 || len(ts) > 32 {
				t.Fatalf("release sent %d times; every 200 ms for 5 s is about 25", len(ts))
			}
			if m := median(gaps(ts)); m < 150*time.Millisecond || m > 300*time.Millisecond {
				t.Errorf("releases re-sent every %s (median); the rule is every 200 ms", m)
			}
			if span := ts[len(ts)-1].Sub(ts[0]); span < 4300*time.Millisecond || span > 5600*time.Millisecond {
				t.Errorf("releases re-sent over %s; the rule is for 5 s", span)
			}
		},
	},
	{
		name:   "release_while_down",
		source: fromSpec,
		rule:   ruleRelease,
		run: func(t *testing.T, d *driver) {
			var tok uint64Counter
			n := startScripted(t)
			n.set(func(s *scripted) { s.auto = granting(&tok) })
			d.open([]string{n.addr}, map[string]any{"redial_ms": 300})
			n.waitFor(5*time.Second, "two connections", func(s *scripted) bool { return len(s.openLocked()) >= 2 })
			// The lock to release, acquired while the node serves.
			a := d.must(acquireCmd("down", 10*time.Second, 5*time.Second))
			// Every connection drops and dials are refused for a second.
			n.set(func(s *scripted) { s.onAccept = func(int) bool { return false } })
			for _, c := range n.openConns() {
				c.close()
			}
			rel := d.send(map[string]any{"cmd": "release", "key": "down", "token": a.str("token")})
			time.Sleep(time.Second)
			n.set(func(s *scripted) { s.onAccept = nil })
			r := d.wait(rel, 10*time.Second)
			if !r.ok() {
				t.Errorf("a release sent while the node was down for 1 s should reach it once it is back: %s", r)
			}
			if len(n.got("R")) == 0 {
				t.Errorf("the node never got the release")
			}
		},
	},
	{
		name:   "reconnects_after_restart",
		source: fromSpec,
		rule:   "A node whose connection dropped is left out automatically, and reconnection is retried in the background every 3 seconds.",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			// A short redial: the 3 s period itself is redial_every_3s's.
			d.open([]string{n.addr}, map[string]any{"redial_ms": 200})
			a := d.must(acquireCmd("rs", 10*time.Second, 5*time.Second))
			n.restart()
			n.waitRole("active", "")
			r := d.must(acquireCmd("rs2", 10*time.Second, 5*time.Second))
			if r.ms() > 3*time.Second {
				t.Errorf("the first acquire after the node restarted took %s; with redial_ms 200 the client is back well within a second", r.ms())
			}
			if tokenLess(r.str("token"), a.str("token")) {
				t.Errorf("a token after the restart (%s) is smaller than one before (%s)", r.str("token"), a.str("token"))
			}
		},
	},
	{
		name:   "acquire_waits_across_failover",
		source: fromSpec,
		rule:   "If the connection drops during an acquire, the client switches to the next connection automatically.",
		run: func(t *testing.T, d *driver) {
			c := startCluster(t)
			d.open(c.addrs(), map[string]any{"failure_timeout_ms": ms(clusterFT)})
			a := d.must(acquireCmd("fo", 30*time.Second, 5*time.Second))
			waiting := d.send(acquireCmd("fo", 30*time.Second, 0))
			for range 100 {
				if q := d.must(map[string]any{"cmd": "queue", "key": "fo"}); q.num("nwaiters") == 1 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			c.nodes[0].kill()
			c.nodes[1].waitRole("active", "")
			// The lock survived the failover; its release on the new
			// active passes the key to the acquire that moved there.
			d.must(map[string]any{"cmd": "release", "key": "fo", "token": a.str("token")})
			r := d.wait(waiting, 15*time.Second)
			if !r.ok() {
				t.Fatalf("the waiting acquire should move to the new active and be granted after the release: %s", r)
			}
			if !tokenLess(a.str("token"), r.str("token")) {
				t.Errorf("the token granted after the failover (%s) must be larger than the one before (%s)", r.str("token"), a.str("token"))
			}
		},
	},
	{
		name:   "follows_moved",
		source: fromWire + ", Answers at a glance",
		rule:   "M key addr says this node is not active and the active is at addr; the client sends the request there.",
		run: func(t *testing.T, d *driver) {
			var tok uint64Counter
			active, standby := startScripted(t), startScripted(t)
			active.set(func(s *scripted) { s.auto = granting(&tok) })
			standby.set(func(s *scripted) {
				s.auto = func(l line) string { return "M " + l.key + " " + active.addr + l.ref() }
			})
			d.open([]string{standby.addr}, nil)
			r := d.must(acquireCmd("mv", 10*time.Second, 5*time.Second))
			if len(active.got("A")) != 1 || r.str("token") == "" {
				t.Errorf("the acquire redirected by M should be granted by the active: active got %v, result %s", active.lines(), r)
			}
			// Real cluster: a client given only a standby reaches the active.
			c := startCluster(t)
			d2 := startDriver(t, d.spec)
			d2.open([]string{c.nodes[2].addr}, map[string]any{"failure_timeout_ms": ms(clusterFT)})
			r = d2.must(acquireCmd("mv", 10*time.Second, 5*time.Second))
			q := d2.must(map[string]any{"cmd": "queue", "key": "mv"})
			if hs, _ := q["holders"].([]any); len(hs) != 1 {
				t.Errorf("after a redirected acquire the active should show one holder: %s", q)
			}
		},
	},
	{
		name:   "acquire_id_exactly_once",
		source: fromWire + ", A: acquire",
		rule:   "id=ID (1 to 64 bytes) names this acquire, for re-sending it safely: an acquire carrying the id of a grant that still holds key answers that grant again (same token, lease renewed) instead of queueing behind it ... A client that lost the answer to an acquire (a dropped connection, a failover) re-sends it with the same id.",
		run: func(t *testing.T, d *driver) {
			var tok uint64Counter
			n := startScripted(t)
			dropped := false
			n.set(func(s *scripted) {
				s.auto = func(l line) string {
					if l.op != "A" {
						return ""
					}
					n.mu.Lock()
					first := !dropped
					dropped = true
					n.mu.Unlock()
					if first {
						l.conn.close()
						return ""
					}
					return "A " + l.key + " " + tok.next() + l.ref()
				}
			})
			d.open([]string{n.addr}, nil)
			d.must(acquireCmd("once", 10*time.Second, 8*time.Second))
			ls := n.got("A")
			if len(ls) != 2 {
				t.Fatalf("want the acquire sent twice (once dropped, once granted), got %v", n.lines())
			}
			id0, id1 := ls[0].arg("id"), ls[1].arg("id")
			if id0 == "" || id0 != id1 {
				t.Errorf("the re-sent acquire must carry the same id= as the first send: %q then %q", id0, id1)
			}
			// Another acquire is another id.
			d.must(acquireCmd("once", 10*time.Second, 8*time.Second))
			if ls := n.got("A"); len(ls) != 3 || ls[2].arg("id") == "" || ls[2].arg("id") == id0 {
				t.Errorf("a new acquire must carry a new id: %v", n.lines())
			}
		},
	},
	{
		name:   "late_grant_released",
		source: fromWire + ", X: withdraw",
		rule:   "After X key none, a grant may be on its way (it crossed the X on the wire): the client releases it when it comes.",
		run: func(t *testing.T, d *driver) {
			n := startScripted(t)
			n.set(func(s *scripted) {
				s.auto = func(l line) string {
					switch l.op {
					case "X":
						return "X " + l.key + " none"
					case "R":
						return "R " + l.key + " ok"
					}
					return ""
				}
			})
			d.open([]string{n.addr}, map[string]any{"conns_per_addr": 1})
			c := acquireCmd("late", 10*time.Second, 0)
			c["cancel_after_ms"] = 200
			r := d.send(c)
			acq := n.waitLines("A", 1, 5*time.Second)[0]
			if res := d.wait(r, 5*time.Second); res.errKind() != "cancelled" {
				t.Fatalf("an acquire cancelled after 200 ms: want error cancelled, got %s", res)
			}
			// The grant crossed the cancel: nobody will use it.
			acq.conn.send("A late 4001" + acq.ref())
			rel := n.waitLines("R", 1, 5*time.Second)[0]
			if rel.key != "late" || len(rel.args) < 1 || rel.args[0] != "4001" {
				t.Errorf("the grant that came after the cancel should be released: want R late 4001, got %q", rel.text)
			}
		},
	},
	{
		name:   "frozen_node_failure_timeout",
		source: fromWire + ", S: status",
		rule:   "S is also the official client's liveness probe ... A node that does not answer in time is treated as gone, and the requests move to another node.",
		run: func(t *testing.T, d *driver) {
			c := startCluster(t)
			d.open(c.addrs(), map[string]any{"failure_timeout_ms": ms(clusterFT)})
			d.must(acquireCmd("fz1", 10*time.Second, 5*time.Second))
			active := c.active(t)
			active.freeze()
			defer active.thaw()
			start := time.Now()
			// A client that does not watch its connections waits on the
			// frozen node for ever: the bounds below are loose, for a
			// loaded machine, and still tell the two apart.
			r := d.wait(d.send(acquireCmd("fz2", 10*time.Second, 10*time.Second)), 12*clusterFT)
			if !r.ok() {
				t.Fatalf("with the active frozen, the acquire should be served by the promoted standby: %s", r)
			}
			// Promotion takes about FT; the client's detection as long.
			if took := time.Since(start); took > 10*clusterFT {
				t.Errorf("the acquire took %s with the active frozen; the failure timeout is %s", took, clusterFT)
			}
		},
	},
	{
		name:   "secret_handshake",
		source: fromWire + ", I: authenticate",
		rule:   "The official client and the nodes prove the secret without sending it, and check that the node knows it too, by challenge and response ... A wrong secret or proof is answered E and closes the connection.",
		run: func(t *testing.T, d *driver) {
			secret := "conformance-secret-0123456789abcdef"
			n := startNodeWith(t, client.Options{Secret: []byte(secret)}, "--secret-file", writeFile(t, "secret", secret+"\n"))
			d.open([]string{n.addr}, map[string]any{"secret": secret})
			r := d.must(acquireCmd("sec", 10*time.Second, 5*time.Second))
			d.must(map[string]any{"cmd": "release", "key": "sec", "token": r.str("token")})
			bad := startDriver(t, d.spec)
			bad.open([]string{n.addr}, map[string]any{"secret": "not-the-secret-not-the-secret", "dial_timeout_ms": 1000})
			if r := bad.do(acquireCmd("sec", 10*time.Second, 2*time.Second)); r.errKind() != "auth" {
				t.Errorf("a wrong secret: want error auth, got %s", r)
			}
			none := startDriver(t, d.spec)
			none.open([]string{n.addr}, map[string]any{"dial_timeout_ms": 1000})
			if r := none.do(acquireCmd("sec", 10*time.Second, 2*time.Second)); r.errKind() != "auth" {
				t.Errorf("no secret for a node that requires one: want error auth, got %s", r)
			}
		},
	},
	{
		name:   "tls",
		source: "proto/client/client.go, Options.TLS",
		rule:   "TLS, when set, speaks TLS to every node. An empty ServerName verifies each node under the host of its address.",
		run: func(t *testing.T, d *driver) {
			dir := t.TempDir()
			lockdTLS(t, dir, "ca", "--dir", dir)
			lockdTLS(t, dir, "cert", "--dir", dir, "--host", "127.0.0.1")
			ca := filepath.Join(dir, "lockd-ca.pem")
			cert, key := filepath.Join(dir, "lockd-127.0.0.1.pem"), filepath.Join(dir, "lockd-127.0.0.1-key.pem")
			n := startNodeWith(t, client.Options{TLS: tlsTo(t, ca)}, "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca)
			d.open([]string{n.addr}, map[string]any{"tls": map[string]any{"ca": ca}})
			r := d.must(acquireCmd("tls", 10*time.Second, 5*time.Second))
			d.must(map[string]any{"cmd": "release", "key": "tls", "token": r.str("token")})
			plain := startDriver(t, d.spec)
			plain.open([]string{n.addr}, map[string]any{"dial_timeout_ms": 1000, "failure_timeout_ms": 1000})
			if r := plain.do(acquireCmd("tls", 10*time.Second, 2*time.Second)); r.ok() {
				t.Errorf("plain TCP to a TLS node should fail, got %s", r)
			}
		},
	},
	{
		name:   "semaphore",
		source: fromWire + ", A: acquire",
		rule:   "limit=N makes key a semaphore: up to N may hold it at once, each with a token and a lease of its own; the N+1th waits, FIFO as for a lock, and each release or expiry grants the head of the queue. A key gets its limit from the acquire that creates it; while it is held or waited on, an acquire asking another limit is refused",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, nil)
			sem := func(wait time.Duration, limit int) map[string]any {
				c := acquireCmd("sem", 10*time.Second, wait)
				c["limit"] = limit
				return c
			}
			a := d.must(sem(5*time.Second, 2))
			b := d.must(sem(5*time.Second, 2))
			if a.str("token") == b.str("token") || a.num("limit") != 2 {
				t.Errorf("two places of a semaphore of 2: want distinct tokens and limit 2: %s, %s", a, b)
			}
			if r := d.do(sem(300*time.Millisecond, 2)); r.errKind() != "timeout" {
				t.Errorf("a third place of a semaphore of 2 should time out: %s", r)
			}
			if r := d.do(sem(300*time.Millisecond, 3)); r.errKind() != "limit_mismatch" {
				t.Errorf("another limit on a held semaphore: want limit_mismatch, got %s", r)
			}
			third := d.send(sem(0, 2))
			d.must(map[string]any{"cmd": "queue", "key": "sem"})
			d.must(map[string]any{"cmd": "release", "key": "sem", "token": a.str("token")})
			if r := d.wait(third, 5*time.Second); !r.ok() {
				t.Errorf("a released place should pass to the waiter: %s", r)
			}
		},
	},
	{
		name:   "renew",
		source: fromWire + ", N: renew",
		rule:   "Restarts the lease of the lock that token holds: it now ends lease seconds after the server reads the request, whatever was left of it. ... N key notheld token does not hold key (any more)",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, nil)
			r := d.must(acquireCmd("ren", 1*time.Second, 5*time.Second))
			tok := r.str("token")
			d.must(map[string]any{"cmd": "renew", "key": "ren", "token": tok, "lease_ms": 20000})
			q := d.must(map[string]any{"cmd": "queue", "key": "ren"})
			hs, _ := q["holders"].([]any)
			if len(hs) != 1 || res(hs[0].(map[string]any)).num("lease_left_ms") < 10000 {
				t.Errorf("after a renewal for 20 s the lease left should be above 10 s: %s", q)
			}
			if r := d.do(map[string]any{"cmd": "renew", "key": "ren", "token": "1", "lease_ms": 1000}); r.errKind() != "notheld" {
				t.Errorf("renewing with a token that does not hold the key: want notheld, got %s", r)
			}
		},
	},
	{
		name:   "queue_keys_status",
		source: fromWire + ", Q: queue, K: keys, S: status",
		rule:   "TOKEN holds key for LEASELEFT more seconds; both are - when nobody holds it. NWAITERS counts the waiters ... Lists the keys held or waited on that pattern selects ... Every node answers S, active or not",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, map[string]any{"name": "conformance"})
			r := d.must(acquireCmd("qk", 10*time.Second, 5*time.Second))
			waiter := d.send(acquireCmd("qk", 10*time.Second, 0))
			var q res
			for range 100 {
				q = d.must(map[string]any{"cmd": "queue", "key": "qk"})
				if q.num("nwaiters") == 1 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			hs, _ := q["holders"].([]any)
			if len(hs) != 1 || res(hs[0].(map[string]any)).str("token") != r.str("token") || q.num("nwaiters") != 1 || q.num("limit") != 1 {
				t.Errorf("queue of a held key with one waiter: want its holder's token %s, nwaiters 1, limit 1: %s", r.str("token"), q)
			} else if id := res(hs[0].(map[string]any)).str("id"); !strings.HasPrefix(id, "conformance") {
				t.Errorf("the holder's id should start with the client's name: %q", id)
			}
			k := d.must(map[string]any{"cmd": "keys", "pattern": "q*"})
			if k.str("keys") != `["qk"]` || k.num("total") != 1 {
				t.Errorf("keys q*: want [qk], total 1: %s", k)
			}
			s := d.must(map[string]any{"cmd": "status"})
			f, _ := s["fields"].(map[string]any)
			if f["role"] != "active" || f["self"] != n.addr {
				t.Errorf("status of a single node: want role=active self=%s: %s", n.addr, s)
			}
			d.must(map[string]any{"cmd": "release", "key": "qk", "token": r.str("token")})
			d.wait(waiter, 5*time.Second)
		},
	},
	{
		name:   "timeout_T",
		source: fromWire + ", A: acquire",
		rule:   "wait is the longest the request stays in the key's queue ... T key the wait elapsed without a grant: nothing is held",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, nil)
			d.must(acquireCmd("to", 10*time.Second, 5*time.Second))
			r := d.do(acquireCmd("to", 10*time.Second, 400*time.Millisecond))
			if r.errKind() != "timeout" {
				t.Fatalf("acquire of a held key with wait 400 ms: want error timeout, got %s", r)
			}
			if r.ms() < 350*time.Millisecond || r.ms() > 3*time.Second {
				t.Errorf("the timeout came after %s; the wait was 400 ms", r.ms())
			}
			q := d.must(map[string]any{"cmd": "queue", "key": "to"})
			if q.num("nwaiters") != 0 {
				t.Errorf("a timed-out acquire must leave no waiter: %s", q)
			}
		},
	},
	{
		name:   "notheld",
		source: fromWire + ", R: release",
		rule:   "R key notheld token does not hold key: it never did ... or its lease ran out",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, nil)
			d.must(acquireCmd("nh", 10*time.Second, 5*time.Second))
			if r := d.do(map[string]any{"cmd": "release", "key": "nh", "token": "5"}); r.errKind() != "notheld" {
				t.Errorf("release with a token that does not hold the key: want notheld, got %s", r)
			}
			r := d.must(acquireCmd("nh-short", 300*time.Millisecond, 5*time.Second))
			time.Sleep(700 * time.Millisecond)
			if r := d.do(map[string]any{"cmd": "release", "key": "nh-short", "token": r.str("token")}); r.errKind() != "notheld" {
				t.Errorf("a release after the lease ran out: want notheld, got %s", r)
			}
		},
	},
	{
		name:   "release_again_ok",
		source: "engine/released.go, Engine.Release",
		rule:   "A client that releases a lock and loses the answer (its connection drops, the node fails over) sends the release again. ... So the engine remembers, for a while, the tokens their holders released, and answers a release of one of them as done.",
		run: func(t *testing.T, d *driver) {
			n := startNode(t)
			d.open([]string{n.addr}, nil)
			r := d.must(acquireCmd("again", 10*time.Second, 5*time.Second))
			d.must(map[string]any{"cmd": "release", "key": "again", "token": r.str("token")})
			if r := d.do(map[string]any{"cmd": "release", "key": "again", "token": r.str("token")}); !r.ok() {
				t.Errorf("the same release sent again: want ok (it was released, by this token), got %s", r)
			}
		},
	},
}

// tlsTo is a TLS configuration trusting the CA at path, for the harness
// itself to reach a TLS node.
func tlsTo(t *testing.T, path string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// tokenLess compares two decimal u64 tokens as numbers.
func tokenLess(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}
