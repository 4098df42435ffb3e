package engine

import (
	"fmt"
	"testing"
	"time"
)

// placesOf checks the places of hs, the holders of one key: a
// semaphore's are distinct and within 1..limit, or 0 for a holder
// applied without one (a record of an older active); a lock's are none. It
// returns hs with their places zeroed, for the comparisons of the
// models, which do not number places, and what is wrong, "" for nothing.
func placesOf(hs []Holder) ([]Holder, string) {
	seen := map[int]bool{}
	out := make([]Holder, len(hs))
	for i, h := range hs {
		switch {
		case h.Limit > 1 && h.Place != 0 && (h.Place < 1 || h.Place > h.Limit || seen[h.Place]):
			return hs, fmt.Sprintf("holder %d of %s has place %d (limit %d, taken %v)", h.Token, h.Key, h.Place, h.Limit, seen)
		case h.Limit <= 1 && h.Place != 0:
			return hs, fmt.Sprintf("holder %d of lock %s has place %d", h.Token, h.Key, h.Place)
		}
		if h.Limit > 1 {
			seen[h.Place] = true
		}
		h.Place = 0
		out[i] = h
	}
	return out, ""
}

// noPlaces is placesOf for the holders of any keys, failing t.
func noPlaces(t testing.TB, hs []Holder) []Holder {
	t.Helper()
	byKey := map[string][]Holder{}
	for _, h := range hs {
		byKey[h.Key] = append(byKey[h.Key], h)
	}
	for _, khs := range byKey {
		if _, msg := placesOf(khs); msg != "" {
			t.Fatal(msg)
		}
	}
	out := make([]Holder, len(hs))
	for i, h := range hs {
		h.Place = 0
		out[i] = h
	}
	if len(hs) == 0 {
		return hs
	}
	return out
}

func TestPlaces(t *testing.T) {
	e := New(Config{}, t0)
	var toks []uint64
	for i := range 3 {
		out, err := e.AcquireID(t0, "s", 3, time.Minute, 0, "", wtr(uint64(i+1)), nil)
		if err != nil || len(out) != 1 || out[0].Place != int32(i+1) {
			t.Fatalf("grant %d: %+v, %v", i, out, err)
		}
		toks = append(toks, out[0].Token)
	}
	mustAcquireN(t, e, t0, "s", 3, time.Minute, 0, wtr(9))
	// The second place frees: the waiter gets it, the lowest free.
	out, _ := e.Release(t0, "s", toks[1], nil)
	if len(out) != 2 || out[1].Kind != Granted || out[1].Place != 2 {
		t.Fatalf("release: %+v", out)
	}
	// A standby keeps the places, and a renewal says it.
	standby := New(Config{Node: 1}, t0)
	standby.Restore(t0, e.Snapshot(t0), nil)
	hs, _ := standby.Inspect(t0, "s")
	if len(hs) != 3 || hs[0].Place != 1 || hs[1].Place != 3 || hs[2].Place != 2 {
		t.Fatalf("standby holders %+v", hs)
	}
	if out, err := e.Renew(t0, "s", toks[2], time.Minute, nil); err != nil || out[0].Place != 3 {
		t.Fatalf("renew: %+v %v", out, err)
	}
	// A lock has no place.
	out, _ = e.AcquireID(t0, "l", 1, time.Minute, 0, "", wtr(20), nil)
	if out[0].Place != 0 {
		t.Fatalf("lock place %+v", out)
	}
}

func TestValues(t *testing.T) {
	e := New(Config{}, t0)
	out, err := e.AcquireValue(t0, []SetKey{{Key: "leader"}}, time.Minute, 0, "", "node 1", wtr(1), nil)
	if err != nil || out[0].Value != "node 1" {
		t.Fatalf("grant: %+v %v", out, err)
	}
	tok := out[0].Token
	// A waiter's value is its holder's once granted.
	mustNoGrant := func(out []Event, err error) {
		t.Helper()
		if err != nil || len(out) != 0 {
			t.Fatalf("%+v %v", out, err)
		}
	}
	mustNoGrant(e.AcquireValue(t0, []SetKey{{Key: "leader"}}, time.Minute, 0, "", "node 2", wtr(2), nil))
	// Proclaim: the value is replaced; a renewal without one keeps it.
	if out, err = e.RenewValue(t0, "leader", tok, time.Minute, "node 1 bis", true, nil); err != nil || out[0].Value != "node 1 bis" {
		t.Fatalf("proclaim: %+v %v", out, err)
	}
	if out, err = e.Renew(t0, "leader", tok, time.Minute, nil); err != nil || out[0].Value != "node 1 bis" {
		t.Fatalf("renew: %+v %v", out, err)
	}
	standby := New(Config{Node: 1}, t0)
	standby.Restore(t0, e.Snapshot(t0), nil)
	if hs, _ := standby.Inspect(t0, "leader"); len(hs) != 1 || hs[0].Value != "node 1 bis" {
		t.Fatalf("standby %+v", hs)
	}
	out, _ = e.Release(t0, "leader", tok, nil)
	if len(out) != 2 || out[1].Value != "node 2" {
		t.Fatalf("release hands on %+v", out)
	}
	if e.nholdInfo != 1 || len(e.waitValue) != 0 {
		t.Fatalf("kept %d holders' infos, %d waiters' values", e.nholdInfo, len(e.waitValue))
	}
	if _, err := e.AcquireValue(t0, []SetKey{{Key: "x"}}, time.Minute, 0, "", string(make([]byte, MaxValueLen+1)), wtr(3), nil); err == nil {
		t.Fatal("a value over MaxValueLen accepted")
	}
}
