package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestInspect(t *testing.T) {
	e := New(Config{}, t0)
	tok := hold(t, e, t0, "k", 30*time.Second, wtr(1))
	mustAcquire(t, e, at(1*time.Second), "k", 5*time.Second, 0, wtr(2))
	mustAcquire(t, e, at(2*time.Second), "k", 6*time.Second, 10*time.Second, wtr(3))
	mustAcquire(t, e, at(4*time.Second), "k", 7*time.Second, 0, wtr(4))

	now := at(5 * time.Second)
	hs, ws := e.Inspect(now, "k")
	if want := []Holder{{Key: "k", Token: tok, LeaseLeft: 25 * time.Second, Limit: 1}}; !reflect.DeepEqual(hs, want) {
		t.Fatalf("holders %+v; want %+v", hs, want)
	}
	want := []WaiterInfo{
		{Waiter: wtr(2), Waited: 4 * time.Second, Lease: 5 * time.Second},
		{Waiter: wtr(3), Waited: 3 * time.Second, Lease: 6 * time.Second, WaitLeft: 7 * time.Second},
		{Waiter: wtr(4), Waited: 1 * time.Second, Lease: 7 * time.Second},
	}
	if !reflect.DeepEqual(ws, want) {
		t.Fatalf("waiters\n%+v\nwant\n%+v", ws, want)
	}
	hs, ws = e.Inspect(now, "unknown")
	if hs != nil || ws != nil {
		t.Fatalf("unknown key: %+v %+v", hs, ws)
	}
}

func TestKeys(t *testing.T) {
	e := New(Config{}, t0)
	for i, k := range []string{"deploy/web", "deploy/api", "backup", "deploy/db", "deployx"} {
		hold(t, e, t0, k, time.Minute, wtr(uint64(i+1)))
	}
	all := func(string) bool { return true }
	prefix := func(p string) func(string) bool {
		return func(k string) bool { return strings.HasPrefix(k, p) }
	}
	exact := func(x string) func(string) bool {
		return func(k string) bool { return k == x }
	}
	for _, c := range []struct {
		name      string
		match     func(string) bool
		limit     int
		want      []string
		wantTotal int
	}{
		{"all", all, 1000, []string{"backup", "deploy/api", "deploy/db", "deploy/web", "deployx"}, 5},
		{"prefix", prefix("deploy/"), 1000, []string{"deploy/api", "deploy/db", "deploy/web"}, 3},
		{"prefix limited", prefix("deploy/"), 2, []string{"deploy/api", "deploy/db"}, 3},
		{"all limited", all, 1, []string{"backup"}, 5},
		{"exact", exact("deployx"), 1000, []string{"deployx"}, 1},
		{"none", prefix("zzz"), 1000, nil, 0},
		{"limit zero counts", all, 0, []string{}, 5},
	} {
		got, total := e.Keys(c.match, c.limit)
		if total != c.wantTotal || len(got) != len(c.want) || (len(got) > 0 && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("%s: Keys = %q, %d; want %q, %d", c.name, got, total, c.want, c.wantTotal)
		}
	}
}
