package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lockd-io/lockd/proto/client/porttest"
)

func TestAcquirePrintsToken(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "acquire", "--key", "deploy", "--lease", "2m", "--wait", "1500ms")
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	tok, ok := f.holder("deploy")
	if !ok || stdout != strconv.FormatUint(tok, 10)+"\n" {
		t.Fatalf("stdout %q, want the token %d alone on its line", stdout, tok)
	}
	// The client sends what is left of the wait, a hair under 1.5s.
	if got := f.requests(); len(got) != 1 || !strings.HasPrefix(got[0], "A deploy 120 1.") {
		t.Errorf("requests %q, want [A deploy 120 1.5]", got)
	}
}

func TestAcquireJSON(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "--json", "acquire", "--key", "deploy", "--lease", "500ms")
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	var got lockJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	tok, _ := f.holder("deploy")
	// The token must survive exact: a string of its decimal digits.
	if got.Key != "deploy" || got.Token != tok || got.LeaseSeconds != 0.5 || !strings.Contains(stdout, `"token":"`+strconv.FormatUint(tok, 10)+`"`) {
		t.Errorf("got %s, want key deploy, token %d, lease_seconds 0.5", stdout, tok)
	}
}

func TestAcquireTimeoutExit3(t *testing.T) {
	f := startFake(t)
	f.busy["deploy"] = true
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "acquire", "--key", "deploy", "--wait", "2s")
	if code != exitTimeout {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitTimeout, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if !strings.HasPrefix(stderr, `lockctl: "deploy" was still held after waiting 2s; `) {
		t.Errorf("stderr %q", stderr)
	}
}

