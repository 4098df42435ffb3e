package engine

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// t0 is the fake clock's origin. Tests move time by adding to it and never
// read the wall clock.
var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func wtr(n uint64) Waiter { return Waiter{Conn: n, Seq: n} }

// describe renders events without their tokens, so a scenario can state
// the expected sequence in one line; tokens are checked separately.
func describe(evs []Event) []string {
	var s []string
	for _, ev := range evs {
		switch ev.Kind {
		case Granted:
			s = append(s, fmt.Sprintf("granted %s c%d/%d %s", ev.Key, ev.Waiter.Conn, ev.Waiter.Seq, ev.Lease))
		case TimedOut:
			s = append(s, fmt.Sprintf("timedout %s c%d/%d", ev.Key, ev.Waiter.Conn, ev.Waiter.Seq))
		case Freed:
			if ev.Expired {
				s = append(s, "expired "+ev.Key)
			} else {
				s = append(s, "freed "+ev.Key)
			}
		case Renewed:
			s = append(s, fmt.Sprintf("renewed %s %s", ev.Key, ev.Lease))
		default:
			s = append(s, "unknown "+ev.Key)
		}
	}
	return s
}

func wantEvents(t *testing.T, what string, got []Event, want ...string) {
	t.Helper()
	if d := describe(got); !reflect.DeepEqual(d, want) && !(len(d) == 0 && len(want) == 0) {
		t.Fatalf("%s: events\n got %q\nwant %q", what, d, want)
	}
}

// grantOf returns the Granted event for w in evs.
func grantOf(t *testing.T, evs []Event, w Waiter) Event {
	t.Helper()
	for _, ev := range evs {
		if ev.Kind == Granted && ev.Waiter == w {
			return ev
		}
	}
	t.Fatalf("no grant for %+v in %q", w, describe(evs))
	return Event{}
}

// mustAcquire asks and fails the test on a refusal; it returns the events.
func mustAcquire(t *testing.T, e *Engine, now time.Time, key string, lease, wait time.Duration, w Waiter) []Event {
	t.Helper()
	out, err := e.Acquire(now, key, 1, lease, wait, w, nil)
	if err != nil {
		t.Fatalf("Acquire(%s, %s, %s, %+v): %v", key, lease, wait, w, err)
	}
	return out
}

// hold acquires a free key and returns its token.
func hold(t *testing.T, e *Engine, now time.Time, key string, lease time.Duration, w Waiter) uint64 {
	t.Helper()
	out := mustAcquire(t, e, now, key, lease, 0, w)
	wantEvents(t, "acquire of a free key", out, fmt.Sprintf("granted %s c%d/%d %s", key, w.Conn, w.Seq, lease))
	return out[0].Token
}

// inspectLock is Inspect of a key with at most one holder (a lock), in
// the shape the tests of locks read: the holder (only Key set when there
// is none), whether it is held, and the waiters.
func inspectLock(t *testing.T, e *Engine, now time.Time, key string) (Holder, bool, []WaiterInfo) {
	t.Helper()
	hs, ws := e.Inspect(now, key)
	switch len(hs) {
	case 0:
		return Holder{Key: key}, false, ws
	case 1:
		return hs[0], true, ws
	}
	t.Fatalf("Inspect(%s) lists %d holders of a lock: %+v", key, len(hs), hs)
	return Holder{}, false, nil
}

func wantStats(t *testing.T, e *Engine, keys, waiters int) {
	t.Helper()
	if k, w := e.Stats(); k != keys || w != waiters {
		t.Fatalf("Stats = %d keys, %d waiters; want %d, %d", k, w, keys, waiters)
	}
}

func wantHolder(t *testing.T, e *Engine, now time.Time, key string, token uint64, leaseLeft time.Duration) {
	t.Helper()
	h, held, _ := inspectLock(t, e, now, key)
	if !held || h.Token != token || h.LeaseLeft != leaseLeft || h.Key != key {
		t.Fatalf("Inspect(%s) = %+v held=%v; want token %d lease left %s", key, h, held, token, leaseLeft)
	}
}

func wantQueue(t *testing.T, e *Engine, now time.Time, key string, ws ...Waiter) {
	t.Helper()
	_, infos := e.Inspect(now, key)
	var got []Waiter
	for _, wi := range infos {
		got = append(got, wi.Waiter)
	}
	if !reflect.DeepEqual(got, ws) {
		t.Fatalf("queue of %s = %+v; want %+v", key, got, ws)
	}
}

func wantFree(t *testing.T, e *Engine, now time.Time, key string) {
	t.Helper()
	h, held, ws := inspectLock(t, e, now, key)
	if held || h.Token != 0 || ws != nil {
		t.Fatalf("Inspect(%s) = %+v held=%v waiters=%+v; want free and forgotten", key, h, held, ws)
	}
	if ks, n := e.Keys(func(k string) bool { return k == key }, 10); n != 0 || len(ks) != 0 {
		t.Fatalf("Keys lists %q after it was freed: %q", key, ks)
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	e := New(Config{}, t0)
	if e.Config() != DefaultConfig {
		t.Fatalf("Config() = %+v; want the defaults %+v", e.Config(), DefaultConfig)
	}
	cfg := Config{Node: 3, MaxKeys: 3, MaxWaitersPerKey: 4, MaxWaiters: 5, MaxLease: time.Second, MaxWait: time.Minute, MaxLimit: 6, MaxEpochAhead: 2 * time.Second}
	if got := New(cfg, t0).Config(); got != cfg {
		t.Fatalf("Config() = %+v; want %+v", got, cfg)
	}
}

func TestAcquireFreeKeyGrantsAtOnce(t *testing.T) {
	e := New(Config{}, t0)
	out := mustAcquire(t, e, t0, "deploy", 30*time.Second, 5*time.Second, wtr(1))
	wantEvents(t, "acquire", out, "granted deploy c1/1 30s")
	if out[0].Token == 0 || out[0].Token != e.LastToken() {
		t.Fatalf("token %d; LastToken %d", out[0].Token, e.LastToken())
	}
	wantHolder(t, e, at(10*time.Second), "deploy", out[0].Token, 20*time.Second)
	wantStats(t, e, 1, 0)
	// The grant appends to the slice it is given.
	prev := []Event{{Kind: Renewed, Key: "other"}}
	out, err := e.Acquire(t0, "second", 1, time.Second, 0, wtr(2), prev)
	if err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "acquire appends", out, "renewed other 0s", "granted second c2/2 1s")
}

