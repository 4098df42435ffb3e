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

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
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
	f, _ := g.Stderr.(*os.File)
	foreground, ok := liveTerminal(f)
	if !ok || os.Getenv("TERM") == "dumb" {
		return func() {}
	}
	addrs := g.Addrs
	poll := func(ctx context.Context) (proto.Queue, error) { return queueOnce(ctx, addrs, key) }
	return runWaitIndicator(ctx, f, key, time.Now(), poll, waitingDelay, waitingFrame, waitingPoll, terminalWidth(f), foreground)
}

// runWaitIndicator is startWaiting on any writer, with its timings and
// the terminal's width given, for tests. The line never reaches the last
// column: a line that wraps leaves its first row behind at every redraw,
// which \r cannot reach. A frame is drawn only while foreground (nil:
// always) says the process is in the terminal's foreground.
func runWaitIndicator(ctx context.Context, w io.Writer, key string, start time.Time,
	poll func(context.Context) (proto.Queue, error), delay, frame, pollEvery time.Duration, width int, foreground func() bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var mu sync.Mutex
	var place []string // what the last poll said of our place in the queue
	leases := make(leaseWatch)
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
			var p []string
			if err == nil {
				p = describePlace(q, time.Since(start), leases.observe(q, time.Now()))
			}
			mu.Lock()
			place = p
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
			t.Reset(frame)
			if foreground != nil && !foreground() {
				continue
			}
			mu.Lock()
			p := place
			mu.Unlock()
			line := waitLine(frames[i%len(frames)], key, p, humanDuration(time.Since(start)), ascii, width)
			io.WriteString(w, "\r\x1b[2K"+line)
			drawn = true
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

// waitLine is one frame of the indicator, fitted to width columns (less
// one): when the whole line does not fit, the holder's part goes first,
// then the place in the queue, and what is left is cut; the spinner and
// the time waited come first and last, so the line still moves.
func waitLine(frame, key string, place []string, waited string, ascii bool, width int) string {
	sep := " · "
	if ascii {
		sep = " - "
	}
	head := frame + ` waiting for "` + printable(key) + `"`
	for n := len(place); ; n-- {
		parts := append([]string{head}, place[:n]...)
		line := strings.Join(append(parts, waited), sep)
		if width <= 1 || textWidth(line) <= width-1 {
			return line
		}
		if n == 0 {
			return truncateWidth(line, width-1)
		}
	}
}

// leaseWatch remembers, per holder's token, the lease left at the last
// poll, to tell a lease that runs down from one that its holder renews:
// a renewed lease never ends while its holder lives, so showing it
// counting from 28 s again and again would read as a wait of 28 s.
type leaseWatch map[uint64]leaseSeen

type leaseSeen struct {
	left    time.Duration
	at      time.Time
	renewed bool
}

// renewSlack is how much more lease than expected a poll must show before
// the holder counts as renewing: the lease-left figures are rounded to
// the millisecond and the polls' round trips differ.
const renewSlack = 250 * time.Millisecond

// observe records q's holders as seen at now and returns the tokens seen
// renewing; holders gone are forgotten.
func (lw leaseWatch) observe(q proto.Queue, now time.Time) map[uint64]bool {
	hs := holdersOf(q)
	renewing := make(map[uint64]bool, len(hs))
	live := make(map[uint64]bool, len(hs))
	for _, h := range hs {
		live[h.Token] = true
		seen, ok := lw[h.Token]
		if ok && h.LeaseLeft > seen.left-now.Sub(seen.at)+renewSlack {
			seen.renewed = true
		}
		seen.left, seen.at = h.LeaseLeft, now
		lw[h.Token] = seen
		renewing[h.Token] = seen.renewed
	}
	for t := range lw {
		if !live[t] {
			delete(lw, t)
		}
	}
	return renewing
}

// describePlace says where we stand in q, for the indicator: the place in
// the queue, then who holds the key and when a place frees if nobody
// releases it, which is when a lease that is not renewed ends. renewing
// names the holders' tokens seen renewing.
func describePlace(q proto.Queue, waited time.Duration, renewing map[uint64]bool) []string {
	pos, of := queuePosition(q, waited)
	var parts []string
	if pos > 0 {
		parts = append(parts, fmt.Sprintf("#%d of %d in the queue", pos, of))
	}
	hs := holdersOf(q)
	if len(hs) == 0 {
		return parts
	}
	// A place frees, at the latest, when the first lease that is not
	// renewed ends.
	soonest, ends := time.Duration(0), false
	for _, h := range hs {
		if !renewing[h.Token] && (!ends || h.LeaseLeft < soonest) {
			soonest, ends = h.LeaseLeft, true
		}
	}
	if len(hs) > 1 || limitOf(q) > 1 {
		held := fmt.Sprintf("%d/%d held", len(hs), limitOf(q))
		if ends {
			return append(parts, fmt.Sprintf("%s, the first lease ends in %s", held, humanDuration(soonest)))
		}
		return append(parts, held+", every holder renewing")
	}
	held := "held"
	if n := hs[0].Name(); n != "" {
		held = "held by " + printable(n)
	}
	if ends {
		return append(parts, fmt.Sprintf("%s, lease ends in %s", held, humanDuration(soonest)))
	}
	return append(parts, held+", renewing")
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
				// Read as the client reads it: a reader key has many holders.
				qi, err := client.ParseQueueInfo(a)
				return qi.Queue, err
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
