package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// A pseudo-terminal for tests of what lockctl draws only on a terminal:
// the terminal end (the pty's follower, which lockctl writes to, and
// which may become a process's controlling terminal) and everything
// written to it, read from the leader.
type testPTY struct {
	tty *os.File

	leader *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan struct{}
}

// newPTY opens a pty of cols columns; it is closed when the test ends.
func newPTY(t *testing.T, cols int) *testPTY {
	t.Helper()
	leader, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	fd := int(leader.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty's terminal: %v", err)
	}
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: uint16(cols)}); err != nil {
		t.Fatalf("set the window size: %v", err)
	}
	p := &testPTY{tty: tty, leader: leader, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := leader.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		tty.Close()
		leader.Close()
		<-p.done
	})
	return p
}

// output is what was written to the terminal so far, once the writes
// made before the call have been read: the terminal end is closed
// first.
func (p *testPTY) output() string {
	p.tty.Close()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	// The terminal writes a line break as CR LF.
	return strings.ReplaceAll(p.out.String(), "\r\n", "\n")
}