func TestFIFOHandoff(t *testing.T) {
	e := New(Config{}, t0)
	tok := hold(t, e, t0, "k", time.Minute, wtr(1))
	for i, w := range []Waiter{wtr(2), wtr(3), wtr(4)} {
		out := mustAcquire(t, e, at(time.Duration(i+1)*time.Second), "k", time.Duration(i+1)*time.Minute, 0, w)
		wantEvents(t, "acquire of a held key", out)
	}
	wantQueue(t, e, at(5*time.Second), "k", wtr(2), wtr(3), wtr(4))
	wantStats(t, e, 1, 3)

	now := at(10 * time.Second)
	for i, next := range []Waiter{wtr(2), wtr(3), wtr(4)} {
		out, ok := e.Release(now, "k", tok, nil)
		if !ok {
			t.Fatalf("release %d refused", i)
		}
		lease := time.Duration(i+1) * time.Minute
		wantEvents(t, "release", out, "freed k", fmt.Sprintf("granted k c%d/%d %s", next.Conn, next.Seq, lease))
		if out[0].Token != tok {
			t.Fatalf("Freed names token %d; want %d", out[0].Token, tok)
		}
		if out[1].Token <= tok {
			t.Fatalf("handoff token %d not larger than %d", out[1].Token, tok)
		}
		tok = out[1].Token
		// Handed on at once: the new lease counts from the release.
		wantHolder(t, e, now, "k", tok, lease)
		wantStats(t, e, 1, 2-i)
		now = now.Add(time.Second)
	}
	out, ok := e.Release(now, "k", tok, nil)
	if !ok {
		t.Fatal("last release refused")
	}
	wantEvents(t, "last release", out, "freed k")
	wantStats(t, e, 0, 0)
	wantFree(t, e, now, "k")
}

// A release sent again after its answer was lost finds its token gone:
// it is told ok, for ReleasedMemory, and changes nothing. A token whose
// lease ran out was lost, not released: its release is refused.
func TestReleaseAgainIsOK(t *testing.T) {
	e := New(Config{}, t0)
	tok := hold(t, e, t0, "k", time.Minute, wtr(1))
	mustAcquire(t, e, t0, "k", time.Minute, 0, wtr(2))
	out, ok := e.Release(at(time.Second), "k", tok, nil)
	if !ok {
		t.Fatal("release refused")
	}
	next := grantOf(t, out, wtr(2)).Token
	before := e.Snapshot(at(2 * time.Second))
	for _, d := range []time.Duration{2 * time.Second, time.Second + ReleasedMemory - time.Millisecond} {
		out, ok := e.Release(at(d), "k", tok, nil)
		if !ok || len(out) != 0 {
			t.Fatalf("release of a token released %s before: ok %v, events %q", d-time.Second, ok, describe(out))
		}
		if after := e.Snapshot(at(2 * time.Second)); !reflect.DeepEqual(before, after) {
			t.Fatalf("a release sent again changed the state:\n%+v\n%+v", before, after)
		}
	}
	if _, ok := e.Release(at(2*time.Second), "other", tok, nil); ok {
		t.Fatal("a released token releases another key")
	}
	if _, ok := e.Release(at(time.Second+ReleasedMemory), "k", tok, nil); ok {
		t.Fatal("a release is remembered past ReleasedMemory")
	}
	// next's lease runs out: it was lost, and its release says so.
	e.Advance(at(time.Second+time.Minute), nil)
	if _, ok := e.Release(at(time.Second+time.Minute), "k", next, nil); ok {
		t.Fatal("the release of an expired token succeeded")
	}
	// A standby remembers the releases it applied.
	s := New(Config{Node: 1}, t0)
	s.ApplyHeldID(t0, "k", 1, tok, time.Minute, "")
	s.ApplyReleased(at(time.Second), "k", tok)
	if out, ok := s.Release(at(2*time.Second), "k", tok, nil); !ok || len(out) != 0 {
		t.Fatalf("a standby that applied the release: ok %v, events %q", ok, describe(out))
	}
}

