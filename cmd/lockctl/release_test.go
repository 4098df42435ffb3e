package main

import (
	"strconv"
	"strings"
	"testing"
)

func TestReleaseAndRenew(t *testing.T) {
	f := startFake(t)
	code, stdout, _ := lockctl(t, "--addr", f.addr, "acquire", "--key", "k")
	if code != 0 {
		t.Fatalf("acquire: exit %d", code)
	}
	token := strings.TrimSpace(stdout)

	code, stdout, stderr := lockctl(t, "--addr", f.addr, "renew", "--key", "k", "--token", token, "--lease", "1m")
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("renew: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = lockctl(t, "--addr", f.addr, "--json", "release", "--key", "k", "--token", token)
	if code != 0 || stdout != `{"key":"k","token":"`+token+`","released":true}`+"\n" {
		t.Fatalf("release: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	want := []string{"A k 30 0", "N k " + token + " 60", "R k " + token}
	if got := f.requests(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("requests %q, want %q", got, want)
	}
}

func TestReleaseNotHeldExit1(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "release", "--key", "k", "--token", "42")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitFailed, stderr)
	}
	if stdout != "" || !strings.HasPrefix(stderr, `lockctl: token 42 does not hold "k"; `) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
}

func TestRenewNotHeldExit1(t *testing.T) {
	f := startFake(t)
	code, _, stderr := lockctl(t, "--addr", f.addr, "renew", "--key", "k", "--token", strconv.Itoa(7))
	if code != exitFailed || !strings.Contains(stderr, `token 7 does not hold "k" any more`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
