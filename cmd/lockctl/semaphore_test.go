package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// --limit is checked before anything is sent: how many may hold a key at
// once is 1 (a lock) to proto's MaxLimit.
func TestLimitFlagIsChecked(t *testing.T) {
	f := startFake(t)
	for _, cmd := range [][]string{
		{"acquire", "--key", "k"},
		{"hold", "--key", "k"},
		{"exec", "--key", "k"},
	} {
		args := func(n string) []string {
			a := append(append([]string{"--addr", f.addr}, cmd...), "--limit", n)
			if cmd[0] == "exec" {
				a = append(a, "--", "true")
			}
			return a
		}
		for _, n := range []string{"0", "-2", "65536"} {
			code, out, errOut := lockctl(t, args(n)...)
			want := "lockctl: --limit " + n + ": want how many may hold the key at once, from 1 (a lock, the default) to 65535; see `lockctl " + cmd[0] + " --help`\n"
			if code != exitUsage || out != "" || errOut != want {
				t.Errorf("%s --limit %s: exit %d, stdout %q, stderr %q", cmd[0], n, code, out, errOut)
			}
		}
		code, _, errOut := lockctl(t, args("two")...)
		if code != exitUsage || !strings.Contains(errOut, `--limit "two": want a whole number`) {
			t.Errorf("%s --limit two: exit %d, %q", cmd[0], code, errOut)
		}
	}
	if got := f.requests(); len(got) != 0 {
		t.Errorf("sent %q for bad flags", got)
	}
}