// The releases remembered are bounded by count as well as by time: past
// ReleasedMax in ReleasedMemory, the oldest are forgotten first.
func TestReleasedMemoryIsBounded(t *testing.T) {
	e := New(Config{MaxKeys: ReleasedMax + 100}, t0)
	var toks []uint64
	for i := range ReleasedMax + 10 {
		key := "k" + strconv.Itoa(i)
		tok := hold(t, e, t0, key, time.Minute, wtr(uint64(i)))
		if _, ok := e.Release(t0, key, tok, nil); !ok {
			t.Fatal("release refused")
		}
		toks = append(toks, tok)
	}
	for i, tok := range toks {
		if got, want := e.WasReleased(t0, "k"+strconv.Itoa(i), tok), i >= 10; got != want {
			t.Fatalf("release %d of %d remembered: %v, want %v", i, len(toks), got, want)
		}
	}
	if n := len(e.Releases(t0, ReleasedMax+10)); n != ReleasedMax {
		t.Fatalf("%d releases listed, want %d", n, ReleasedMax)
	}
	if rs := e.Releases(t0, 3); len(rs) != 3 || rs[2].Token != toks[len(toks)-1] {
		t.Fatalf("the last 3 releases: %+v, want the last 3 made", rs)
	}
	if n := len(e.Releases(at(ReleasedMemory), ReleasedMax)); n != 0 {
		t.Fatalf("%d releases listed after ReleasedMemory, want none", n)
	}
}

// After a burst of releases and none since, ForgetReleases gives back
// the room they took once ReleasedMemory has passed: the engine keeps
// neither the releases nor their keys for good, and remembers the next
// release as before.
func TestForgetReleasesGivesBackTheRoom(t *testing.T) {
	e := New(Config{MaxKeys: ReleasedMax + 100}, t0)
	for i := range ReleasedMax {
		key := "k" + strconv.Itoa(i)
		if _, ok := e.Release(t0, key, hold(t, e, t0, key, time.Minute, wtr(uint64(i))), nil); !ok {
			t.Fatal("release refused")
		}
	}
	if room := e.ForgetReleases(at(ReleasedMemory - time.Millisecond)); room != 0 {
		t.Fatalf("ForgetReleases before ReleasedMemory gave back room for %d releases, want none", room)
	}
	if room := e.ForgetReleases(at(ReleasedMemory)); room < ReleasedMax {
		t.Fatalf("ForgetReleases after ReleasedMemory gave back room for %d releases, want at least %d", room, ReleasedMax)
	}
	if e.released.ring != nil || e.released.slots != nil {
		t.Fatalf("the set keeps %d slots of ring and %d of index", len(e.released.ring), len(e.released.slots))
	}
	if room := e.ForgetReleases(at(ReleasedMemory)); room != 0 {
		t.Fatalf("a second ForgetReleases gave back room for %d, want none", room)
	}
	later := at(ReleasedMemory + time.Second)
	tok := hold(t, e, later, "again", time.Minute, wtr(1))
	if _, ok := e.Release(later, "again", tok, nil); !ok || !e.WasReleased(later, "again", tok) {
		t.Fatal("a release after the room was given back is not remembered")
	}
}

func TestReleaseRefusesWrongToken(t *testing.T) {
	setup := func(t *testing.T) (*Engine, uint64, uint64) {
		e := New(Config{}, t0)
		old := hold(t, e, t0, "k", time.Minute, wtr(1))
		mustAcquire(t, e, t0, "k", time.Minute, 0, wtr(2))
		out, ok := e.Release(at(time.Second), "k", old, nil)
		if !ok {
			t.Fatal("release refused")
		}
		cur := grantOf(t, out, wtr(2)).Token
		mustAcquire(t, e, at(time.Second), "k", time.Minute, 0, wtr(3))
		hold(t, e, t0, "other", time.Minute, wtr(4))
		return e, old, cur
	}
	cases := []struct {
		name  string
		key   string
		token func(old, cur uint64) uint64
	}{
		{"token+1", "k", func(old, cur uint64) uint64 { return cur + 1 }},
		{"token-1", "k", func(old, cur uint64) uint64 { return cur - 1 }},
		{"zero", "k", func(old, cur uint64) uint64 { return 0 }},
		{"right token, wrong key", "other", func(old, cur uint64) uint64 { return cur }},
		{"unknown key", "nope", func(old, cur uint64) uint64 { return cur }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, old, cur := setup(t)
			now := at(2 * time.Second)
			before := e.Snapshot(now)
			out, ok := e.Release(now, c.key, c.token(old, cur), nil)
			if ok {
				t.Fatal("release with a token that does not hold the key succeeded")
			}
			wantEvents(t, "refused release", out)
			if after := e.Snapshot(now); !reflect.DeepEqual(before, after) {
				t.Fatalf("refused release changed the state:\n%+v\n%+v", before, after)
			}
			wantHolder(t, e, now, "k", cur, time.Minute-time.Second)
			wantQueue(t, e, now, "k", wtr(3))
			wantFree(t, e, now, "nope")
		})
	}
}

func TestLeaseExpiryHandsOn(t *testing.T) {
	e := New(Config{}, t0)
	tok := hold(t, e, t0, "k", 10*time.Second, wtr(1))
	mustAcquire(t, e, at(time.Second), "k", 20*time.Second, 0, wtr(2))

	wantEvents(t, "advance before the deadline", e.Advance(at(10*time.Second-time.Nanosecond), nil))
	wantHolder(t, e, at(10*time.Second-time.Nanosecond), "k", tok, time.Nanosecond)

	out := e.Advance(at(10*time.Second), nil)
	wantEvents(t, "advance at the deadline", out, "expired k", "granted k c2/2 20s")
	if out[0].Token != tok || out[1].Token <= tok {
		t.Fatalf("tokens: freed %d (want %d), granted %d", out[0].Token, tok, out[1].Token)
	}
	wantHolder(t, e, at(10*time.Second), "k", out[1].Token, 20*time.Second)
	if _, ok := e.Release(at(10*time.Second), "k", tok, nil); ok {
		t.Fatal("the expired token still releases the key")
	}
}

