package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestHoldReleasesOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			f := startFake(t)
			cmd, stdout, stderr := startLockctl(t, "--addr", f.addr, "hold", "--key", "k")
			line, err := stdout.ReadString('\n')
			if err != nil {
				t.Fatalf("no token printed: %v; stderr %q", err, stderr)
			}
			token := strings.TrimSpace(line)
			if held, ok := f.holder("k"); !ok || strconv.FormatUint(held, 10) != token {
				t.Fatalf("printed %q, the fake granted %d", token, held)
			}
			cmd.Process.Signal(sig)
			if code := exitStatus(t, cmd); code != 0 {
				t.Fatalf("exit %d, want 0; stderr %q", code, stderr)
			}
			if _, ok := f.holder("k"); ok {
				t.Error("the lock is still held after hold exited")
			}
			if f.count("R k "+token) != 1 {
				t.Errorf("requests %q, want one release of the token", f.requests())
			}
		})
	}
}

// Hold confirms the release (with --json, as a last
// object), and says how often it renews in words a person reads.
func TestHoldConfirmsRelease(t *testing.T) {
	f := startFake(t)
	cmd, stdout, stderr := startLockctl(t, "--addr", f.addr, "--failure-timeout", "100ms", "--json", "hold", "--key", "k", "--lease", "2s")
	line, err := stdout.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, `{"key":"k","token":"`) {
		t.Fatalf("first line %q (%v); stderr %q", line, err, stderr)
	}
	cmd.Process.Signal(syscall.SIGINT)
	last, _ := stdout.ReadString('\n')
	if code := exitStatus(t, cmd); code != 0 || !strings.HasPrefix(last, `{"key":"k","token":"`) || !strings.HasSuffix(last, `,"released":true}`+"\n") {
		t.Errorf("exit %d, last line %q, stderr %q", code, last, stderr)
	}
	for lease, want := range map[time.Duration]string{2 * time.Second: "667ms", 30 * time.Second: "10s", 5 * time.Second: "1.67s", time.Minute: "20s", 10 * time.Minute: "3m20s"} {
		if got := roundedDuration(lease / 3); got != want {
			t.Errorf("every third of %s: %q, want %q", lease, got, want)
		}
	}
}

func TestHoldRenewsThenExits5WhenNotHeld(t *testing.T) {
	f := startFake(t)
	f.renewGone = true
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "--failure-timeout", "100ms", "hold", "--key", "k", "--lease", "300ms")
	if code != exitLost {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitLost, stderr)
	}
	token := strings.TrimSpace(stdout)
	if !strings.HasPrefix(stderr, `lockctl: lost the lock on "k" (token `+token+`): lockd says the token no longer holds it`) ||
		strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr %q", stderr)
	}
	if f.count("N k "+token+" 0.3") != 1 {
		t.Errorf("requests %q, want one renewal with the lease", f.requests())
	}
}

func TestHoldExits5WhenNoRenewalGetsThrough(t *testing.T) {
	f := startFake(t)
	cmd, stdout, stderr := startLockctl(t, "--addr", f.addr, "--failure-timeout", "100ms", "hold", "--key", "k", "--lease", "600ms")
	if _, err := stdout.ReadString('\n'); err != nil {
		t.Fatalf("no token printed: %v", err)
	}
	f.close() // lockd goes away with the lock
	if code := exitStatus(t, cmd); code != exitLost {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitLost, stderr)
	}
	if !strings.Contains(stderr.String(), "no renewal got through before the lease ended") {
		t.Errorf("stderr %q", stderr)
	}
}

func TestHoldTimeoutExit3(t *testing.T) {
	f := startFake(t)
	f.busy["k"] = true
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "hold", "--key", "k", "--wait", "1s")
	if code != exitTimeout || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Hold keeps one connection to a lone node. When it drops, the
// next renewal dials again at once and gets through: one connection is
// enough for a lock held for long.
func TestHoldRenewsOnANewConnectionAfterADrop(t *testing.T) {
	f := startFake(t)
	cmd, stdout, stderr := startLockctl(t, "--addr", f.addr, "--failure-timeout", "100ms", "hold", "--key", "k", "--lease", "1500ms")
	line, err := stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("no token printed: %v; stderr %q", err, stderr)
	}
	token := strings.TrimSpace(line)
	f.mu.Lock()
	before := len(f.log)
	f.mu.Unlock()
	f.dropConns()
	if n := f.waitRequest(t, "N k "+token+" ", before); n != 2 {
		t.Errorf("%d connections when the renewal after the drop came, want 2 (the first, then one dialled again)", n)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitStatus(t, cmd); code != 0 {
		t.Fatalf("exit %d, want 0; stderr %q", code, stderr)
	}
	if _, held := f.holder("k"); held {
		t.Errorf("hold did not release k after the drop; requests %q, stderr %q", f.requests(), stderr)
	}
}
