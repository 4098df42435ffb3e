package main

import (
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// A live line for long commands (drill, bench): a person at a terminal
// sees that the run goes on and how far it is. It is drawn on stderr
// when stderr is a terminal, and nothing is drawn otherwise, so piped and
// captured output stays what it was.

// progressFrame is how often the line is redrawn.
const progressFrame = 250 * time.Millisecond

// startProgress redraws the line line() returns on stderr, when stderr is
// a terminal, until stop is called; stop clears it, and returns only when
// nothing more will be drawn.
func startProgress(g *globals, line func() string) (stop func()) {
	f, _ := g.Stderr.(*os.File)
	foreground, ok := liveTerminal(f)
	if !ok {
		return func() {}
	}
	return runProgress(f, line, progressFrame, os.Getenv("TERM") == "dumb", terminalWidth(f), foreground)
}

// runProgress is startProgress on any writer, for tests. A dumb terminal
// knows no escape codes: the line is overwritten with a carriage return
// and spaces. The line is cut to the terminal's width, so that it never
// wraps onto a second line that \r cannot reach. It is drawn only while
// foreground (nil: always) says the process is in the terminal's
// foreground.
func runProgress(w io.Writer, line func() string, frame time.Duration, dumb bool, width int, foreground func() bool) (stop func()) {
	done := make(chan struct{})
	quit := make(chan struct{})
	clear := "\r\x1b[2K"
	drawn := 0 // width of what is on the line, for a dumb terminal
	if dumb {
		clear = "\r"
	}
	erase := func() string {
		if dumb {
			return "\r" + strings.Repeat(" ", drawn) + "\r"
		}
		return clear
	}
	go func() {
		defer close(done)
		t := time.NewTicker(frame)
		defer t.Stop()
		for {
			select {
			case <-quit:
				if drawn > 0 {
					io.WriteString(w, erase())
				}
				return
			case <-t.C:
			}
			if foreground != nil && !foreground() {
				continue
			}
			l := line()
			if width > 1 && textWidth(l) > width-1 {
				l = truncateWidth(l, width-1)
			}
			out := clear + l
			if dumb {
				if n := textWidth(l); n < drawn {
					out += strings.Repeat(" ", drawn-n)
				}
			}
			io.WriteString(w, out)
			drawn = max(drawn, textWidth(l))
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-done
		})
	}
}
