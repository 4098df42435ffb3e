package conformance

import (
	"strings"
	"testing"
	"time"
)

// Cases of the lock kinds beside the exclusive lock (clients/README.md,
// Lock kinds): shared holds, sets of keys, election values and proclaim,
// semaphore places. A client that does not take a kind yet lists it in
// open's unsupported (shared, sets, values, place: DRIVER.md). Each case
// checks the lines a client sends against a scripted node, then the
// behaviour against a real node built from this checkout, which speaks
// every word of them.

const fromKinds = "clients/README.md, Lock kinds"

func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		out = append(out, res{"x": x}.str("x"))
	}
	return out
}

func init() {
	cases = append(cases, kindCases...)
}

var kindCases = []testCase{
	{
		name:   "shared_hold",
		source: fromKinds,
		rule:   "A shared hold takes a key as a reader: any number of readers hold a key at once, never beside a writer, and every grant has its own token ... A reader of a semaphore is refused before anything is sent",
		run: func(t *testing.T, d *driver) {
			// On the wire: mode=shared.
			s := startScripted(t)
			var toks uint64Counter
			s.set(func(s *scripted) { s.auto = granting(&toks) })
			d2 := startDriver(t, d.spec)
			d2.open([]string{s.addr}, nil, "shared")
			d2.must(map[string]any{"cmd": "acquire", "key": "rw", "lease_ms": 10000, "shared": true})
			if a := s.got("A"); len(a) != 1 || a[0].arg("mode") != "shared" {
				t.Errorf("a shared acquire carries mode=shared: %v", s.lines())
			}
			if r := d2.do(map[string]any{"cmd": "acquire", "key": "rw", "lease_ms": 10000, "limit": 2, "shared": true}); r.errKind() != "invalid" {
				t.Errorf("shared with limit 2 must be refused before sending (invalid): %s", r)
			}
			// On a real node: readers together, no writer beside them.
			n := startNode(t)
			d.open([]string{n.addr}, nil, "shared")
			a := d.must(map[string]any{"cmd": "acquire", "key": "rw", "lease_ms": 10000, "wait_ms": 2000, "shared": true})
			b := d.must(map[string]any{"cmd": "try", "key": "rw", "lease_ms": 10000, "shared": true})
			if b["acquired"] != true || b.str("token") == a.str("token") {
				t.Errorf("a second reader is granted at once, with a token of its own: %s (first %s)", b, a)
			}
			if w := d.must(map[string]any{"cmd": "try", "key": "rw", "lease_ms": 10000}); w["acquired"] != false {
				t.Errorf("a writer is never granted beside readers: %s", w)
			}
			q := d.must(map[string]any{"cmd": "queue", "key": "rw"})
			if len(holderTokens(q)) != 2 || q["shared"] != true {
				t.Errorf("queue of a key two readers hold: want 2 holders and shared: %s", q)
			}
			d.must(map[string]any{"cmd": "release", "key": "rw", "token": a.str("token")})
			d.must(map[string]any{"cmd": "release", "key": "rw", "token": b.str("token")})
			if w := d.must(map[string]any{"cmd": "try", "key": "rw", "lease_ms": 10000}); w["acquired"] != true {
				t.Errorf("a writer is granted once the readers are gone: %s", w)
			}
		},
	},
	{
		name:   "hold_all",
		source: fromKinds,
		rule:   "A set takes several keys at once, all or none: one request of 1 to 16 distinct keys, granted with one token per key in the order the keys were asked ... A hold of a set renews every key and signals its loss like a hold of one key: the loss of any key is the loss of the set, which says which key, and the other keys are released.",
		run: func(t *testing.T, d *driver) {
			// On the wire: A first lease wait key=K2 key=K3, a token per key.
			s := startScripted(t)
			s.set(func(s *scripted) {
				s.auto = func(l line) string {
					if l.op == "A" {
						return "A " + l.key + " 1001 1002 1003" + l.ref()
					}
					return ""
				}
			})
			d2 := startDriver(t, d.spec)
			d2.open([]string{s.addr}, nil, "sets")
			r := d2.must(map[string]any{"cmd": "acquire_all", "keys": []string{"a", "b", "c"}, "lease_ms": 10000, "wait_ms": 5000})
			if a := s.got("A"); len(a) != 1 || a[0].key != "a" || a[0].args[0] != "10" || a[0].args[1] != "5" || a[0].args[2] != "key=b" || a[0].args[3] != "key=c" {
				t.Errorf("a set is one acquire, A a 10 5 key=b key=c ...: %v", s.lines())
			}
			if got := strings.Join(strs(r["tokens"]), " "); got != "1001 1002 1003" {
				t.Errorf("tokens: want 1001 1002 1003, one per key in order: %s", r)
			}
			if r := d2.do(map[string]any{"cmd": "acquire_all", "keys": []string{"a", "a"}, "lease_ms": 10000}); r.errKind() != "invalid" {
				t.Errorf("a key named twice is refused before sending (invalid): %s", r)
			}

			// On a real node: the loss of one key loses the set.
			n := startNode(t)
			d.open([]string{n.addr}, nil, "sets")
			h := d.must(map[string]any{"cmd": "hold_all", "keys": []string{"x", "y"}, "lease_ms": 3000})
			toks := strs(h["tokens"])
			if len(toks) != 2 {
				t.Fatalf("hold_all of 2 keys: want 2 tokens: %s", h)
			}
			if q := d.must(map[string]any{"cmd": "queue", "key": "y"}); strings.Join(holderTokens(q), " ") != toks[1] {
				t.Errorf("y is held with the second token %s: %s", toks[1], q)
			}
			// Another set over the same keys, in the other order, waits.
			o := startDriver(t, d.spec)
			o.open([]string{n.addr}, nil, "sets")
			other := o.send(map[string]any{"cmd": "acquire_all", "keys": []string{"y", "x"}, "lease_ms": 10000, "wait_ms": 10000})
			time.Sleep(200 * time.Millisecond)
			notYet(t, other, "a set over held keys")
			// y is released from outside: the set is lost, naming y, and x goes back.
			o.must(map[string]any{"cmd": "release", "key": "y", "token": toks[1]})
			e := d.waitEvent(5*time.Second, func(e res) bool { return e.str("event") == "lost" && e.num("hold") == h.num("hold") })
			if e.str("reason") != "notheld" || e.str("key") != "y" {
				t.Errorf("the set's loss: want reason notheld and key y: %s", e)
			}
			if r := o.wait(other, 10*time.Second); !r.ok() || len(strs(r["tokens"])) != 2 {
				t.Errorf("once the set is lost and x released, the waiting set is granted both keys: %s", r)
			}
		},
	},
	{
		name:   "proclaim",
		source: fromKinds,
		rule:   "An election's value is 1 to 1024 bytes of UTF-8 text, spaces included, percent-encoded on the wire; the leader changes it without giving leadership up (`proclaim`), and observers see the new value.",
		run: func(t *testing.T, d *driver) {
			// On the wire: value= percent-encoded, on the campaign and on N.
			s := startScripted(t)
			var toks uint64Counter
			s.set(func(s *scripted) { s.auto = granting(&toks) })
			d2 := startDriver(t, d.spec)
			d2.open([]string{s.addr}, nil, "values")
			c := d2.must(campaignCmd("wire", "node 1 (é)", 5*time.Second))
			if a := s.got("A"); len(a) != 1 || a[0].arg("value") != "node%201%20%28%C3%A9%29" {
				t.Errorf("a campaign's value goes as value=, percent-encoded: %v", s.lines())
			}
			d2.must(map[string]any{"cmd": "proclaim", "hold": c.num("hold"), "value": "100% x"})
			proclaimed := false
			for _, l := range s.got("N") {
				proclaimed = proclaimed || l.arg("value") == "100%25%20x"
			}
			if !proclaimed {
				t.Errorf("proclaim is N key token lease value=V: %v", s.lines())
			}
			if r := d2.do(map[string]any{"cmd": "proclaim", "hold": c.num("hold"), "value": ""}); r.errKind() != "invalid" {
				t.Errorf("an empty value is refused before sending (invalid): %s", r)
			}

			// On a real node: observers see the new value of the same leader.
			n := startNode(t)
			d.open([]string{n.addr}, nil, "values")
			lead := d.must(campaignCmd("pr", "node 1 (10.0.0.1)", 5*time.Second))
			o := startDriver(t, d.spec)
			o.open([]string{n.addr}, nil, "values")
			w := o.must(map[string]any{"cmd": "observe", "key": "pr"}).num("watch")
			o.waitEvent(3*time.Second, isLeader(w, "node 1 (10.0.0.1)"))
			mark := o.eventCount()
			d.must(map[string]any{"cmd": "proclaim", "hold": lead.num("hold"), "value": "node 2 ü"})
			e := o.waitEventFrom(mark, 3*time.Second, isLeader(w, "node 2 ü"))
			if e.str("token") != lead.str("token") {
				t.Errorf("a proclaim keeps the leader and its token %s: %s", lead.str("token"), e)
			}
			if l := o.must(map[string]any{"cmd": "leader", "key": "pr"}); l.str("value") != "node 2 ü" {
				t.Errorf("leader after proclaim: want value node 2 ü: %s", l)
			}
		},
	},
	{
		name:   "long_value",
		source: fromKinds,
		rule:   "An election's value is 1 to 1024 bytes of UTF-8 text, spaces included",
		run: func(t *testing.T, d *driver) {
			long := strings.Repeat("é ", 341) + "x" // 1024 bytes of UTF-8
			n := startNode(t)
			d.open([]string{n.addr}, nil, "values")
			if r := d.do(campaignCmd("lv", long+"z", 5*time.Second)); r.errKind() != "invalid" {
				d.need(r)
				t.Errorf("a value of 1025 bytes is refused before sending (invalid): %s", r)
			}
			lead := d.must(campaignCmd("lv", long, 5*time.Second))
			if l := d.must(map[string]any{"cmd": "leader", "key": "lv"}); l.str("value") != long || l.str("token") != lead.str("token") {
				t.Errorf("leader: want the 1024-byte value back whole: %s", l)
			}
		},
	},
	{
		name:   "long_line",
		source: fromKinds,
		rule:   "A request is one line of at most 4096 bytes ... Every client refuses such an acquire or renewal before sending it, with its invalid-argument error",
		run: func(t *testing.T, d *driver) {
			// 16 keys of 255 bytes: more than 4096 bytes with their key= words.
			var long, fits []string
			for i := range 16 {
				long = append(long, strings.Repeat(string(rune('a'+i)), 255))
				fits = append(fits, strings.Repeat(string(rune('a'+i)), 200))
			}
			n := startNode(t)
			d.open([]string{n.addr}, nil, "sets")
			for _, cmd := range []string{"acquire_all", "hold_all"} {
				if r := d.do(map[string]any{"cmd": cmd, "keys": long, "lease_ms": 10000, "wait_ms": 2000}); r.errKind() != "invalid" || !strings.Contains(r.str("message"), "4096") {
					d.need(r)
					t.Errorf("%s of 16 keys of 255 bytes is refused before sending (invalid, naming 4096 bytes): %s", cmd, r)
				}
			}
			// The connection is still the node's: a set that fits is granted.
			if r := d.must(map[string]any{"cmd": "acquire_all", "keys": fits, "lease_ms": 10000, "wait_ms": 2000}); len(strs(r["tokens"])) != 16 {
				t.Errorf("16 keys of 200 bytes fit in a line and are granted, a token each: %s", r)
			}
		},
	},
	{
		name:   "semaphore_place",
		source: fromKinds,
		rule:   "A semaphore grant says which place (1 to N) it holds: `place` on the lock and the hold, none when the node names none.",
		run: func(t *testing.T, d *driver) {
			// On the wire: place=P read from the grant.
			s := startScripted(t)
			s.set(func(s *scripted) {
				s.auto = func(l line) string {
					if l.op == "A" {
						return "A " + l.key + " 1001 place=3" + l.ref()
					}
					return ""
				}
			})
			d2 := startDriver(t, d.spec)
			d2.open([]string{s.addr}, nil, "place")
			if r := d2.must(map[string]any{"cmd": "acquire", "key": "sem", "lease_ms": 10000, "limit": 3}); r.num("place") != 3 {
				t.Errorf("a grant A sem 1001 place=3: want place 3: %s", r)
			}
			// On a real node: the lowest free place.
			n := startNode(t)
			d.open([]string{n.addr}, nil, "place")
			var places []float64
			for range 3 {
				r := d.must(map[string]any{"cmd": "acquire", "key": "sem", "lease_ms": 10000, "limit": 3})
				if r["place"] == nil {
					t.Fatalf("a semaphore's grant names its place: %s", r)
				}
				places = append(places, r.num("place"))
			}
			if places[0] != 1 || places[1] != 2 || places[2] != 3 {
				t.Errorf("three holders of a semaphore of 3 hold places 1, 2, 3: %v", places)
			}
		},
	},
}