func TestLateAdvanceCountsLeaseFromExpiry(t *testing.T) {
	e := New(Config{}, t0)
	hold(t, e, t0, "k", 10*time.Second, wtr(1))
	mustAcquire(t, e, at(time.Second), "k", 10*time.Second, 0, wtr(2))
	mustAcquire(t, e, at(2*time.Second), "k", 10*time.Second, 0, wtr(3))
	mustAcquire(t, e, at(3*time.Second), "k", 10*time.Second, 0, wtr(4))

	// Nobody called Advance for 25s: the first lease ended at 10s, the
	// second (granted at 10s) at 20s; the third, granted at 20s, runs to 30s.
	out := e.Advance(at(25*time.Second), nil)
	wantEvents(t, "late advance", out,
		"expired k", "granted k c2/2 10s",
		"expired k", "granted k c3/3 10s")
	wantHolder(t, e, at(25*time.Second), "k", out[3].Token, 5*time.Second)
	if d, ok := e.NextDeadline(); !ok || !d.Equal(at(30*time.Second)) {
		t.Fatalf("NextDeadline = %v %v; want %v", d, ok, at(30*time.Second))
	}
	wantEvents(t, "third lease end", e.Advance(at(30*time.Second), nil), "expired k", "granted k c4/4 10s")
	wantHolder(t, e, at(31*time.Second), "k", e.LastToken(), 9*time.Second)
}

func TestReleaseAtLeaseDeadline(t *testing.T) {
	for _, c := range []struct {
		name   string
		when   time.Duration
		wantOK bool
		want   []string
	}{
		{"one nanosecond before", 10*time.Second - time.Nanosecond, true, []string{"freed k", "granted k c2/2 1m0s"}},
		{"at the deadline expiry wins", 10 * time.Second, false, []string{"expired k", "granted k c2/2 1m0s"}},
		{"after the deadline", 11 * time.Second, false, []string{"expired k", "granted k c2/2 1m0s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := New(Config{}, t0)
			tok := hold(t, e, t0, "k", 10*time.Second, wtr(1))
			mustAcquire(t, e, t0, "k", time.Minute, 0, wtr(2))
			out, ok := e.Release(at(c.when), "k", tok, nil)
			if ok != c.wantOK {
				t.Fatalf("Release ok = %v; want %v", ok, c.wantOK)
			}
			wantEvents(t, "release", out, c.want...)
			// Either way the waiter's lease counts from when the key freed.
			grantAt := min(c.when, 10*time.Second)
			wantHolder(t, e, at(c.when), "k", out[1].Token, time.Minute-(c.when-grantAt))
		})
	}
}

func TestWaitEndingAsKeyFrees(t *testing.T) {
	t.Run("lease ends at the same instant", func(t *testing.T) {
		e := New(Config{}, t0)
		hold(t, e, t0, "k", 5*time.Second, wtr(1))
		mustAcquire(t, e, t0, "k", time.Minute, 5*time.Second, wtr(2))
		out := e.Advance(at(5*time.Second), nil)
		wantEvents(t, "advance", out, "timedout k c2/2", "expired k")
		wantStats(t, e, 0, 0)
		wantFree(t, e, at(5*time.Second), "k")
	})
	t.Run("release at the same instant", func(t *testing.T) {
		e := New(Config{}, t0)
		tok := hold(t, e, t0, "k", time.Hour, wtr(1))
		mustAcquire(t, e, at(time.Second), "k", time.Minute, 4*time.Second, wtr(2))
		out, ok := e.Release(at(5*time.Second), "k", tok, nil)
		if !ok {
			t.Fatal("release refused")
		}
		wantEvents(t, "release", out, "timedout k c2/2", "freed k")
		wantStats(t, e, 0, 0)
	})
	t.Run("release one nanosecond earlier grants", func(t *testing.T) {
		e := New(Config{}, t0)
		tok := hold(t, e, t0, "k", time.Hour, wtr(1))
		mustAcquire(t, e, at(time.Second), "k", time.Minute, 4*time.Second, wtr(2))
		out, ok := e.Release(at(5*time.Second-time.Nanosecond), "k", tok, nil)
		if !ok {
			t.Fatal("release refused")
		}
		wantEvents(t, "release", out, "freed k", "granted k c2/2 1m0s")
		// The grant ended the wait: it must not time out later.
		wantEvents(t, "after the wait would have ended", e.Advance(at(6*time.Second), nil))
		wantStats(t, e, 1, 0)
	})
	t.Run("head times out then the next is granted", func(t *testing.T) {
		e := New(Config{}, t0)
		hold(t, e, t0, "k", 5*time.Second, wtr(1))
		mustAcquire(t, e, t0, "k", time.Minute, 5*time.Second, wtr(2))
		mustAcquire(t, e, t0, "k", time.Minute, 6*time.Second, wtr(3))
		out := e.Advance(at(5*time.Second), nil)
		wantEvents(t, "advance", out, "timedout k c2/2", "expired k", "granted k c3/3 1m0s")
	})
}