// acquire --limit N asks for one of N places; --json says which limit and
// which id it got.
func TestAcquireLimitJSON(t *testing.T) {
	f := startFake(t)
	code, out, errOut := lockctl(t, "--addr", f.addr, "--name", "alice@ci-1:42", "--json", "acquire", "--key", "builds", "--limit", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got lockJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Limit != 3 || proto.IDName(got.ID) != "alice@ci-1:42" {
		t.Fatalf("stdout %q (%v): want limit 3 and an id named alice@ci-1:42", out, err)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0] != "A builds 30 0 limit=3" {
		t.Errorf("sent %q", reqs)
	}
}

// A limit mismatch says what the key is (asked of lockd, not read from
// its words) and what to do.
func TestLimitMismatchIsExplained(t *testing.T) {
	tc := startCluster(t, 1)
	addr := tc.addrs[0]
	cl, err := client.New([]string{addr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := cl.AcquireWith(ctx, "builds", time.Minute, 0, client.Limit(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, "deploy", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"acquire", "--key", "builds", "--limit", "3"},
			`lockctl: "builds" is a semaphore of 2 places, and this acquire asked for --limit 3; use --limit 2 as its other users do; ` +
				"every user of a key must give the same --limit; a key takes the limit of the acquire that creates it and keeps it while anyone holds or waits for it\n"},
		{[]string{"hold", "--key", "builds"},
			`lockctl: "builds" is a semaphore of 2 places, and this acquire asked for a lock (no --limit); use --limit 2 as its other users do; `},
		{[]string{"exec", "--key", "deploy", "--limit", "4", "--", "true"},
			`lockctl: "deploy" is a lock (limit 1), and this acquire asked for --limit 4; leave --limit out, as its other users do; `},
	} {
		code, out, errOut := lockctl(t, append([]string{"--addr", addr}, tt.args...)...)
		if code != exitFailed || out != "" || !strings.HasPrefix(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr\n%s\nwant\n%s", tt.args, code, out, errOut, tt.want)
		}
	}
	// Both places held: -n says so in a semaphore's words.
	if _, err := cl.AcquireWith(ctx, "builds", time.Minute, 0, client.Limit(2)); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := lockctl(t, "--addr", addr, "acquire", "--key", "builds", "--limit", "2", "-n")
	if code != exitTimeout || !strings.HasPrefix(errOut, `lockctl: all 2 places of "builds" are held (not waiting: --nonblock); `) {
		t.Errorf("-n on a full semaphore: exit %d %q", code, errOut)
	}
	code, _, errOut = lockctl(t, "--addr", addr, "acquire", "--key", "builds", "--limit", "2", "-w", "100ms")
	if code != exitTimeout || !strings.HasPrefix(errOut, `lockctl: all 2 places of "builds" were still held after waiting 100ms; `) {
		t.Errorf("-w on a full semaphore: exit %d %q", code, errOut)
	}
	// With --json, the failure is JSON too.
	code, out, _ := lockctl(t, "--addr", addr, "--json", "acquire", "--key", "builds", "--limit", "3")
	if code != exitFailed || !strings.Contains(out, `"message":"\"builds\" is a semaphore of 2 places`) {
		t.Errorf("--json: exit %d %s", code, out)
	}
}

// exec gives its command LOCKD_LIMIT beside LOCKD_TOKEN, and its name.
func TestExecPassesLimitAndName(t *testing.T) {
	f := startFake(t)
	t.Setenv("LOCKD_LIMIT", "stale")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "nightly", "exec", "--key", "job", "--limit", "2"}, "2 nightly\n"},
		{[]string{"--name", "nightly", "exec", "--key", "job"}, "1 nightly\n"},
	} {
		args := append(append([]string{"--addr", f.addr}, tt.args...), "--", "sh", "-c", `echo "$LOCKD_LIMIT $LOCKD_NAME"`)
		code, out, errOut := lockctl(t, args...)
		if code != 0 || out != tt.want {
			t.Errorf("%v: exit %d, printed %q (stderr %q), want %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

// --name (or LOCKD_NAME) leads the id of every acquire, so that queues
// shows who holds a key; without it, lockctl is USER@HOST:PID.
func TestNameShowsInQueues(t *testing.T) {
	tc := startCluster(t, 1)
	addr := tc.addrs[0]
	queue := func(key string) proto.Queue {
		t.Helper()
		cl, err := client.New([]string{addr}, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		q, err := cl.Queue(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	if code, _, errOut := lockctl(t, "--addr", addr, "acquire", "--key", "a", "--name", "build job #7"); code != 0 {
		t.Fatal(errOut)
	}
	if q := queue("a"); len(q.Holders) != 1 || q.Holders[0].Name() != "build_job_#7" {
		t.Errorf("--name: %+v", q)
	}
	t.Setenv("LOCKD_NAME", "from-env")
	if code, _, errOut := lockctl(t, "--addr", addr, "acquire", "--key", "b"); code != 0 {
		t.Fatal(errOut)
	}
	if q := queue("b"); len(q.Holders) != 1 || q.Holders[0].Name() != "from-env" {
		t.Errorf("LOCKD_NAME: %+v", q)
	}
	os.Unsetenv("LOCKD_NAME")
	t.Setenv("USER", "carol")
	if code, _, errOut := lockctl(t, "--addr", addr, "acquire", "--key", "c"); code != 0 {
		t.Fatal(errOut)
	}
	q := queue("c")
	want := regexp.MustCompile(`^carol@[^.:@]+:` + strconv.Itoa(os.Getpid()) + `$`)
	if len(q.Holders) != 1 || !want.MatchString(q.Holders[0].Name()) {
		t.Errorf("default name: %+v, want carol@HOST:%d", q, os.Getpid())
	}
	code, out, _ := lockctl(t, "--addr", addr, "queues")
	if code != 0 || !strings.Contains(out, " build_job_#7 ") || !strings.Contains(out, " from-env ") || !strings.Contains(out, " carol@") {
		t.Errorf("queues does not name the holders:\n%s", out)
	}
}

// When lockd cannot say what the key is (freed since the refusal, or Q
// failed), the refusal's own words are shown.
func TestLimitMismatchFallsBackToLockdsWords(t *testing.T) {
	refusal := &client.ServerError{Op: proto.OpAcquire, Key: "k", Msg: `limit mismatch: key "k" allows 2 holders; this acquire asked for 3: every acquire of it must ask for that limit`}
	g := &globals{Timeout: time.Second}
	err := acquireFailure(context.Background(), g, fakeQueues{}, lockAsk{key: "k", limit: 3}, refusal)
	e, ok := err.(*exitError)
	if !ok || e.code != exitFailed || e.what != `lockd refused acquiring "k" with --limit 3: `+refusal.Msg ||
		!strings.HasPrefix(e.try, "every user of a key must give the same --limit") {
		t.Errorf("got %#v", err)
	}
}
