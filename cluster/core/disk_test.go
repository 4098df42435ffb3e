package core

import (
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// diskOut records what a single node sends and logs.
type diskOut struct {
	sent   []string
	logged []loggedRec
}

type loggedRec struct {
	at  time.Time
	rec string
}

func (o *diskOut) apply(a Action) {
	switch a.Kind {
	case ActSend:
		o.sent = append(o.sent, string(a.Send.Line))
	case ActLog:
		o.logged = append(o.logged, loggedRec{a.At, string(a.Line)})
	}
}

func diskNode(t *testing.T, now time.Time) (*Core, *diskOut) {
	t.Helper()
	out := &diskOut{}
	c, err := New(Config{Self: "127.0.0.1:1", Durable: true, Durability: "disk:batch"}, now)
	if err != nil {
		t.Fatal(err)
	}
	sinks.Store(c, out.apply)
	t.Cleanup(func() { sinks.Delete(c) })
	settle(c)
	return c, out
}

func request(t *testing.T, c *Core, now time.Time, id ConnID, line string) {
	t.Helper()
	req, err := proto.Parse([]byte(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Request(now, id, req)
	settle(c)
}

// An answer that depends on a change waits for the change to be on disk;
// one that does not is written at once.
func TestDiskHoldsAnswers(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, out := diskNode(t, now)
	c.ConnOpened(now, 1, "127.0.0.1:9")
	settle(c)
	request(t, c, now, 1, "A deploy 30 0")
	if len(out.sent) != 0 || len(out.logged) != 1 || !strings.HasPrefix(out.logged[0].rec, "G deploy ") {
		t.Fatalf("before the disk: sent %q, logged %v", out.sent, out.logged)
	}
	c.Logged(now, 1)
	settle(c)
	if len(out.sent) != 1 || !strings.HasPrefix(out.sent[0], "A deploy ") {
		t.Fatalf("after the disk: sent %q", out.sent)
	}
	if c.Durability() != "disk:batch" || c.Status(now).Durability != "disk:batch" {
		t.Fatalf("durability %q", c.Durability())
	}
}

// A restart recovers the holders with their tokens, the leases less the
// time it was down, and issues tokens above every token on disk even when
// the clock went back.
func TestDiskRecover(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, out := diskNode(t, now)
	c.ConnOpened(now, 1, "127.0.0.1:9")
	settle(c)
	request(t, c, now, 1, "A deploy 30 0 id=job1")
	request(t, c, now, 1, "A short 2 0")
	request(t, c, now, 1, "A gone 30 0")
	c.Logged(now, 3)
	settle(c)
	tok := func(line string) string { return strings.Fields(line)[2] }
	request(t, c, now, 1, "R gone "+tok(out.sent[2]))
	c.Logged(now, 4)
	settle(c)
	deployTok := tok(out.sent[0])
	top := c.HighWater()

	later := now.Add(5 * time.Second)
	back := now.Add(-time.Hour) // the clock stepped back across the restart
	for _, at := range []time.Time{later, back} {
		r, rout := diskNode(t, at)
		for _, l := range out.logged {
			if err := r.Recover(at, l.at, []byte(l.rec)); err != nil {
				t.Fatal(err)
			}
		}
		if n := r.Recovered(at); n != 2 {
			t.Fatalf("recovered %d holders, want deploy and short", n)
		}
		hs, _, _ := r.Engine().InspectN(at, "deploy", 10)
		if len(hs) != 1 || hs[0].ID != "job1" || proto.FormatSeconds(hs[0].LeaseLeft) == "" {
			t.Fatalf("deploy after the restart: %+v", hs)
		}
		if at == later && hs[0].LeaseLeft > 25*time.Second {
			t.Fatalf("deploy's lease left %s: the 5 s the node was down did not count", hs[0].LeaseLeft)
		}
		if got := strings.Fields(out.sent[0])[2]; got != deployTok {
			t.Fatal("token changed")
		}
		if hs, _, _ := r.Engine().InspectN(at, "gone", 10); len(hs) != 0 {
			t.Fatalf("a released key came back: %+v", hs)
		}
		r.Tick(at)
		settle(r)
		if at == later {
			if hs, _, _ := r.Engine().InspectN(at, "short", 10); len(hs) != 0 {
				t.Fatalf("a lease that ended while down is still held: %+v", hs)
			}
		}
		r.ConnOpened(at, 1, "127.0.0.1:9")
		settle(r)
		request(t, r, at, 1, "A next 30 0")
		r.Logged(at, uint64(len(rout.logged)))
		settle(r)
		var next uint64
		for _, s := range rout.sent {
			if strings.HasPrefix(s, "A next ") {
				next = parseUint(t, tok(s))
			}
		}
		if next <= top {
			t.Fatalf("clock %s: next token %d, not above %d from before the restart", at.Sub(now), next, top)
		}
	}
}

func parseUint(t *testing.T, s string) uint64 {
	t.Helper()
	var n uint64
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + uint64(r-'0')
	}
	return n
}

// A snapshot and the records after it rebuild the same state.
func TestDiskSnapshot(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, out := diskNode(t, now)
	c.ConnOpened(now, 1, "127.0.0.1:9")
	settle(c)
	for _, k := range []string{"a", "b", "c"} {
		request(t, c, now, 1, "A "+k+" 30 0")
	}
	c.Logged(now, uint64(len(out.logged)))
	settle(c)
	snap := []string{string(c.DiskSnapshot(nil))}
	request(t, c, now, 1, "A d 30 0") // during the snapshot: in the log after it
	for cur := -1; cur != 0; {
		if cur < 0 {
			cur = int(^uint(0) >> 1)
		}
		cur = c.DiskSnapshotSlice(now, cur, func(rec []byte) { snap = append(snap, string(rec)) })
	}
	r, _ := diskNode(t, now)
	for _, l := range snap {
		if err := r.Recover(now, now, []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Recover(now, now, []byte(out.logged[len(out.logged)-1].rec)); err != nil {
		t.Fatal(err)
	}
	if n := r.Recovered(now); n != 4 {
		t.Fatalf("recovered %d holders from %q, want 4", n, snap)
	}
	if r.Seq() != c.Seq() {
		t.Fatalf("seq %d, want %d", r.Seq(), c.Seq())
	}
}

// An answer that waits only for a slow disk sets no deadline: the node
// does not wake in a loop while the fsync takes long.
func TestDiskSlowFsyncNoBusyWake(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, out := diskNode(t, now)
	c.ConnOpened(now, 1, "127.0.0.1:9")
	settle(c)
	request(t, c, now, 1, "A deploy 30 0")
	later := now.Add(10 * time.Second)
	c.Tick(later)
	settle(c)
	if w := c.NextWake(); !w.After(later) {
		t.Fatalf("next wake %s, not after now %s, while only the disk is waited for", w, later)
	}
	c.Logged(later, uint64(len(out.logged)))
	settle(c)
	if len(out.sent) != 1 {
		t.Fatalf("sent %q", out.sent)
	}
}