func TestWaitZeroWaitsForever(t *testing.T) {
	const century = 100 * 365 * 24 * time.Hour
	e := New(Config{MaxLease: century}, t0)
	tok := hold(t, e, t0, "k", century, wtr(1))
	mustAcquire(t, e, at(time.Second), "k", time.Minute, 0, wtr(2))
	if d, ok := e.NextDeadline(); !ok || !d.Equal(at(century)) {
		t.Fatalf("NextDeadline = %v %v; want only the lease end %v", d, ok, at(century))
	}
	far := at(century - time.Nanosecond)
	wantEvents(t, "advance far in the future", e.Advance(far, nil))
	wantStats(t, e, 1, 1)
	_, _, ws := inspectLock(t, e, far, "k")
	if len(ws) != 1 || ws[0].WaitLeft != 0 || ws[0].Waited != century-time.Second-time.Nanosecond {
		t.Fatalf("waiter info %+v; want waiting forever (WaitLeft 0)", ws)
	}
	out, ok := e.Release(far, "k", tok, nil)
	if !ok {
		t.Fatal("release refused")
	}
	wantEvents(t, "release", out, "freed k", "granted k c2/2 1m0s")
}

func TestRenew(t *testing.T) {
	e := New(Config{MaxLease: time.Hour}, t0)
	tok := hold(t, e, t0, "k", 10*time.Second, wtr(1))
	mustAcquire(t, e, t0, "k", time.Minute, 0, wtr(2))

	out, err := e.Renew(at(8*time.Second), "k", tok, 10*time.Second, nil)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	wantEvents(t, "renew", out, "renewed k 10s")
	if out[0].Token != tok {
		t.Fatalf("Renewed names token %d; want %d", out[0].Token, tok)
	}
	// The lease restarts from the renewal: it now ends at 18s, not 10s.
	wantEvents(t, "past the old deadline", e.Advance(at(17*time.Second), nil))
	wantHolder(t, e, at(17*time.Second), "k", tok, time.Second)
	if d, _ := e.NextDeadline(); !d.Equal(at(18 * time.Second)) {
		t.Fatalf("NextDeadline = %v; want %v", d, at(18*time.Second))
	}

	// A renewal may shorten the lease too.
	if _, err := e.Renew(at(17*time.Second), "k", tok, 500*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	wantHolder(t, e, at(17*time.Second), "k", tok, 500*time.Millisecond)

	for _, c := range []struct {
		name  string
		key   string
		token uint64
		lease time.Duration
		want  error
	}{
		{"wrong token", "k", tok + 1, time.Second, ErrNotHeld},
		{"unknown key", "nope", tok, time.Second, ErrNotHeld},
		{"zero lease", "k", tok, 0, ErrLeaseRange},
		{"negative lease", "k", tok, -time.Second, ErrLeaseRange},
		{"lease above the limit", "k", tok, time.Hour + 1, ErrLeaseRange},
	} {
		out, err := e.Renew(at(17*time.Second), c.key, c.token, c.lease, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Renew error %v; want %v", c.name, err, c.want)
		}
		wantEvents(t, c.name, out)
		wantHolder(t, e, at(17*time.Second), "k", tok, 500*time.Millisecond)
	}

	// At the deadline the lease has expired: the renewal comes too late.
	out, err = e.Renew(at(17500*time.Millisecond), "k", tok, time.Minute, nil)
	if !errors.Is(err, ErrNotHeld) {
		t.Fatalf("renew at the deadline: %v; want ErrNotHeld", err)
	}
	wantEvents(t, "renew at the deadline", out, "expired k", "granted k c2/2 1m0s")
	if _, err := e.Renew(at(18*time.Second), "k", tok, time.Minute, nil); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("renew after expiry: %v; want ErrNotHeld", err)
	}
	// The old token cannot renew the new holder's lease.
	wantHolder(t, e, at(18*time.Second), "k", e.LastToken(), time.Minute-500*time.Millisecond)
}

func TestCancel(t *testing.T) {
	e := New(Config{}, t0)
	tok := hold(t, e, t0, "k", time.Minute, wtr(1))
	mustAcquire(t, e, t0, "k", time.Minute, 0, wtr(2))
	mustAcquire(t, e, t0, "k", time.Minute, 3*time.Second, wtr(3))
	mustAcquire(t, e, t0, "k", time.Minute, 0, wtr(4))

	if !cancel(t, e, t0, wtr(3)) {
		t.Fatal("Cancel of a waiter reported false")
	}
	if cancel(t, e, t0, wtr(3)) {
		t.Fatal("second Cancel of the same waiter reported true")
	}
	if cancel(t, e, t0, wtr(99)) {
		t.Fatal("Cancel of an unknown waiter reported true")
	}
	if cancel(t, e, t0, wtr(1)) {
		t.Fatal("Cancel of the holder (not a waiter) reported true")
	}
	wantQueue(t, e, t0, "k", wtr(2), wtr(4))
	wantStats(t, e, 1, 2)
	// Its wait deadline went with it.
	if d, _ := e.NextDeadline(); !d.Equal(at(time.Minute)) {
		t.Fatalf("NextDeadline = %v; want the lease end", d)
	}
	wantEvents(t, "past the cancelled wait", e.Advance(at(4*time.Second), nil))

	out, _ := e.Release(at(5*time.Second), "k", tok, nil)
	wantEvents(t, "release", out, "freed k", "granted k c2/2 1m0s")
	out, _ = e.Release(at(6*time.Second), "k", out[1].Token, nil)
	wantEvents(t, "release skips the cancelled waiter", out, "freed k", "granted k c4/4 1m0s")
	if cancel(t, e, at(6*time.Second), wtr(4)) {
		t.Fatal("Cancel of a granted waiter reported true")
	}
	wantHolder(t, e, at(6*time.Second), "k", out[1].Token, time.Minute)
}

