package main

import (
	"context"
	"strings"
	"testing"
)

// On an 80-column terminal an error too long for a line is wrapped at
// spaces, its continuation indented, so the terminal breaks no word;
// into a pipe it stays one line, for grep.
func TestErrorsWrapAtSpacesOnATerminal(t *testing.T) {
	args := []string{"lockctl", "--addr", "127.0.0.1:1", "--failure-timeout", "50ms", "release", "--key", "k", "--token", "1"}
	pty := newPTY(t, 80)
	code := run(context.Background(), args, strings.NewReader(""), pty.tty, pty.tty)
	out := pty.output()
	if code == 0 || !strings.HasPrefix(out, "lockctl: ") {
		t.Fatalf("exit %d, output %q", code, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("an error of %d columns on one line: %q", len(out), out)
	}
	for i, l := range lines {
		if w := textWidth(l); w > 80 {
			t.Errorf("line %d is %d columns: %q", i+1, w, l)
		}
		if i > 0 && !strings.HasPrefix(l, "  ") {
			t.Errorf("continuation line %d not indented: %q", i+1, l)
		}
	}
	if joined := strings.Join(strings.Fields(out), " "); !strings.Contains(joined, "lockctl: ") {
		t.Errorf("words lost: %q", joined)
	}

	code, _, stderr := lockctl(t, args[1:]...)
	if code == 0 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("into a pipe: exit %d, %q", code, stderr)
	}
}
