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

// keysOf reads a set of keys from words: "a" is a lock taken as its
// writer, "a/r" as a reader, "a=3" a place of a semaphore of 3.
func keysOf(words ...string) []SetKey {
	var ks []SetKey
	for _, w := range words {
		k := SetKey{Key: w}
		if name, ok := strings.CutSuffix(w, "/r"); ok {
			k.Key, k.Mode = name, Shared
		}
		if name, n, ok := strings.Cut(k.Key, "="); ok {
			k.Key = name
			k.Limit, _ = strconv.Atoi(n)
		}
		ks = append(ks, k)
	}
	return ks
}

// brief renders events as describe does, with the mode of a reader and
// the set of a set's events: "granted a c1/1 shared set".
func brief(evs []Event) []string {
	var s []string
	for _, ev := range evs {
		var b strings.Builder
		switch ev.Kind {
		case Granted:
			fmt.Fprintf(&b, "granted %s c%d/%d", ev.Key, ev.Waiter.Conn, ev.Waiter.Seq)
		case TimedOut:
			fmt.Fprintf(&b, "timedout %s c%d/%d", ev.Key, ev.Waiter.Conn, ev.Waiter.Seq)
		case Freed:
			if ev.Expired {
				b.WriteString("expired " + ev.Key)
			} else {
				b.WriteString("freed " + ev.Key)
			}
		case Renewed:
			b.WriteString("renewed " + ev.Key)
		}
		if ev.Mode == Shared {
			b.WriteString(" shared")
		}
		if ev.SetSize > 0 || ev.Set != 0 {
			b.WriteString(" set")
		}
		s = append(s, b.String())
	}
	return s
}

func wantBrief(t *testing.T, what string, got []Event, want ...string) {
	t.Helper()
	if b := brief(got); !reflect.DeepEqual(b, want) && !(len(b) == 0 && len(want) == 0) {
		t.Fatalf("%s: events\n got %q\nwant %q", what, b, want)
	}
}

// take asks for keys (words, as keysOf reads them) for w and fails t on
// a refusal; it returns the events.
func take(t *testing.T, e *Engine, now time.Time, lease, wait time.Duration, w Waiter, words ...string) []Event {
	t.Helper()
	out, err := e.AcquireSet(now, keysOf(words...), lease, wait, "", w, nil)
	if err != nil {
		t.Fatalf("AcquireSet(%q, %+v): %v", words, w, err)
	}
	return out
}

// read takes key as a reader of w, granted at once, and returns its token.
func read(t *testing.T, e *Engine, now time.Time, key string, lease time.Duration, w Waiter) uint64 {
	t.Helper()
	out := take(t, e, now, lease, 0, w, key+"/r")
	wantBrief(t, "a reader of "+key, out, fmt.Sprintf("granted %s c%d/%d shared", key, w.Conn, w.Seq))
	return out[0].Token
}

// tokensOf returns the tokens of the Granted events of evs, by waiter.
func tokensOf(evs []Event) map[Waiter]uint64 {
	m := map[Waiter]uint64{}
	for _, ev := range evs {
		if ev.Kind == Granted {
			m[ev.Waiter] = ev.Token
		}
	}
	return m
}

func wantModes(t *testing.T, e *Engine, now time.Time, key string, holders int, holderMode Mode, waiters ...Mode) {
	t.Helper()
	hs, ws := e.Inspect(now, key)
	if len(hs) != holders {
		t.Fatalf("%s has %d holders %+v; want %d", key, len(hs), hs, holders)
	}
	for _, h := range hs {
		if h.Mode != holderMode {
			t.Fatalf("%s holder %+v; want mode %s", key, h, holderMode)
		}
	}
	var got []Mode
	for _, wi := range ws {
		got = append(got, wi.Mode)
	}
	if !reflect.DeepEqual(got, waiters) && !(len(got) == 0 && len(waiters) == 0) {
		t.Fatalf("%s waiters ask %v; want %v", key, got, waiters)
	}
}