func TestCancelLastWaiterKeepsHeldKey(t *testing.T) {
	e := New(Config{}, t0)
	tok := hold(t, e, t0, "k", time.Minute, wtr(1))
	mustAcquire(t, e, t0, "k", time.Minute, 0, wtr(2))
	cancel(t, e, t0, wtr(2))
	wantStats(t, e, 1, 0)
	wantHolder(t, e, t0, "k", tok, time.Minute)
	out, _ := e.Release(t0, "k", tok, nil)
	wantEvents(t, "release", out, "freed k")
	wantStats(t, e, 0, 0)
}

func TestDropWaiters(t *testing.T) {
	e := New(Config{}, t0)
	ta := hold(t, e, t0, "a", time.Minute, wtr(1))
	tb := hold(t, e, t0, "b", 2*time.Minute, wtr(2))
	// Queue ages interleave across keys. At 3s two waiters join in an
	// order that their Seq numbers do not follow: queue age, not Seq,
	// decides.
	mustAcquire(t, e, at(2*time.Second), "b", time.Minute, 0, Waiter{Conn: 10, Seq: 1})
	mustAcquire(t, e, at(1*time.Second), "a", time.Minute, time.Hour, Waiter{Conn: 11, Seq: 7})
	mustAcquire(t, e, at(3*time.Second), "a", time.Minute, 0, Waiter{Conn: 12, Seq: 9})
	mustAcquire(t, e, at(3*time.Second), "a", time.Minute, 0, Waiter{Conn: 13, Seq: 2})
	mustAcquire(t, e, at(3*time.Second), "b", time.Minute, 0, Waiter{Conn: 14, Seq: 1})

	out := e.DropWaiters([]Event{{Kind: Freed, Key: "before"}})
	wantEvents(t, "drop", out,
		"freed before",
		"timedout a c11/7",
		"timedout b c10/1",
		"timedout a c12/9",
		"timedout a c13/2",
		"timedout b c14/1")
	wantStats(t, e, 2, 0)
	wantHolder(t, e, at(4*time.Second), "a", ta, time.Minute-4*time.Second)
	wantHolder(t, e, at(4*time.Second), "b", tb, 2*time.Minute-4*time.Second)
	wantQueue(t, e, at(4*time.Second), "a")
	if d, _ := e.NextDeadline(); !d.Equal(at(time.Minute)) {
		t.Fatalf("NextDeadline = %v; want the first lease end (the waits are gone)", d)
	}
	out, _ = e.Release(at(5*time.Second), "a", ta, nil)
	wantEvents(t, "release after drop", out, "freed a")
	wantStats(t, e, 1, 0)
	wantEvents(t, "drop with no waiters", e.DropWaiters(nil))
}

// TestDropWaitersDeterministic repeats a drop of waiters that joined at
// the same instant: the engine promises the same events for the same
// calls, whatever the map iteration order.
func TestDropWaitersDeterministic(t *testing.T) {
	var first []string
	for i := range 50 {
		e := New(Config{}, t0)
		for k := range 8 {
			hold(t, e, t0, fmt.Sprint("k", k), time.Minute, Waiter{Conn: 100, Seq: uint64(k)})
		}
		for c := range 16 {
			mustAcquire(t, e, t0, fmt.Sprint("k", c%8), time.Minute, 0, Waiter{Conn: uint64(c), Seq: 1})
		}
		got := describe(e.DropWaiters(nil))
		if i == 0 {
			first = got
			for c, s := range got {
				if want := fmt.Sprintf("timedout k%d c%d/1", c%8, c); s != want {
					t.Fatalf("drop %d = %q; want %q (arrival order)", c, s, want)
				}
			}
		} else if !reflect.DeepEqual(got, first) {
			t.Fatalf("run %d dropped waiters in another order:\n%q\n%q", i, got, first)
		}
	}
}

func TestTimedOutWaiterLeavesNothing(t *testing.T) {
	e := New(Config{}, t0)
	tok := hold(t, e, t0, "k", time.Minute, wtr(1))
	mustAcquire(t, e, t0, "k", time.Minute, 2*time.Second, wtr(2))
	out := e.Advance(at(2*time.Second), nil)
	wantEvents(t, "wait elapsed", out, "timedout k c2/2")
	wantStats(t, e, 1, 0)
	wantQueue(t, e, at(2*time.Second), "k")
	if _, ok := e.NextDeadline(); !ok {
		t.Fatal("lease deadline lost")
	}

	out, _ = e.Release(at(3*time.Second), "k", tok, nil)
	wantEvents(t, "release after the timeout: no grant", out, "freed k")
	wantStats(t, e, 0, 0)
	wantFree(t, e, at(3*time.Second), "k")
	if d, ok := e.NextDeadline(); ok {
		t.Fatalf("NextDeadline = %v with nothing held or waited", d)
	}
	// The timed-out waiter may ask again with the same identity.
	mustAcquire(t, e, at(3*time.Second), "k", time.Minute, 0, wtr(2))
}

func TestKeysForgottenWhenFree(t *testing.T) {
	e := New(Config{}, t0)
	tok := hold(t, e, t0, "released", time.Minute, wtr(1))
	hold(t, e, t0, "expired", time.Second, wtr(2))
	hold(t, e, t0, "kept", time.Hour, wtr(3))
	wantStats(t, e, 3, 0)
	e.Release(t0, "released", tok, nil)
	e.Advance(at(time.Second), nil)
	wantStats(t, e, 1, 0)
	wantFree(t, e, at(time.Second), "released")
	wantFree(t, e, at(time.Second), "expired")
	if ks, n := e.Keys(func(string) bool { return true }, 10); n != 1 || !reflect.DeepEqual(ks, []string{"kept"}) {
		t.Fatalf("Keys = %q %d", ks, n)
	}
}

