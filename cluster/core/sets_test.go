package core

import (
	"strings"
	"testing"
	"time"
)

// memNode is a single node without a data directory, active at once,
// and what it sends by connection.
func memNode(t *testing.T, now time.Time) (*Core, *diskOut) {
	t.Helper()
	out := &diskOut{}
	c, err := New(Config{Self: "127.0.0.1:1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	sinks.Store(c, out.apply)
	t.Cleanup(func() { sinks.Delete(c) })
	settle(c)
	for id := ConnID(1); id <= 4; id++ {
		c.ConnOpened(now, id, "127.0.0.1:9")
	}
	settle(c)
	return c, out
}

// last returns the lines sent since mark, and moves it.
func (o *diskOut) since(mark *int) []string {
	got := o.sent[*mark:]
	*mark = len(o.sent)
	return got
}

func wantLines(t *testing.T, what string, got []string, prefixes ...string) {
	t.Helper()
	if len(got) != len(prefixes) {
		t.Fatalf("%s: sent %q, want %q", what, got, prefixes)
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(got[i], p) {
			t.Fatalf("%s: sent %q, want %q", what, got, prefixes)
		}
	}
}

// A set is answered once, with every token in the order asked, when
// every key is granted; a wait that ends answers it T once.
func TestSetAnsweredOnce(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, out := memNode(t, now)
	mark := 0
	request(t, c, now, 1, "A b 30 0")
	b := strings.Fields(out.since(&mark)[0])[2]
	request(t, c, now, 2, "A a 30 0 key=b key=c ref=s1")
	request(t, c, now, 3, "A c 30 1 key=b")
	wantLines(t, "while b is held", out.since(&mark))
	if q := c.queueOf(now, "b"); len(q.Waiters) != 2 || strings.Join(q.Waiters[0].Set, "+") != "a+b+c" {
		t.Fatalf("queue of b %+v", q)
	}
	request(t, c, now, 1, "R b "+b)
	got := out.since(&mark)
	// What a request lets through is answered before the request.
	wantLines(t, "b released", got, "A a ", "R b ok")
	if f := strings.Fields(got[0]); len(f) != 6 || f[5] != "ref=s1" {
		t.Fatalf("the set's grant %q: want three tokens and its ref", got[0])
	}
	// The third waits behind the set on b and c; its wait ends.
	c.Tick(now.Add(time.Second))
	settle(c)
	wantLines(t, "wait over", out.since(&mark), "T c")
	if q := c.queueOf(now, "c"); len(q.Waiters) != 0 || len(q.Holders) != 1 || q.Holders[0].Set == 0 {
		t.Fatalf("queue of c %+v", q)
	}
	// Two sets over the same keys in either order: granted in turn.
	f := strings.Fields(got[0])
	request(t, c, now, 3, "A c 30 0 key=a")
	request(t, c, now, 4, "A a 30 0 key=c")
	for i, k := range []string{"a", "b", "c"} {
		request(t, c, now, 2, "R "+k+" "+f[2+i])
	}
	wantLines(t, "the set released", out.since(&mark), "R a ok", "R b ok", "A c ", "R c ok")
	request(t, c, now, 3, "Q a")
	if l := out.since(&mark); len(l) != 1 || !strings.Contains(l[0], " wset=1,a+c") || !strings.Contains(l[0], " set=") {
		t.Fatalf("Q a %q", l)
	}
	// A withdrawal by any key of a waiting set answers it T on its first.
	request(t, c, now, 1, "A a 30 0 key=c id=w1")
	request(t, c, now, 1, "X c w1")
	wantLines(t, "withdrawn", out.since(&mark), "T a", "X c ok")
}

// Readers hold a lock together; a writer waits for them, and readers
// that come after it wait for it; when it goes, they are granted
// together.
func TestSharedReadersAndWriter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, out := memNode(t, now)
	mark := 0
	request(t, c, now, 1, "A cfg 30 0 mode=shared")
	request(t, c, now, 2, "A cfg 30 0 mode=shared")
	r := out.since(&mark)
	wantLines(t, "two readers", r, "A cfg ", "A cfg ")
	request(t, c, now, 3, "A cfg 30 0")
	request(t, c, now, 4, "A cfg 30 0 mode=shared")
	request(t, c, now, 2, "A cfg 30 0 mode=shared")
	wantLines(t, "a writer and readers behind it", out.since(&mark))
	q := c.queueOf(now, "cfg")
	if !q.Shared || len(q.Holders) != 2 || len(q.Waiters) != 3 || q.Waiters[0].Shared || !q.Waiters[1].Shared {
		t.Fatalf("queue %+v", q)
	}
	request(t, c, now, 1, "R cfg "+strings.Fields(r[0])[2])
	request(t, c, now, 2, "R cfg "+strings.Fields(r[1])[2])
	w := out.since(&mark)
	wantLines(t, "the readers gone", w, "R cfg ok", "A cfg ", "R cfg ok")
	request(t, c, now, 3, "R cfg "+strings.Fields(w[1])[2])
	wantLines(t, "the writer gone", out.since(&mark), "A cfg ", "A cfg ", "R cfg ok")
	if q := c.queueOf(now, "cfg"); !q.Shared || len(q.Holders) != 2 {
		t.Fatalf("queue %+v", q)
	}
	request(t, c, now, 1, "A cfg 30 0 mode=shared limit=2")
	wantLines(t, "a shared semaphore", out.since(&mark), "E cfg A: ")
}

// A semaphore's grant says its place; a Proclaim replaces the value,
// and the watchers see it.
func TestPlacesAndProclaim(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, out := memNode(t, now)
	mark := 0
	for i := 1; i <= 3; i++ {
		request(t, c, now, ConnID(i), "A s 30 0 limit=3")
	}
	got := out.since(&mark)
	for i, l := range got {
		if !strings.HasSuffix(l, " place="+string(rune('1'+i))+"\n") {
			t.Fatalf("grants %q", got)
		}
	}
	request(t, c, now, 1, "A leader 10 0 value=node%201")
	tok := strings.Fields(out.since(&mark)[0])[2]
	request(t, c, now, 2, "L leader")
	if l := out.since(&mark); len(l) != 1 || !strings.Contains(l[0], " value="+tok+",node%201") {
		t.Fatalf("watch %q", l)
	}
	request(t, c, now, 1, "N leader "+tok+" 10 value=node%202")
	c.WatchSlice(now, 2)
	settle(c)
	l := out.since(&mark)
	if len(l) != 2 || l[1] != "N leader ok\n" || !strings.Contains(l[0], " value="+tok+",node%202") {
		t.Fatalf("proclaim %q", l)
	}
}

// A restart from the data directory keeps readers, sets, places and
// values; a set's grant cut short on disk is never applied.
func TestDiskKeepsSets(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, out := diskNode(t, now)
	c.ConnOpened(now, 1, "127.0.0.1:9")
	settle(c)
	request(t, c, now, 1, "A cfg 30 0 mode=shared value=r%201")
	request(t, c, now, 1, "A a 30 0 key=b key=c")
	request(t, c, now, 1, "A s 30 0 limit=2")
	var logged []string
	for _, l := range out.logged {
		logged = append(logged, l.rec)
	}
	if len(logged) != 5 || !strings.Contains(logged[1], " set=") || !strings.HasSuffix(logged[1], ",3\n") {
		t.Fatalf("logged %q", logged)
	}
	for _, cut := range []int{len(out.logged), 3} {
		r, _ := diskNode(t, now)
		for _, l := range out.logged[:cut] {
			if err := r.Recover(now, l.at, []byte(l.rec)); err != nil {
				t.Fatal(err)
			}
		}
		r.Recovered(now)
		cfg := r.queueOf(now, "cfg")
		if !cfg.Shared || cfg.Holders[0].Value != "r 1" {
			t.Fatalf("cfg %+v", cfg)
		}
		a := r.queueOf(now, "a")
		if cut == 3 {
			if a.Held || r.queueOf(now, "b").Held {
				t.Fatalf("half a set applied: %+v", a)
			}
			continue
		}
		if !a.Held || a.Holders[0].Set == 0 || r.queueOf(now, "c").Holders[0].Set != a.Holders[0].Set {
			t.Fatalf("a %+v", a)
		}
		if s := r.queueOf(now, "s"); s.Holders[0].Place != 1 {
			t.Fatalf("s %+v", s)
		}
	}
}
