package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/lockd-io/lockd/proto"
)

// The wait indicator: while an acquire waits in a key's queue, a person at
// a terminal sees that lockctl is alive, what it waits for and how many
// are ahead. Scripts see nothing of it: it draws on stderr only when
// stderr is a terminal.

const (
	// waitingDelay keeps the indicator hidden for waits too short to
	// notice, so an acquire granted at once draws nothing.
	waitingDelay = 300 * time.Millisecond
	// waitingFrame is the spinner's frame interval.
	waitingFrame = 100 * time.Millisecond
	// waitingPoll is how often the queue is asked for our position.
	waitingPoll = 500 * time.Millisecond
	// waitingDial bounds one question about the queue.
	waitingDial = time.Second
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// asciiFrames stand in for spinnerFrames where the terminal may not draw
// braille (a locale that is not UTF-8).
var asciiFrames = []string{"|", "/", "-", "\\"}

// startWaiting shows, on stderr when it is a terminal, a spinner with key,
// the time waited and the place in key's queue, until stop is called. Call
// it right before the acquire and stop right after it returns, granted or
// not. stop clears the line and returns only when nothing more will be
// drawn, so output printed after it is never mixed with the spinner; it
// may be called more than once. When stderr is not a terminal (or TERM is
// dumb) nothing is drawn and stop does nothing.
//
// The place in the queue is learned by sending Q on a connection of its
// own, to the nodes of --addr (following a redirect to the active), every
// half second, and counting the waiters that have waited longer than this
// acquire has.
func startWaiting(ctx context.Context, g *globals, key string) (stop func()) {
	f, ok := g.Stderr.(*os.File)
	if !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) || os.Getenv("TERM") == "dumb" {
		return func() {}
	}
	addrs := g.Addrs
	poll := func(ctx context.Context) (proto.Queue, error) { return queueOnce(ctx, addrs, key) }
	return runWaitIndicator(ctx, f, key, time.Now(), poll, waitingDelay, waitingFrame, waitingPoll)
}

// runWaitIndicator is startWaiting on any writer, with its timings given,
// for tests.
func runWaitIndicator(ctx context.Context, w io.Writer, key string, start time.Time,
	poll func(context.Context) (proto.Queue, error), delay, frame, pollEvery time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var mu sync.Mutex
	place := "" // what the last poll said of our place in the queue
	go func() {
		// The poller feeds place; the drawing loop never waits for it.
		next := time.NewTimer(delay)
		defer next.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-next.C:
			}
			qctx, qcancel := context.WithTimeout(ctx, waitingDial)
			q, err := poll(qctx)
			qcancel()
			mu.Lock()
			if err == nil {
				place = describePlace(q, time.Since(start))
			} else {
				place = ""
			}
			mu.Unlock()
			next.Reset(pollEvery)
		}
	}()
	frames, ascii := spinnerFrames, asciiOnly()
	if ascii {
		frames = asciiFrames
	}
	go func() {
		defer close(done)
		t := time.NewTimer(delay)
		defer t.Stop()
		drawn := false
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				if drawn {
					io.WriteString(w, "\r\x1b[2K")
				}
				return
			case <-t.C:
			}
			mu.Lock()
			p := place
			mu.Unlock()
			line := fmt.Sprintf("%s waiting for %q", frames[i%len(frames)], key)
			if p != "" {
				line += " · " + p
			}
			line += " · " + humanDuration(time.Since(start))
			if ascii {
				line = strings.ReplaceAll(line, "·", "-")
			}
			io.WriteString(w, "\r\x1b[2K"+line)
			drawn = true
			t.Reset(frame)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// queuePosition is our place in q's queue, counted from 1, given how long
// we have waited: every waiter that has waited longer came first. It is 0
// when the queue is empty (our request is not queued yet, or was just
// granted). Our own wait as the server counts it is a little shorter than
// ours, which started before the request left, so we do not count
// ourselves.
func queuePosition(q proto.Queue, waited time.Duration) (pos, of int) {
	if len(q.Waiters) == 0 {
		return 0, 0
	}
	ahead := 0
	for _, w := range q.Waiters {
		if w.Waited > waited {
			ahead++
		}
	}
	// Past the listed head of a long queue, ahead counts only the listed
	// ones: we are at least that far back.
	of = max(q.Waiting, len(q.Waiters))
	return min(ahead+1, of), of
}

// describePlace says where we stand in q, for the indicator.
func describePlace(q proto.Queue, waited time.Duration) string {
	pos, of := queuePosition(q, waited)
	var parts []string
	if pos > 0 {
		parts = append(parts, fmt.Sprintf("#%d of %d in the queue", pos, of))
	}
	switch hs := holdersOf(q); {
	case len(hs) > 1 || limitOf(q) > 1:
		// A place frees when the first of the holders' leases ends.
		soonest := hs[0].LeaseLeft
		for _, h := range hs {
			soonest = min(soonest, h.LeaseLeft)
		}
		parts = append(parts, fmt.Sprintf("%d/%d held, the first lease ends in %s", len(hs), limitOf(q), humanDuration(soonest)))
	case q.Held:
		parts = append(parts, fmt.Sprintf("holder's lease ends in %s", humanDuration(q.LeaseLeft)))
	}
	return strings.Join(parts, " · ")
}

// queueOnce asks for key's queue on a fresh connection: the first node of
// addrs that can be dialled, or the active it redirects to. It shares
// nothing with the client the acquire runs on.
func queueOnce(ctx context.Context, addrs []string, key string) (proto.Queue, error) {
	var last error
	for _, addr := range addrs {
		for hop := 0; hop < 2 && addr != ""; hop++ {
			a, err := askOnce(ctx, addr, "Q "+key)
			if err != nil {
				last = err
				break
			}
			switch a.Kind {
			case proto.OpQueue:
				return proto.ParseQueue(a)
			case proto.KindMoved:
				addr = ""
				if len(a.Fields) == 1 {
					addr = a.Fields[0]
				}
				last = errors.New("redirected without an address")
			default:
				return proto.Queue{}, fmt.Errorf("%s answered %q", addr, a.Kind.String())
			}
		}
		if ctx.Err() != nil {
			return proto.Queue{}, ctx.Err()
		}
	}
	if last == nil {
		last = errors.New("no address")
	}
	return proto.Queue{}, last
}

// maxAnswer bounds one answer askOnce reads, as the client bounds its own.
const maxAnswer = 1 << 20

// askOnce dials addr, sends one request line and reads one answer.
func askOnce(ctx context.Context, addr, request string) (proto.Answer, error) {
	d := net.Dialer{Timeout: waitingDial}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return proto.Answer{}, err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	if _, err := io.WriteString(nc, request+"\n"); err != nil {
		return proto.Answer{}, err
	}
	// A Q answer lists up to 1000 waiters and their ids: far more than a
	// bufio.Reader's own buffer, and still bounded.
	line, err := bufio.NewReader(io.LimitReader(nc, maxAnswer)).ReadBytes('\n')
	if err != nil {
		return proto.Answer{}, err
	}
	return proto.ParseAnswer(line)
}
