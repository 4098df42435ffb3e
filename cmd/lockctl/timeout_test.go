package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// Against another service (an HTTP server at the port given), every
// command says that what answered is not lockd, and how to fix the
// address, instead of "cannot reach" with nothing more.
func TestAnotherServiceIsNotLockd(t *testing.T) {
	addr := serveConns(t, listenLocal(t), func(c net.Conn) {
		if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"))
		}
	})
	for _, args := range [][]string{
		{"acquire", "--key", "k"},
		{"acquire", "--key", "k", "--wait", "10s"},
		{"exec", "--key", "k", "--", "true"},
		{"status"},
		{"queues"},
	} {
		start := time.Now()
		code, _, stderr := lockctl(t, append([]string{"--addr", addr}, args...)...)
		if code != exitUnavailable || !strings.Contains(stderr, "another service answered there, not lockd") || !strings.Contains(stderr, "--listen") {
			t.Errorf("lockctl %s: exit %d, stderr %q; want %d saying another service answered", strings.Join(args, " "), code, stderr, exitUnavailable)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("lockctl %s: took %s, want at once", strings.Join(args, " "), took)
		}
	}
}

// Against a server that takes connections and never
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

// bouncer is a node that answers S as any node does and redirects
// every other request to the node at *to.
func bouncer(t *testing.T, to *string) string {
	t.Helper()
	ln := listenLocal(t)
	return serveConns(t, ln, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			w := strings.Fields(line)
			if len(w) < 2 {
				continue
			}
			if w[0] == "S" {
				fmt.Fprintf(c, "S %s self=%s role=standby active=%s\n", w[1], ln.Addr(), *to)
				continue
			}
			fmt.Fprintf(c, "M %s %s\n", w[1], *to)
		}
	})
}

// Nodes that send a request back and forth say so in
// those words, not as a network error.
func TestRedirectLoopSaysNodesDisagree(t *testing.T) {
	var a, b string
	a = bouncer(t, &b)
	b = bouncer(t, &a)
	code, _, errOut := lockctl(t, "--addr", a, "--failure-timeout", "100ms", "acquire", "--key", "hk")
	if code != exitFailed || !strings.Contains(errOut, `acquiring "hk" failed: redirected `) || !strings.Contains(errOut, ` times in a row over `) ||
		!strings.Contains(errOut, "the nodes disagree on which one is active") || strings.Contains(errOut, "cannot reach") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// Release against a node that is down fails at once,
// as acquire and renew do, instead of re-sending silently for 5 s.
func TestReleaseAgainstDownNodeFailsAtOnce(t *testing.T) {
	dead := closedAddr(t)
	start := time.Now()
	code, _, errOut := lockctl(t, "--addr", dead, "release", "--key", "k", "--token", "7")
	if code != exitUnavailable || !strings.Contains(errOut, "cannot reach lockd at "+dead+" (connection refused)") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("release gave up after %s, want at once", took)
	}
}

// status gives a silent node --failure-timeout, as the lock commands do,
// not the whole --timeout: a frozen node is reported within about the
// failure timeout.
func TestStatusSilentNodeWithinFailureTimeout(t *testing.T) {
	f := startFake(t)
	f.mute = true
	start := time.Now()
	code, _, errOut := lockctl(t, "--addr", f.addr, "--failure-timeout", "300ms", "--timeout", "20s", "status")
	took := time.Since(start)
	if code != exitNoAnswer || !strings.Contains(errOut, "said nothing for --failure-timeout 300ms") {
		t.Errorf("exit %d, stderr %q; want exit %d naming --failure-timeout", code, errOut, exitNoAnswer)
	}
	if took > 2*time.Second {
		t.Errorf("status took %s against a silent node with --failure-timeout 300ms", took)
	}
}