// --wait and --nonblock mean what flock's -w and -n
// mean. No --wait waits forever (wait 0 on the wire); --wait 0 and -n
// fail at once when the lock is held, sending the smallest wait the
// protocol has; -w takes plain seconds as flock does.
func TestWaitMeansWhatFlockMeans(t *testing.T) {
	f := startFake(t)
	if code, _, errOut := lockctl(t, "--addr", f.addr, "acquire", "--key", "k"); code != 0 {
		t.Fatalf("acquire: exit %d: %s", code, errOut)
	}
	if got := f.requests(); len(got) != 1 || got[0] != "A k 30 0" {
		t.Errorf("no --wait sent %q, want wait 0 (forever) on the wire", got)
	}
	for _, args := range [][]string{{"-n"}, {"--nonblock"}, {"--wait", "0"}, {"-w", "0"}, {"--wait", "0s"}} {
		before := len(f.requests())
		start := time.Now()
		code, out, errOut := lockctl(t, append([]string{"--addr", f.addr, "acquire", "--key", "k"}, args...)...)
		took := time.Since(start)
		if code != exitTimeout || out != "" || !strings.HasPrefix(errOut, `lockctl: "k" is held by another client (not waiting: --nonblock)`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if reqs := f.requests()[before:]; len(reqs) != 1 || reqs[0] != "A k 30 0.001" {
			t.Errorf("%v: sent %q, want the smallest wait, 0.001", args, reqs)
		}
		if took > 500*time.Millisecond {
			t.Errorf("%v: gave up after %s, want at once", args, took)
		}
	}
	code, _, errOut := lockctl(t, "--addr", f.addr, "acquire", "--key", "k", "-w", "0.2")
	if code != exitTimeout || !strings.Contains(errOut, `"k" was still held after waiting 200ms`) {
		t.Errorf("-w 0.2: exit %d, stderr %q", code, errOut)
	}
}

// A token from acquire --json goes through a reader that takes every JSON
// number for a double, as jq 1.6 and JavaScript's JSON.parse do (here
// encoding/json into interface{}, which does the same), and comes out
// whole: the release with it, quotes and all as `jq .token` prints it,
// or bare as `jq -r .token` does, succeeds.
func TestTokenSurvivesDoubleReadingJSON(t *testing.T) {
	f := startFake(t)
	for _, quoted := range []bool{false, true} {
		code, stdout, stderr := lockctl(t, "--addr", f.addr, "-o", "json", "acquire", "--key", "deploy")
		if code != 0 {
			t.Fatalf("acquire: exit %d; stderr %q", code, stderr)
		}
		tok, _ := f.holder("deploy")
		if tok < 1<<53 {
			t.Fatalf("token %d: the fake must hand out tokens a double cannot hold for this test to mean anything", tok)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("stdout %q: %v", stdout, err)
		}
		s, ok := doc["token"].(string)
		if !ok || s != strconv.FormatUint(tok, 10) {
			t.Fatalf("token read as %#v (%T), want the string %q", doc["token"], doc["token"], strconv.FormatUint(tok, 10))
		}
		if quoted {
			s = `"` + s + `"`
		}
		code, stdout, stderr = lockctl(t, "--addr", f.addr, "release", "--key", "deploy", "--token", s)
		if code != 0 {
			t.Fatalf("release --token %s: exit %d, stdout %q, stderr %q", s, code, stdout, stderr)
		}
	}
}

// A key far over the limit is refused with an error a person can read:
// its start and its length, not the whole key echoed back.
func TestLongKeyErrorIsShort(t *testing.T) {
	key := strings.Repeat("k", 100000)
	for _, args := range [][]string{
		{"acquire", "--key", key},
		{"release", "--key", key, "--token", "1"},
		{"queues", "--key", key},
		{"exec", "--key", key, "--", "true"},
		{"hold", "--key", key},
	} {
		code, _, errOut := lockctl(t, append([]string{"--addr", "127.0.0.1:1"}, args...)...)
		if code != exitUsage || len(errOut) > 300 || !strings.Contains(errOut, "(100000 bytes)") || !strings.Contains(errOut, "longer than 255") {
			t.Errorf("%s: exit %d, %d bytes on stderr: %.200q", args[0], code, len(errOut), errOut)
		}
	}
	if got := clipKey("deploy"); got != `"deploy"` {
		t.Errorf("clipKey of a short key: %s", got)
	}
	// Cut at a rune's start, never inside one.
	if got := clipKey(strings.Repeat("é", 100)); !utf8.ValidString(got) || !strings.HasSuffix(got, "... (200 bytes)") {
		t.Errorf("clipKey of a long UTF-8 key: %s", got)
	}
}

// A lockctl started while no node answers yet (a cluster restarting at
// once) waits for one within --wait, saying so once; without --wait it
// exits 4 at once, since a wrong --addr must not hang it.
func TestAcquireWaitsForANodeNotUpYet(t *testing.T) {
	port := porttest.Reserve(t)
	addr := port.Addr
	start := time.Now()
	if code, _, stderr := lockctl(t, "--addr", addr, "acquire", "--key", "k"); code != exitUnavailable || time.Since(start) > 2*time.Second {
		t.Fatalf("without --wait: exit %d after %s, want %d at once; stderr %q", code, time.Since(start), exitUnavailable, stderr)
	}
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := lockctl(t, "--addr", addr, "acquire", "--key", "k", "--wait", "10s")
		done <- result{code, stdout, stderr}
	}()
	select {
	case r := <-done:
		t.Fatalf("returned before any node was up: exit %d, stderr %q", r.code, r.stderr)
	case <-time.After(500 * time.Millisecond):
	}
	f := startFakeOn(t, port.Listen())
	r := <-done
	tok, ok := f.holder("k")
	if r.code != 0 || !ok || r.stdout != strconv.FormatUint(tok, 10)+"\n" {
		t.Fatalf("once the node is up: exit %d, stdout %q, stderr %q; want the token", r.code, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stderr, "no lockd node answers at "+addr+" yet"); n != 1 {
		t.Errorf("stderr %q: want the wait for a node said once", r.stderr)
	}
}