func TestReadersShare(t *testing.T) {
	e := New(Config{}, t0)
	var last uint64
	for i := uint64(1); i <= 3; i++ {
		tok := read(t, e, t0, "k", time.Minute, wtr(i))
		if tok <= last {
			t.Fatalf("reader %d: token %d after %d", i, tok, last)
		}
		last = tok
	}
	wantModes(t, e, t0, "k", 3, Shared)
	wantStats(t, e, 1, 0)
	// A writer waits for all of them, and a try-lock of a writer fails.
	wantBrief(t, "writer", take(t, e, t0, time.Minute, 0, wtr(4), "k"))
	out, err := e.TryAcquireID(t0, "k", 1, time.Minute, "", wtr(5), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantBrief(t, "try of a writer", out, "timedout k c5/5")
	wantModes(t, e, t0, "k", 3, Shared, Exclusive)
}

// A writer queued behind readers is not overtaken by the readers that
// come after it; when it goes, the readers behind it are granted
// together, up to the next writer.
func TestWriterNotOvertakenByLaterReaders(t *testing.T) {
	e := New(Config{}, t0)
	r1 := read(t, e, t0, "k", time.Minute, wtr(1))
	r2 := read(t, e, t0, "k", time.Minute, wtr(2))
	wantBrief(t, "writer behind readers", take(t, e, at(time.Second), time.Minute, 0, wtr(3), "k"))
	for _, w := range []Waiter{wtr(4), wtr(5)} {
		wantBrief(t, "reader behind a writer", take(t, e, at(2*time.Second), time.Minute, 0, w, "k/r"))
	}
	wantBrief(t, "second writer", take(t, e, at(2*time.Second), time.Minute, 0, wtr(6), "k"))
	wantBrief(t, "reader behind the second writer", take(t, e, at(2*time.Second), time.Minute, 0, wtr(7), "k/r"))
	// A try of a reader does not pass the writers either.
	out, _ := e.TryAcquireSet(at(2*time.Second), keysOf("k/r"), time.Minute, "", wtr(8), nil)
	wantBrief(t, "try of a reader behind a writer", out, "timedout k c8/8 shared")
	wantModes(t, e, at(2*time.Second), "k", 2, Shared, Exclusive, Shared, Shared, Exclusive, Shared)

	out, _ = e.Release(at(3*time.Second), "k", r1, nil)
	wantBrief(t, "one reader of two goes", out, "freed k shared")
	out, _ = e.Release(at(4*time.Second), "k", r2, nil)
	wantBrief(t, "the last reader goes", out, "freed k shared", "granted k c3/3")
	w := out[1].Token
	out, _ = e.Release(at(5*time.Second), "k", w, nil)
	wantBrief(t, "the writer goes", out, "freed k", "granted k c4/4 shared", "granted k c5/5 shared")
	if out[2].Token <= out[1].Token || out[1].Token <= w {
		t.Fatalf("tokens %d, %d after %d: each grant has its own, in order", out[1].Token, out[2].Token, w)
	}
	wantModes(t, e, at(5*time.Second), "k", 2, Shared, Exclusive, Shared)
	readers := tokensOf(out)
	e.Release(at(6*time.Second), "k", readers[wtr(4)], nil)
	out, _ = e.Release(at(6*time.Second), "k", readers[wtr(5)], nil)
	wantBrief(t, "the readers go", out, "freed k shared", "granted k c6/6")
	out, _ = e.Release(at(7*time.Second), "k", out[1].Token, nil)
	wantBrief(t, "the second writer goes", out, "freed k", "granted k c7/7 shared")
}

// Config.MaxLimit bounds a lock's readers as it does a semaphore's
// places: a reader past it waits its turn, first in line.
func TestReadersBoundedByMaxLimit(t *testing.T) {
	e := New(Config{MaxLimit: 2}, t0)
	r1 := read(t, e, t0, "k", time.Minute, wtr(1))
	read(t, e, t0, "k", time.Minute, wtr(2))
	wantBrief(t, "a third reader", take(t, e, t0, time.Minute, 0, wtr(3), "k/r"))
	wantBrief(t, "a fourth reader", take(t, e, t0, time.Minute, 0, wtr(4), "k/r"))
	out, _ := e.Release(at(time.Second), "k", r1, nil)
	wantBrief(t, "a reader goes", out, "freed k shared", "granted k c3/3 shared")
	wantModes(t, e, at(time.Second), "k", 2, Shared, Shared)
}

func TestSharedRefusals(t *testing.T) {
	e := New(Config{MaxLimit: 4}, t0)
	holdN(t, e, t0, "sem", 3, time.Minute, wtr(1))
	for _, c := range []struct {
		name  string
		words []string
		want  error
	}{
		{"a reader of a semaphore", []string{"x=3/r"}, ErrSharedLimit},
		{"a reader of an existing semaphore", []string{"sem/r"}, ErrLimitMismatch},
		{"a reader out of range", []string{"x=5/r"}, ErrLimitRange},
	} {
		if _, err := e.AcquireSet(t0, keysOf(c.words...), time.Minute, 0, "", wtr(9), nil); !errors.Is(err, c.want) {
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		}
	}
	if _, err := e.AcquireSet(t0, []SetKey{{Key: "y", Mode: 7}}, time.Minute, 0, "", wtr(9), nil); !errors.Is(err, ErrSharedLimit) {
		t.Errorf("mode 7: %v", err)
	}
	wantStats(t, e, 1, 0)
}

// A lock's holders hold it in one mode: a writer after readers, readers
// after a writer, and the key's mode follows.
func TestModeFollowsTheHolders(t *testing.T) {
	e := New(Config{}, t0)
	r := read(t, e, t0, "k", time.Minute, wtr(1))
	take(t, e, t0, time.Minute, 0, wtr(2), "k")
	out, _ := e.Release(t0, "k", r, nil)
	wantBrief(t, "reader to writer", out, "freed k shared", "granted k c2/2")
	wantModes(t, e, t0, "k", 1, Exclusive)
	take(t, e, t0, time.Minute, 0, wtr(3), "k/r")
	out, _ = e.Release(t0, "k", out[1].Token, nil)
	wantBrief(t, "writer to reader", out, "freed k", "granted k c3/3 shared")
	wantModes(t, e, t0, "k", 1, Shared)
	out, _ = e.Renew(at(time.Second), "k", out[1].Token, time.Hour, nil)
	wantBrief(t, "renewal of a reader", out, "renewed k shared")
}

// A waiter that leaves, by its connection closing, by X, or by its wait
// running out, lets through the readers it held back.
func TestWriterLeavingLetsReadersThrough(t *testing.T) {
	setup := func() *Engine {
		e := New(Config{}, t0)
		read(t, e, t0, "k", time.Minute, wtr(1))
		if _, err := e.AcquireID(t0, "k", 1, time.Minute, 10*time.Second, "w#1", wtr(2), nil); err != nil {
			t.Fatal(err)
		}
		take(t, e, t0, time.Minute, 0, wtr(3), "k/r")
		take(t, e, t0, time.Minute, 0, wtr(4), "k/r")
		take(t, e, t0, time.Minute, 0, wtr(5), "k")
		return e
	}
	want := []string{"granted k c3/3 shared", "granted k c4/4 shared"}
	t.Run("cancel", func(t *testing.T) {
		e := setup()
		out, ok := e.Cancel(at(time.Second), wtr(2), nil)
		if !ok {
			t.Fatal("Cancel of the writer reported false")
		}
		wantBrief(t, "cancel", out, want...)
		if hs, _ := e.Inspect(at(time.Second), "k"); hs[1].LeaseLeft != time.Minute {
			t.Fatalf("reader let through at the cancel: %+v", hs[1])
		}
	})
	t.Run("withdraw", func(t *testing.T) {
		e := setup()
		out, w, ok := e.Withdraw(at(time.Second), "k", "w#1", 2, nil)
		if !ok || w != wtr(2) {
			t.Fatalf("Withdraw = %+v %v", w, ok)
		}
		wantBrief(t, "withdraw", out, want...)
	})
	t.Run("wait runs out", func(t *testing.T) {
		e := setup()
		out := e.Advance(at(time.Minute), nil)
		wantBrief(t, "timeout", out, append([]string{"timedout k c2/2"}, append(want, "expired k shared")...)...)
		// Let through as of the writer's wait's end, not as of now.
		if hs, _ := e.Inspect(at(time.Minute), "k"); len(hs) != 2 || hs[0].LeaseLeft != 10*time.Second {
			t.Fatalf("readers after the timeout: %+v", hs)
		}
	})
	t.Run("a lease that ends as the wait does", func(t *testing.T) {
		// The wait ends first: the readers are let through as the
		// writer's wait ends, then the first reader's lease ends.
		e := New(Config{}, t0)
		read(t, e, t0, "k", 10*time.Second, wtr(1))
		take(t, e, t0, time.Minute, 10*time.Second, wtr(2), "k")
		take(t, e, t0, time.Minute, 0, wtr(3), "k/r")
		out := e.Advance(at(10*time.Second), nil)
		wantBrief(t, "same instant", out, "timedout k c2/2", "granted k c3/3 shared", "expired k shared")
	})
	t.Run("a reader's wait that ends as the writer's does", func(t *testing.T) {
		// The writer's leaving would let the reader through at the
		// instant its own wait ends: it has timed out by then.
		e := New(Config{}, t0)
		read(t, e, t0, "k", time.Minute, wtr(1))
		take(t, e, t0, time.Minute, 10*time.Second, wtr(2), "k")
		take(t, e, at(time.Second), time.Minute, 9*time.Second, wtr(3), "k/r")
		take(t, e, at(time.Second), time.Minute, 0, wtr(4), "k/r")
		out := e.Advance(at(10*time.Second), nil)
		wantBrief(t, "same instant", out, "timedout k c2/2", "timedout k c3/3 shared", "granted k c4/4 shared")
	})
}

// Readers' leases run out one by one; the writer waiting behind them is
// granted as the last one ends, as of that instant.
func TestReadersExpire(t *testing.T) {
	e := New(Config{}, t0)
	read(t, e, t0, "k", 2*time.Second, wtr(1))
	read(t, e, t0, "k", 5*time.Second, wtr(2))
	take(t, e, t0, time.Minute, 0, wtr(3), "k")
	out := e.Advance(at(3*time.Second), nil)
	wantBrief(t, "first reader's lease", out, "expired k shared")
	out = e.Advance(at(9*time.Second), nil)
	wantBrief(t, "second reader's lease", out, "expired k shared", "granted k c3/3")
	wantModes(t, e, at(9*time.Second), "k", 1, Exclusive)
	if hs, _ := e.Inspect(at(9*time.Second), "k"); hs[0].LeaseLeft != time.Minute-4*time.Second {
		t.Fatalf("writer's lease left %s; want counted from the last reader's lease end", hs[0].LeaseLeft)
	}
}

// A reader's release sent again is answered ok, as a writer's is.
func TestReaderReleaseSentAgain(t *testing.T) {
	e := New(Config{}, t0)
	r1 := read(t, e, t0, "k", time.Minute, wtr(1))
	read(t, e, t0, "k", time.Minute, wtr(2))
	if _, ok := e.Release(t0, "k", r1, nil); !ok {
		t.Fatal("release refused")
	}
	out, ok := e.Release(at(time.Second), "k", r1, nil)
	if !ok || len(out) != 0 {
		t.Fatalf("release sent again: %v %q", ok, brief(out))
	}
	wantModes(t, e, at(time.Second), "k", 1, Shared)
}

// Per-key and total waiter caps count readers as any waiter.
func TestReadersCountAgainstCaps(t *testing.T) {
	e := New(Config{MaxWaitersPerKey: 2, MaxWaiters: 3}, t0)
	hold(t, e, t0, "a", time.Minute, wtr(1))
	take(t, e, t0, time.Minute, 0, wtr(2), "a/r")
	take(t, e, t0, time.Minute, 0, wtr(3), "a/r")
	if _, err := e.AcquireSet(t0, keysOf("a/r"), time.Minute, 0, "", wtr(4), nil); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third reader waiting: %v", err)
	}
	hold(t, e, t0, "b", time.Minute, wtr(5))
	take(t, e, t0, time.Minute, 0, wtr(6), "b/r")
	if _, err := e.AcquireSet(t0, keysOf("b/r"), time.Minute, 0, "", wtr(7), nil); !errors.Is(err, ErrTooManyWaiters) {
		t.Fatalf("fourth waiter over all keys: %v", err)
	}
}

