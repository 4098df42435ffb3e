package main

import (
	"os"

	"github.com/mattn/go-isatty"
	"golang.org/x/sys/unix"
)

// liveTerminal returns the terminal f is, when lockctl may draw a live
// line on it (a spinner, a progress line): f is a terminal other than a
// dumb one, and this process is in its foreground. A job started in the
// background (`lockctl exec ... &` in an interactive shell) shares the
// terminal with whatever runs in the foreground, and its redraws would
// land in the middle of that; it also risks being stopped by SIGTTOU for
// writing there. foreground says, at each frame, whether the process is
// still in the foreground (a job can be moved by Ctrl-Z, bg and fg).
func liveTerminal(f *os.File) (foreground func() bool, ok bool) {
	if f == nil || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return nil, false
	}
	fd := int(f.Fd())
	foreground = func() bool {
		pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		// A terminal that cannot say (not this process's controlling
		// terminal) is one nothing else draws on in between.
		return err != nil || pgrp == unix.Getpgrp()
	}
	return foreground, foreground()
}