func TestLimits(t *testing.T) {
	cfg := Config{MaxKeys: 2, MaxWaitersPerKey: 2, MaxLease: time.Minute, MaxWait: time.Hour}
	setup := func(t *testing.T) *Engine {
		e := New(cfg, t0)
		hold(t, e, t0, "a", time.Minute, wtr(1))
		hold(t, e, t0, "b", time.Minute, wtr(2))
		mustAcquire(t, e, t0, "a", time.Minute, 0, wtr(3))
		mustAcquire(t, e, t0, "a", time.Minute, time.Hour, wtr(4))
		return e
	}
	for _, c := range []struct {
		name  string
		key   string
		lease time.Duration
		wait  time.Duration
		w     Waiter
		want  error
	}{
		{"third key", "c", time.Second, 0, wtr(10), ErrTooManyKeys},
		{"third waiter", "a", time.Second, 0, wtr(10), ErrQueueFull},
		{"lease above max", "b", time.Minute + 1, 0, wtr(10), ErrLeaseRange},
		{"zero lease", "b", 0, 0, wtr(10), ErrLeaseRange},
		{"negative lease", "b", -1, 0, wtr(10), ErrLeaseRange},
		{"wait above max", "b", time.Second, time.Hour + 1, wtr(10), ErrWaitRange},
		{"negative wait", "b", time.Second, -1, wtr(10), ErrWaitRange},
		{"duplicate waiter same key", "a", time.Second, 0, wtr(3), ErrDuplicateWaitr},
		{"duplicate waiter other key", "b", time.Second, 0, wtr(4), ErrDuplicateWaitr},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			before := e.Snapshot(at(time.Second))
			out, err := e.Acquire(at(time.Second), c.key, 1, c.lease, c.wait, c.w, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("Acquire error %v; want %v", err, c.want)
			}
			wantEvents(t, "refusal", out)
			wantStats(t, e, 2, 2)
			wantQueue(t, e, at(time.Second), "a", wtr(3), wtr(4))
			if after := e.Snapshot(at(time.Second)); !reflect.DeepEqual(before, after) {
				t.Fatalf("refusal changed the holders:\n%+v\n%+v", before, after)
			}
		})
	}
	t.Run("at the limits", func(t *testing.T) {
		e := setup(t)
		mustAcquire(t, e, t0, "b", time.Minute, time.Hour, wtr(10)) // lease and wait exactly at the max
		mustAcquire(t, e, t0, "b", time.Nanosecond, 0, wtr(11))     // wait 0 is always allowed
		wantStats(t, e, 2, 4)
	})
	t.Run("room again after leaving", func(t *testing.T) {
		e := setup(t)
		if _, err := e.Acquire(t0, "a", 1, time.Minute, 0, wtr(10), nil); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("third waiter: %v", err)
		}
		cancel(t, e, t0, wtr(4))
		mustAcquire(t, e, t0, "a", time.Minute, 0, wtr(10))
		wantQueue(t, e, t0, "a", wtr(3), wtr(10))
	})
	t.Run("new key after one is freed", func(t *testing.T) {
		e := New(cfg, t0)
		ta := hold(t, e, t0, "a", time.Minute, wtr(1))
		hold(t, e, t0, "b", time.Minute, wtr(2))
		if _, err := e.Acquire(t0, "c", 1, time.Second, 0, wtr(3), nil); !errors.Is(err, ErrTooManyKeys) {
			t.Fatalf("third key: %v", err)
		}
		e.Release(t0, "a", ta, nil)
		hold(t, e, t0, "c", time.Second, wtr(3))
		// c took the slot a freed: the limit holds again.
		if _, err := e.Acquire(t0, "d", 1, time.Second, 0, wtr(4), nil); !errors.Is(err, ErrTooManyKeys) {
			t.Fatalf("third key: %v", err)
		}
	})
	t.Run("granted waiter may ask again", func(t *testing.T) {
		e := setup(t)
		out, _ := e.Release(t0, "b", e.LastToken(), nil)
		wantEvents(t, "release b", out, "freed b")
		hold(t, e, t0, "b", time.Minute, wtr(2))
	})
}

// TestLimitRefusalWords: a refusal at one of the node's limits says which
// limit in the node's terms, as a library passes it on, with no command
// line flag; and counts in words that agree with the number.
func TestLimitRefusalWords(t *testing.T) {
	e := New(Config{MaxKeys: 1, MaxWaitersPerKey: 1, MaxWaiters: 1}, t0)
	hold(t, e, t0, "a", time.Minute, wtr(1))
	mustAcquire(t, e, t0, "a", time.Minute, 0, wtr(2))
	for _, c := range []struct {
		key  string
		want string
	}{
		{"a", "queue full: the node's limit of 1 waiter per key is reached; retry later"},
		{"b", "too many keys: the node's limit of 1 key held or waited on at once is reached; release some first"},
	} {
		_, err := e.Acquire(t0, c.key, 1, time.Minute, 0, wtr(3), nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("acquire of %s refused with %v; want %q", c.key, err, c.want)
		}
	}
}