// Modes travel with the holders to a replica, and the active's word is
// the last: a writer replaces the readers a replica has, and readers the
// writer, as they must have on the active.
func TestModesReplicate(t *testing.T) {
	a := New(Config{Node: 0}, t0)
	read(t, a, t0, "r", time.Minute, wtr(1))
	read(t, a, t0, "r", time.Minute, wtr(2))
	hold(t, a, t0, "w", time.Minute, wtr(3))
	s := a.Snapshot(t0)
	for _, h := range s.Holders {
		if want := map[string]Mode{"r": Shared, "w": Exclusive}[h.Key]; h.Mode != want {
			t.Fatalf("snapshot holder %+v; want mode %s", h, want)
		}
	}
	b := New(Config{Node: 1}, t0)
	b.Restore(t0, s, nil)
	if got := b.Snapshot(t0); !reflect.DeepEqual(got, s) {
		t.Fatalf("restored %+v; want %+v", got, s)
	}
	tok := a.HighWater()
	b.ApplyHolder(t0, Holder{Key: "r", Token: tok + 1, LeaseLeft: time.Minute, Limit: 1})
	wantModes(t, b, t0, "r", 1, Exclusive)
	b.ApplyHolder(t0, Holder{Key: "r", Token: tok + 2, LeaseLeft: time.Minute, Limit: 1, Mode: Shared})
	b.ApplyHolder(t0, Holder{Key: "r", Token: tok + 3, LeaseLeft: time.Minute, Limit: 1, Mode: Shared})
	wantModes(t, b, t0, "r", 2, Shared)
	// A renewal of a reader keeps the others.
	b.ApplyHolder(t0, Holder{Key: "r", Token: tok + 2, LeaseLeft: time.Hour, Limit: 1, Mode: Shared})
	wantModes(t, b, t0, "r", 2, Shared)
	// A semaphore's places are never shared.
	b.ApplyHolder(t0, Holder{Key: "s", Token: tok + 4, LeaseLeft: time.Minute, Limit: 2, Mode: Shared})
	wantModes(t, b, t0, "s", 1, Exclusive)
}

