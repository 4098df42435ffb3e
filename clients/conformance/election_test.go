package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// Cases of the election every official client has (clients/README.md): the
// campaign, leader, observe and resign commands of DRIVER.md.

func campaignCmd(key, value string, lease time.Duration) map[string]any {
	return map[string]any{"cmd": "campaign", "key": key, "value": value, "lease_ms": ms(lease)}
}

// isLeader tells a leader event of watch w naming value (any value when
// value is "", nobody when value is "-").
func isLeader(w float64, value string) func(res) bool {
	return func(e res) bool {
		if e.str("event") != "leader" || e.num("watch") != w {
			return false
		}
		switch value {
		case "":
			return true
		case "-":
			return e["value"] == nil && e["token"] == nil
		}
		return e.str("value") == value
	}
}

// waitWaiters waits until key has n waiters, as d's client sees it.
func waitWaiters(t *testing.T, d *driver, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		q := d.must(map[string]any{"cmd": "queue", "key": key})
		if int(q.num("nwaiters")) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d candidates waiting on %s: %s", n, key, q)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notYet fails the case if ch has a result now: a campaign that returned
// while another candidate leads.
func notYet(t *testing.T, ch <-chan res, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned while another candidate leads: %s", what, r)
	default:
	}
}

const fromElection = "proto/client/election.go, Election"

var electionCases = []testCase{
	{
		name:   "election",
		source: fromElection,
		rule:   "The candidate that holds the key leads, the others wait in its FIFO queue, so when the leader resigns the next candidate leads at once, and when the leader dies its lease hands the role on. Observers see the leader's value (Leader, Observe) without campaigning.",
		run: func(t *testing.T, d *driver) {
			const lease = 3 * time.Second
			n := startNode(t)
			d.open([]string{n.addr}, nil)
			a := d.must(campaignCmd("el", "node-a", lease))
			var b, c, o *driver
			for _, p := range []**driver{&b, &c, &o} {
				*p = startDriver(t, d.spec)
				(*p).open([]string{n.addr}, nil)
			}
			// Two more candidates, in this order: they wait.
			bc := b.send(campaignCmd("el", "node-b", lease))
			waitWaiters(t, o, "el", 1)
			cc := c.send(campaignCmd("el", "node-c", lease))
			waitWaiters(t, o, "el", 2)
			notYet(t, bc, "node-b's campaign")
			notYet(t, cc, "node-c's campaign")

			// An observer, which does not campaign, sees the leader.
			if l := o.must(map[string]any{"cmd": "leader", "key": "el"}); l.str("value") != "node-a" || l.str("token") != a.str("token") {
				t.Errorf("leader: want node-a with the token of its campaign %s: %s", a.str("token"), l)
			}
			w := o.must(map[string]any{"cmd": "observe", "key": "el"}).num("watch")
			o.waitEvent(3*time.Second, isLeader(w, "node-a"))
			// So does any other client: the value travels with the lock.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			hc, err := client.New([]string{n.addr}, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer hc.Close()
			if l, err := client.NewElection(hc, "el").Leader(ctx); err != nil || l.Value != "node-a" {
				t.Errorf("the Go client reads the leader of this client's election as %+v (%v); want value node-a", l, err)
			}

			// The leader resigns: the next candidate leads at once.
			mark := o.eventCount()
			d.must(map[string]any{"cmd": "resign", "hold": a.num("hold")})
			resigned := time.Now()
			rb := b.wait(bc, 2*lease)
			if !rb.ok() {
				t.Fatalf("node-b's campaign, next in line when node-a resigned: %s", rb)
			}
			if took := time.Since(resigned); took > time.Second {
				t.Errorf("node-b led %s after node-a resigned; the next candidate leads at once, not by the lease (%s)", took, lease)
			}
			if !tokenLess(a.str("token"), rb.str("token")) {
				t.Errorf("the new leader's token %s must be larger than the old one's %s", rb.str("token"), a.str("token"))
			}
			d.waitEvent(2*time.Second, func(e res) bool {
				return e.str("event") == "lost" && e.num("hold") == a.num("hold") && e.str("reason") == "released"
			})
			o.waitEventFrom(mark, 3*time.Second, isLeader(w, "node-b"))
			notYet(t, cc, "node-c's campaign")

			// The leader dies without resigning: its lease hands the role on.
			mark = o.eventCount()
			b.kill()
			died := time.Now()
			rc := c.wait(cc, 3*lease)
			if !rc.ok() {
				t.Fatalf("node-c's campaign, next in line when node-b died: %s", rc)
			}
			if took := time.Since(died); took > lease+2*time.Second {
				t.Errorf("node-c led %s after node-b died; its lease of %s should have handed the role on", took, lease)
			}
			o.waitEventFrom(mark, 3*time.Second, isLeader(w, "node-c"))
			if l := o.must(map[string]any{"cmd": "leader", "key": "el"}); l.str("value") != "node-c" || l.str("token") != rc.str("token") {
				t.Errorf("leader after node-b died: want node-c with token %s: %s", rc.str("token"), l)
			}
		},
	},
	{
		name:   "election_loss_signal",
		source: fromElection,
		rule:   "Leading is holding a lock: the *Held that Campaign returns renews the lease and closes Done the moment leadership can no longer be proven.",
		run: func(t *testing.T, d *driver) {
			const lease = 1200 * time.Millisecond
			n := startNode(t)
			// A failure timeout short enough for a short lease: at least
			// twice it.
			short := map[string]any{"failure_timeout_ms": 600}
			d.open([]string{n.addr}, short)
			a := d.must(campaignCmd("ls", "node-a", lease))
			b, o := startDriver(t, d.spec), startDriver(t, d.spec)
			b.open([]string{n.addr}, short)
			o.open([]string{n.addr}, short)
			bc := b.send(campaignCmd("ls", "node-b", lease))
			waitWaiters(t, o, "ls", 1)

			// The leader renews: two leases later it still leads.
			time.Sleep(2 * lease)
			notYet(t, bc, "node-b's campaign")
			if l := o.must(map[string]any{"cmd": "leader", "key": "ls"}); l.str("token") != a.str("token") {
				t.Errorf("a leader of lease %s should still lead %s later, with its token %s: %s", lease, 2*lease, a.str("token"), l)
			}
			if st := d.must(map[string]any{"cmd": "hold_state", "hold": a.num("hold")}); st["lost"] != false {
				t.Errorf("a renewed leadership is not lost: %s", st)
			}

			// Its lock is released from outside (an operator's lockctl
			// release): the next candidate leads, and the old leader is
			// told by its next renewal.
			o.must(map[string]any{"cmd": "release", "key": "ls", "token": a.str("token")})
			released := time.Now()
			if rb := b.wait(bc, 5*time.Second); !rb.ok() {
				t.Fatalf("node-b's campaign, next in line: %s", rb)
			}
			e := d.waitEvent(3*time.Second, func(e res) bool { return e.str("event") == "lost" && e.num("hold") == a.num("hold") })
			if e.str("reason") != "notheld" {
				t.Errorf("a leadership whose lock was released elsewhere: want reason notheld: %s", e)
			}
			if took := time.Since(released); took > 2*lease {
				t.Errorf("the old leader learnt of its loss %s after its lock was released; it renews every third of its lease (%s)", took, lease)
			}
		},
	},
}
