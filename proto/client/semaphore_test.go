package client

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lockd-io/lockd/proto"
)

// AcquireWith(Limit(n)) asks for one of n places: limit=N travels before
// the id, on the first send and on every re-send, and the lock says how
// many may hold the key.
func TestAcquireWithLimitSendsItOnEverySend(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	waitFor(t, "2 live connections", func() bool { return c.liveConns("") == 2 && f.accepts.Load() == 2 })
	res := async(func() lockResult {
		l, err := c.AcquireWith(bg, "builds", 30*time.Second, 0, Limit(3))
		return lockResult{l, err}
	})
	r := f.next()
	line, id, _ := strings.Cut(noRef(r.line), " id=")
	if line != "A builds 30 0 limit=3" || id == "" {
		t.Fatalf("first request %q", r.line)
	}
	// The connection drops before the answer: the re-send on the other
	// one is the same request.
	r.sc.drop()
	r2 := f.next()
	if noRef(r2.line) != noRef(r.line) {
		t.Fatalf("re-sent request %q, want %q", r2.line, r.line)
	}
	r2.sc.send("A builds 9")
	got := await(t, res)
	if got.err != nil || !sameLock(got.lock, Lock{Key: "builds", Token: 9, Lease: 30 * time.Second, Limit: 3, ID: id}) {
		t.Fatalf("acquire: %+v", got)
	}
}

// A redirect moves a semaphore's acquire to the active with its limit.
func TestAcquireWithLimitFollowsRedirects(t *testing.T) {
	checkLeaks(t)
	active := newFakeServer(t, nil)
	standby := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		sc.send("M " + r.words[1] + " " + active.addr)
		return true
	})
	c := newTestClient(t, []string{standby.addr}, Options{}, hooks{})
	res := async(func() lockResult {
		l, err := c.AcquireWith(bg, "builds", 30*time.Second, 0, Limit(2))
		return lockResult{l, err}
	})
	r := active.next()
	if line, _, _ := strings.Cut(r.line, " id="); line != "A builds 30 0 limit=2" {
		t.Fatalf("request at the active %q", r.line)
	}
	r.sc.send("A builds 4")
	if got := await(t, res); got.err != nil || got.lock.Token != 4 || got.lock.Limit != 2 {
		t.Fatalf("acquire: %+v", got)
	}
}

// A lock is limit 1, sent as the protocol's plain acquire, without the
// word: Limit(1) and no option write the same line. A limit out of range
// is refused before anything is sent.
func TestAcquireLimitOneAndOutOfRange(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	for _, opts := range [][]AcquireOption{nil, {Limit(1)}, {{}}} {
		res := async(func() lockResult {
			l, err := c.AcquireWith(bg, "k", 30*time.Second, 0, opts...)
			return lockResult{l, err}
		})
		r := f.next()
		if line, _, _ := strings.Cut(r.line, " id="); line != "A k 30 0" {
			t.Errorf("options %v: request %q", opts, r.line)
		}
		r.sc.send("A k 1")
		if got := await(t, res); got.err != nil || got.lock.Limit != 1 {
			t.Errorf("options %v: %+v", opts, got)
		}
	}
	for _, n := range []int{0, -1, proto.MaxLimit + 1} {
		_, err := c.AcquireWith(bg, "k", 30*time.Second, 0, Limit(n))
		if err == nil || !strings.Contains(err.Error(), "limit") || !strings.Contains(err.Error(), "1 (a lock) to") {
			t.Errorf("Limit(%d): %v", n, err)
		}
	}
	if n := f.requests(); n != 3 {
		t.Errorf("%d requests reached the node, want the 3 in range", n)
	}
}

// A refusal for another limit is the node's ServerError, which matches
// ErrLimitMismatch; other refusals do not.
func TestLimitMismatch(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		switch r.words[1] {
		case "builds":
			sc.send(`E builds A: limit mismatch: key "builds" allows 2 holders; this acquire asked for 3: every acquire of it must ask for that limit`)
		default:
			sc.send("E " + r.words[1] + " A: limit out of range: limit 5000; a key allows 1 (a lock, the default) to 1024 holders at once")
		}
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	_, err := c.AcquireWith(bg, "builds", time.Second, 0, Limit(3))
	var se *ServerError
	if !errors.Is(err, ErrLimitMismatch) || !errors.As(err, &se) || !strings.Contains(se.Msg, "allows 2 holders") {
		t.Fatalf("err = %v, want a ServerError matching ErrLimitMismatch", err)
	}
	_, err = c.AcquireWith(bg, "other", time.Second, 0, Limit(5000))
	if !errors.As(err, &se) || errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("err = %v, want a ServerError that is no limit mismatch", err)
	}
}

// Options.Name leads every acquire id, so that Q says who holds a key;
// the ids stay unique and valid whatever the name holds.
func TestNameLeadsTheIDs(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, grantAll())
	long := strings.Repeat("é", MaxNameLen) // 2 bytes each: cut between runes
	for _, tt := range []struct{ name, want string }{
		{"alice@ci-1:4242", "alice@ci-1:4242"},
		{"build job\t7", "build_job_7"},
		{"a#b", "a#b"},
		{long, strings.Repeat("é", MaxNameLen/2)},
		{"", ""},
	} {
		c := newTestClient(t, []string{f.addr}, Options{Name: tt.name}, hooks{})
		seen := make(map[string]bool)
		for range 3 {
			l, err := c.Acquire(bg, "k", time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			id := l.ID
			if seen[id] || proto.CheckID(id) != "" || !utf8.ValidString(id) {
				t.Errorf("name %q: id %q seen before or not a valid id", tt.name, id)
			}
			seen[id] = true
			if tt.name == "" {
				if strings.ContainsRune(id, proto.IDSep) {
					t.Errorf("no name: id %q has a name part", id)
				}
				continue
			}
			if got := proto.IDName(id); got != tt.want {
				t.Errorf("name %q: id %q names %q, want %q", tt.name, id, got, tt.want)
			}
		}
		c.Close()
	}
	if n := len(cleanName(long)); n > MaxNameLen {
		t.Errorf("a long name keeps %d bytes, more than %d", n, MaxNameLen)
	}
}

// Queue reads every holder of a semaphore and the id of each holder and
// waiter.
func TestQueueReadsHoldersAndIDs(t *testing.T) {
	checkLeaks(t)
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		sc.send("Q builds 7 29.5 1 3.2,127.0.0.1:51234 limit=3 holder=9,12 id=7,alice#1 id=9,bob#2 wid=1,carol#3")
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{}, hooks{})
	q, err := c.Queue(bg, "builds")
	if err != nil {
		t.Fatal(err)
	}
	want := []proto.QueueHolder{{Token: 7, LeaseLeft: 29500 * time.Millisecond, ID: "alice#1"}, {Token: 9, LeaseLeft: 12 * time.Second, ID: "bob#2"}}
	if q.Limit != 3 || len(q.Holders) != 2 || q.Holders[0] != want[0] || q.Holders[1] != want[1] ||
		len(q.Waiters) != 1 || q.Waiters[0].ID != "carol#3" {
		t.Errorf("queue %+v", q)
	}
}
