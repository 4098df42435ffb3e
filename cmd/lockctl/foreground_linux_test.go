package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// A wait indicator belongs to a job in the terminal's foreground. An
// acquire that waits, run by an interactive shell (job control on, as
// set -m turns it on) in the foreground, draws its spinner on the
// terminal; the same acquire started with & is a job in a process group
// of its own, not the terminal's foreground one, and draws nothing over
// what the foreground prints.
func TestSpinnerOnlyInTheForeground(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("needs sh: %v", err)
	}
	f := startFake(t)
	if code, _, stderr := lockctl(t, "--addr", f.addr, "acquire", "--key", "k", "--lease", "1m"); code != 0 {
		t.Fatalf("acquire: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		name, script string
		spinner      bool
	}{
		{"foreground", `set -m; "$@"`, true},
		{"background", `set -m; "$@" & wait $!`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pty := newPTY(t, 80)
			cmd := exec.Command(sh, "-c", tc.script, "sh", os.Args[0], "--addr", f.addr, "acquire", "--key", "k", "--wait", "1500ms")
			cmd.Env = append(os.Environ(), envRunMain+"=1", "TERM=xterm", "LC_ALL=C.UTF-8")
			cmd.Stdin, cmd.Stderr = pty.tty, pty.tty
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			err := cmd.Run()
			out := pty.output()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitTimeout {
				t.Fatalf("the acquire did not wait and time out (exit 3): %v; terminal:\n%q", err, out)
			}
			if drew := strings.Contains(out, `waiting for "k"`); drew != tc.spinner {
				t.Errorf("spinner drawn: %v, want %v; terminal:\n%q", drew, tc.spinner, out)
			}
			if !strings.Contains(out, "lockctl: ") {
				t.Errorf("no error on the terminal:\n%q", out)
			}
		})
	}
}