// TestMaxWaiters: the cap on waiters counts the queues of every key.
func TestMaxWaiters(t *testing.T) {
	cfg := Config{MaxWaitersPerKey: 2, MaxWaiters: 3}
	setup := func(t *testing.T) (*Engine, uint64) {
		e := New(cfg, t0)
		ta := hold(t, e, t0, "a", time.Minute, wtr(1))
		hold(t, e, t0, "b", time.Minute, wtr(2))
		mustAcquire(t, e, t0, "a", time.Minute, 0, wtr(3))
		mustAcquire(t, e, t0, "a", time.Minute, 5*time.Second, wtr(4))
		mustAcquire(t, e, t0, "b", time.Minute, 0, wtr(5))
		wantStats(t, e, 2, 3)
		return e, ta
	}
	t.Run("refused beyond the cap", func(t *testing.T) {
		e, _ := setup(t)
		before := e.Snapshot(t0)
		out, err := e.Acquire(t0, "b", 1, time.Minute, 0, wtr(6), nil)
		if !errors.Is(err, ErrTooManyWaiters) {
			t.Fatalf("fourth waiter: %v; want ErrTooManyWaiters", err)
		}
		if want := "the node's limit of 3 waiters over all keys"; !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "--") {
			t.Fatalf("refusal %q does not say %q in the node's terms, without a flag", err, want)
		}
		wantEvents(t, "refusal", out)
		wantStats(t, e, 2, 3)
		wantQueue(t, e, t0, "b", wtr(5))
		if after := e.Snapshot(t0); !reflect.DeepEqual(before, after) {
			t.Fatalf("refusal changed the holders:\n%+v\n%+v", before, after)
		}
	})
	t.Run("the queue of the key is checked first", func(t *testing.T) {
		e, _ := setup(t)
		if _, err := e.Acquire(t0, "a", 1, time.Minute, 0, wtr(6), nil); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("third waiter of a: %v; want ErrQueueFull", err)
		}
	})
	t.Run("a free key is granted at the cap", func(t *testing.T) {
		e, _ := setup(t)
		hold(t, e, t0, "c", time.Minute, wtr(6))
	})
	t.Run("room after a cancel", func(t *testing.T) {
		e, _ := setup(t)
		cancel(t, e, t0, wtr(5))
		mustAcquire(t, e, t0, "b", time.Minute, 0, wtr(6))
		wantStats(t, e, 2, 3)
	})
	t.Run("room after a timeout", func(t *testing.T) {
		e, _ := setup(t)
		mustAcquire(t, e, at(5*time.Second), "b", time.Minute, 0, wtr(6))
		wantQueue(t, e, at(5*time.Second), "a", wtr(3))
	})
	t.Run("room after a handoff", func(t *testing.T) {
		e, ta := setup(t)
		out, _ := e.Release(t0, "a", ta, nil)
		wantEvents(t, "release", out, "freed a", "granted a c3/3 1m0s")
		mustAcquire(t, e, t0, "b", time.Minute, 0, wtr(6))
		wantStats(t, e, 2, 3)
	})
}

func TestNextDeadline(t *testing.T) {
	e := New(Config{}, t0)
	if _, ok := e.NextDeadline(); ok {
		t.Fatal("empty engine has a deadline")
	}
	var ta uint64
	steps := []struct {
		name string
		do   func()
		want time.Duration
	}{
		{"one lease", func() { ta = hold(t, e, t0, "a", 30*time.Second, wtr(1)) }, 30 * time.Second},
		{"shorter lease", func() { hold(t, e, t0, "b", 20*time.Second, wtr(2)) }, 20 * time.Second},
		{"forever wait does not count", func() { mustAcquire(t, e, t0, "a", time.Minute, 0, wtr(3)) }, 20 * time.Second},
		{"earlier wait end", func() { mustAcquire(t, e, at(time.Second), "a", time.Minute, 4*time.Second, wtr(4)) }, 5 * time.Second},
		{"later wait end", func() { mustAcquire(t, e, t0, "b", time.Minute, 25*time.Second, wtr(5)) }, 5 * time.Second},
		{"wait timed out", func() { e.Advance(at(5*time.Second), nil) }, 20 * time.Second},
		{"lease expiry hands b on", func() { e.Advance(at(20*time.Second), nil) }, 30 * time.Second},
		{"renewal moves a", func() { e.Renew(at(21*time.Second), "a", ta, 100*time.Second, nil) }, 80 * time.Second},
	}
	for _, s := range steps {
		s.do()
		d, ok := e.NextDeadline()
		if !ok || !d.Equal(at(s.want)) {
			t.Fatalf("%s: NextDeadline = %v %v; want %v", s.name, d, ok, at(s.want))
		}
	}
}

// TestFreeListsBounded: a burst of waiters that all leave must not stay
// allocated for the life of the engine.
func TestFreeListsBounded(t *testing.T) {
	e := New(Config{}, t0)
	for k := range 10 {
		key := fmt.Sprint("k", k)
		hold(t, e, t0, key, time.Minute, Waiter{Conn: 1 << 40, Seq: uint64(k)})
		for i := range 1000 {
			mustAcquire(t, e, t0, key, time.Minute, 0, Waiter{Conn: uint64(k), Seq: uint64(i)})
		}
	}
	wantStats(t, e, 10, 10000)
	e.DropWaiters(nil)
	for k := range 5000 {
		hold(t, e, t0, fmt.Sprint("x", k), time.Second, wtr(uint64(k)))
	}
	e.Advance(at(time.Second), nil)
	wantStats(t, e, 10, 0)
	if len(e.freeWait) > 4096 || len(e.freeKeys) > 4096 {
		t.Fatalf("free lists keep %d waiters and %d keys after the burst", len(e.freeWait), len(e.freeKeys))
	}
	// Nor may the slice of keys that Scan walks keep the burst's keys
	// alive beyond its length.
	for i := e.all.len(); i < len(e.all.c)*chunkLen; i++ {
		if *e.all.at(i) != nil {
			t.Fatalf("slot %d past the %d keys still holds a key", i, e.all.len())
		}
	}
}