// A reader's ghost keeps its place, and the places of the readers behind
// it, until its waiter claims it or its grace ends.
func TestReaderGhost(t *testing.T) {
	e := New(Config{}, t0)
	w := hold(t, e, t0, "k", time.Minute, wtr(1))
	if !e.AddGhostSet(t0, keysOf("k/r"), "g#1", time.Minute, 0, 2*time.Second) {
		t.Fatal("AddGhostSet refused a reader")
	}
	take(t, e, t0, time.Minute, 0, wtr(2), "k/r")
	out, _ := e.Release(at(time.Second), "k", w, nil)
	wantBrief(t, "release under a reader's ghost", out, "freed k")
	wantModes(t, e, at(time.Second), "k", 0, Exclusive, Shared, Shared)
	out, err := e.AcquireSet(at(time.Second), keysOf("k/r"), time.Minute, 0, "g#1", wtr(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantBrief(t, "the ghost claimed", out, "granted k c3/3 shared", "granted k c2/2 shared")

	// Unclaimed, its grace ends and the readers pass.
	e = New(Config{}, t0)
	w = hold(t, e, t0, "k", time.Minute, wtr(1))
	e.AddGhostSet(t0, keysOf("k/r"), "g#1", time.Minute, 0, 2*time.Second)
	take(t, e, t0, time.Minute, 0, wtr(2), "k/r")
	e.Release(at(time.Second), "k", w, nil)
	out = e.Advance(at(3*time.Second), nil)
	wantBrief(t, "grace over", out, "timedout k c18446744073709551615/1 shared", "granted k c2/2 shared")
}

// A reader's acquire re-sent with its id answers its grant again.
func TestReaderAgain(t *testing.T) {
	e := New(Config{}, t0)
	out, err := e.AcquireSet(t0, keysOf("k/r"), time.Minute, 0, "r#1", wtr(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := out[0].Token
	read(t, e, t0, "k", time.Minute, wtr(2))
	out, err = e.AcquireSet(at(time.Second), keysOf("k/r"), time.Minute, 0, "r#1", wtr(3), nil)
	if err != nil || len(out) != 1 || out[0].Token != tok || out[0].Mode != Shared {
		t.Fatalf("re-sent reader: %+v %v", out, err)
	}
	wantModes(t, e, at(time.Second), "k", 2, Shared)
}
