package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestExecPassesLockToCommand(t *testing.T) {
	f := startFake(t)
	t.Setenv("LOCKD_TOKEN", "stale") // an inherited value must not leak through
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "exec", "--key", "job", "--",
		"sh", "-c", `echo "$LOCKD_KEY $LOCKD_TOKEN $LOCKD_ADDR"`)
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	want := "job " + strconv.FormatUint(f.next-1, 10) + " " + f.addr + "\n"
	if stdout != want {
		t.Errorf("the command printed %q, want %q", stdout, want)
	}
	if _, held := f.holder("job"); held {
		t.Error("exec did not release the lock")
	}
}

func TestExecReturnsCommandStatus(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 3", 3},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
		{"kill -KILL $$", 128 + int(syscall.SIGKILL)},
	} {
		t.Run(tc.script, func(t *testing.T) {
			f := startFake(t)
			code, _, stderr := lockctl(t, "--addr", f.addr, "exec", "--key", "job", "--", "sh", "-c", tc.script)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			if stderr != "" {
				t.Errorf("lockctl should add nothing to the command's stderr, got %q", stderr)
			}
			if f.count("R job ") != 1 {
				t.Errorf("requests %q, want one release", f.requests())
			}
		})
	}
}

func TestExecCommandNotRunnable(t *testing.T) {
	f := startFake(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A script that exists but names an interpreter
	// that does not is not "command not found".
	badInterp := filepath.Join(dir, "bad-interp.sh")
	if err := os.WriteFile(badInterp, []byte("#!/no/such/shell -e\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command string
		code    int
		want    string
	}{
		{"lockctl-no-such-command", 127, "command not found: lockctl-no-such-command"},
		{filepath.Join(dir, "missing"), 127, "command not found"},
		{notExec, 126, "permission denied"},
		{badInterp, 126, "cannot run " + badInterp + ": bad interpreter /no/such/shell (its #! line): no such file; fix the script's first line"},
	} {
		code, _, stderr := lockctl(t, "--addr", f.addr, "exec", "--key", "job", "--", tc.command)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.command, code, stderr, tc.code, tc.want)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Errorf("a command that cannot run must not take the lock; requests %q", reqs)
	}
}

func TestExecTimeout(t *testing.T) {
	f := startFake(t)
	f.busy["job"] = true
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "exec", "--key", "job", "--wait", "1s", "--", "sh", "-c", "echo ran")
	if code != exitTimeout || stdout != "" || !strings.Contains(stderr, `"job" was still held after waiting 1s`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing run", code, stdout, stderr, exitTimeout)
	}
	code, stdout, stderr = lockctl(t, "--addr", f.addr, "exec", "--key", "job", "--wait", "1ms", "--timeout-code", "0", "--", "sh", "-c", "echo ran")
	if code != 0 || stdout != "" || stderr != "" {
		t.Errorf("--timeout-code 0: exit %d, stdout %q, stderr %q; want 0, nothing run, nothing said", code, stdout, stderr)
	}
	code, _, _ = lockctl(t, "--addr", f.addr, "exec", "--key", "job", "--wait", "1ms", "--timeout-code", "75", "--", "true")
	if code != 75 {
		t.Errorf("--timeout-code 75: exit %d", code)
	}
}

func TestExecLostLockStopsCommand(t *testing.T) {
	f := startFake(t)
	f.renewGone = true
	code, _, stderr := lockctl(t, append([]string{"--addr", f.addr, "--failure-timeout", "100ms", "exec", "--key", "job", "--lease", "300ms", "--"},
		childCommand("block")...)...)
	if code != exitLost {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitLost, stderr)
	}
	if !strings.HasPrefix(stderr, `lockctl: lost the lock on "job"`) || !strings.Contains(stderr, "with SIGTERM") {
		t.Errorf("stderr %q", stderr)
	}
}

// readyWriter collects a command's output and calls ready once it has
// printed "ready".
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	ready func()
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "ready\n") {
		w.once.Do(w.ready)
	}
	return len(p), nil
}

func TestExecLostLockKillsStubbornCommand(t *testing.T) {
	f := startFake(t)
	f.renewGone = true
	// The renewal that finds the lock gone is answered only once the
	// command ignores SIGTERM, so SIGKILL is what must end it.
	f.holdRenewals()
	stdout := &readyWriter{ready: f.openGate}
	var stderr bytes.Buffer
	args := append([]string{"lockctl", "--addr", f.addr, "--failure-timeout", "100ms", "exec", "--key", "job", "--lease", "1500ms", "--grace", "100ms", "--"},
		childCommand("ignore-term")...)
	code := run(t.Context(), args, strings.NewReader(""), stdout, &stderr)
	if code != exitLost {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitLost, stderr.String())
	}
	if !strings.Contains(stderr.String(), "with SIGKILL") {
		t.Errorf("stderr %q, want it to say SIGKILL ended the command", stderr.String())
	}
}

func TestExecForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			f := startFake(t)
			cmd, stdout, stderr := startLockctl(t, append([]string{"--addr", f.addr, "exec", "--key", "job", "--"},
				childCommand("block")...)...)
			if line, err := stdout.ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("the command did not start: %q %v; stderr %q", line, err, stderr)
			}
			cmd.Process.Signal(sig)
			if code := exitStatus(t, cmd); code != 128+int(sig) {
				t.Fatalf("exit %d, want %d (the command killed by the signal); stderr %q", code, 128+int(sig), stderr)
			}
			if _, held := f.holder("job"); held {
				t.Error("exec did not release the lock")
			}
		})
	}
}

// A lock command against a single node opens one connection,
// not the client library's two: the second dial and its status exchange
// cost exec as much as the rest of its start-up.
func TestLockCommandsOpenOneConnection(t *testing.T) {
	const token = "7360982537641984001"
	for _, tc := range []struct {
		args []string
		sent string // the request the command sends
	}{
		{[]string{"exec", "--key", "job", "--", "true"}, "A job "},
		{[]string{"acquire", "--key", "job"}, "A job "},
		{[]string{"release", "--key", "job", "--token", token}, "R job "},
		{[]string{"renew", "--key", "job", "--token", token}, "N job "},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			f := startFake(t)
			_, _, stderr := lockctl(t, append([]string{"--addr", f.addr}, tc.args...)...)
			if f.count(tc.sent) != 1 {
				t.Fatalf("requests %q, want one %q; stderr %q", f.requests(), tc.sent, stderr)
			}
			if n := f.connections(t); n != 1 {
				t.Errorf("lockctl %s opened %d connections to one node, want 1", tc.args[0], n)
			}
		})
	}
}
