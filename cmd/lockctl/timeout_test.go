package main

import (
	"strings"
	"testing"
	"time"
)

// Issue 11, item 2: against a server that takes connections and never
// answers, every command says so, with exit code 6, within about the
// failure timeout, instead of waiting forever or blaming the lock, the
// dial or the network.
func TestHungServerIsNoAnswer(t *testing.T) {
	f := startFake(t)
	f.mute = true
	for _, tc := range []struct {
		args []string
		what string
	}{
		{[]string{"acquire", "--key", "k", "--wait", "2s"}, `did not answer while acquiring "k"`},
		{[]string{"acquire", "--key", "k"}, `did not answer while acquiring "k"`},
		{[]string{"exec", "--key", "k", "--wait", "1s", "--timeout-code", "0", "--", "echo", "ran"}, `did not answer while acquiring "k"`},
		{[]string{"release", "--key", "k", "--token", "7"}, `did not answer while releasing "k"`},
		{[]string{"renew", "--key", "k", "--token", "7"}, `did not answer while renewing "k"`},
		{[]string{"queues"}, `did not answer while listing the queues`},
		{[]string{"status"}, "did not answer"},
	} {
		start := time.Now()
		code, out, errOut := lockctl(t, append([]string{"--addr", f.addr, "--failure-timeout", "300ms", "--timeout", "1s"}, tc.args...)...)
		took := time.Since(start)
		if code != exitNoAnswer || out != "" || !strings.Contains(errOut, tc.what) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d saying %q", tc.args, code, out, errOut, exitNoAnswer, tc.what)
		}
		if strings.Contains(errOut, "still held") || strings.Contains(errOut, "dial") || strings.Contains(errOut, "no connection could be made") {
			t.Errorf("%v: stderr %q blames the lock or the network", tc.args, errOut)
		}
		if took > 3*time.Second {
			t.Errorf("%v: took %s", tc.args, took)
		}
	}
}

// --timeout bounds the answer to one request; the wait for a lock is
// --wait's, and a request the node takes in but never answers (here a
// renewal held back) ends after --timeout with exit 6.
func TestTimeoutBoundsTheAnswer(t *testing.T) {
	f := startFake(t)
	f.holdRenewals()
	code, out, errOut := lockctl(t, "--addr", f.addr, "acquire", "--key", "k")
	if code != 0 {
		t.Fatalf("acquire: exit %d: %s", code, errOut)
	}
	token := strings.TrimSpace(out)
	start := time.Now()
	code, _, errOut = lockctl(t, "--addr", f.addr, "--timeout", "300ms", "renew", "--key", "k", "--token", token)
	if code != exitNoAnswer || !strings.Contains(errOut, "within --timeout 300ms") {
		t.Errorf("renew held back: exit %d, stderr %q", code, errOut)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("renew gave up after %s, want about --timeout", took)
	}
}
