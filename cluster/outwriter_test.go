package cluster

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// A direct write: the goroutine that applied a batch writes what it
// queued on an idle connection itself, with one non-blocking write the
// socket takes whole, and no writer goroutine starts.
func TestOutDirectWriteTakenWhole(t *testing.T) {
	sock := newFakeSock(-1)
	w, _, at := testWriter(t, sock, true)
	w.ready()
	var f flushList
	if !w.queue([]byte("A k 1\n"), &f) || !w.queue([]byte("R k ok\n"), &f) {
		t.Fatal("queue refused")
	}
	if _, inline, running := w.state(); len(f.ws) != 1 || inline != 1 || running {
		t.Fatalf("after queue: %d promises, inline %d, writer running %v; want 1, 1, false", len(f.ws), inline, running)
	}
	f.flush()
	if got, want := sock.log(), `try "A k 1\nR k ok\n" of 13`; got != want {
		t.Fatalf("writes: %s; want %s", got, want)
	}
	if q, inline, running := w.state(); q != 0 || inline != 0 || running || at.bytes.Load() != 0 {
		t.Fatalf("after the write: queued %d (node %d), inline %d, writer running %v", q, at.bytes.Load(), inline, running)
	}
	if cap(w.out)+cap(w.spare) != 0 {
		t.Fatalf("an idle writer holds %d B of buffers", cap(w.out)+cap(w.spare))
	}
}

// A direct write the socket takes in part leaves the rest to the writer
// goroutine, ahead of what was queued while the write was in flight.
func TestOutPartialWriteLeavesTheRestInOrder(t *testing.T) {
	sock := newFakeSock(3)
	w, _, at := testWriter(t, sock, true)
	w.ready()
	sock.onTry = func() { w.queue([]byte("ghi\n"), nil) }
	var f flushList
	w.queue([]byte("abcdef\n"), &f)
	f.flush()
	at.wg.Wait()
	if got := sock.written(); got != "abcdef\nghi\n" {
		t.Fatalf("written %q (%s); want %q", got, sock.log(), "abcdef\nghi\n")
	}
	if got, want := sock.log(), `try "abc" of 7; write "def\nghi\n"`; got != want {
		t.Fatalf("writes: %s; want %s", got, want)
	}
	if q, _, running := w.state(); q != 0 || running || at.bytes.Load() != 0 {
		t.Fatalf("queued %d (node %d), writer running %v; want 0, 0, false", q, at.bytes.Load(), running)
	}
}

// Answers queued while the writer goroutine writes go out after what it
// writes, in one write, and no goroutine promises them meanwhile.
func TestOutQueuedDuringAWriteGoAfterIt(t *testing.T) {
	sock := newFakeSock(-1)
	w, _, at := testWriter(t, sock, true)
	inside, release := sock.blockWrites()
	w.ready()
	w.queue([]byte("a\n"), nil)
	<-inside
	var f flushList
	w.queue([]byte("b\n"), nil)
	w.queue([]byte("c\n"), &f)
	if len(f.ws) != 0 {
		t.Fatal("a goroutine promised to write a connection being written")
	}
	release()
	at.wg.Wait()
	if got, want := sock.log(), `write "a\n"; write "b\nc\n"`; got != want {
		t.Fatalf("writes: %s; want %s", got, want)
	}
}

// A close writes everything queued, then closes the socket; nothing can
// be queued after it. A close before the writer is ready waits for it.
func TestOutCloseFlushesThenCloses(t *testing.T) {
	sock := newFakeSock(-1)
	w, _, at := testWriter(t, sock, true)
	inside, release := sock.blockWrites()
	w.ready()
	w.queue([]byte("a\n"), nil)
	<-inside
	w.queue([]byte("b\n"), nil)
	w.flushAndClose()
	if w.queue([]byte("c\n"), nil) || !w.isClosed() {
		t.Fatal("queued after the close")
	}
	release()
	at.wg.Wait()
	if got, want := sock.log(), `write "a\n"; write "b\n"; close`; got != want {
		t.Fatalf("calls: %s; want %s", got, want)
	}

	sock = newFakeSock(-1)
	w, _, at = testWriter(t, sock, true)
	w.queue([]byte("early\n"), nil)
	w.flushAndClose()
	if got := sock.log(); got != "" {
		t.Fatalf("before ready: %s", got)
	}
	w.ready()
	at.wg.Wait()
	if got, want := sock.log(), `write "early\n"; close`; got != want {
		t.Fatalf("calls: %s; want %s", got, want)
	}
}

// A connection over --max-conn-output is closed at once, its bytes
// dropped and uncounted, and the limit reported; so is one over 64 KiB
// while the node is over --max-output.
func TestOutOverALimitCloses(t *testing.T) {
	sock := newFakeSock(-1)
	w, o, at := testWriter(t, sock, true)
	at.lim.MaxConnOutput = 100
	if !w.queue(make([]byte, 100), nil) {
		t.Fatal("100 B refused at a limit of 100")
	}
	if w.queue(make([]byte, 1), nil) {
		t.Fatal("101 B taken at a limit of 100")
	}
	if !w.isClosed() || w.queue([]byte("x\n"), nil) {
		t.Fatal("not closed")
	}
	if q, _, _ := w.state(); q != 0 || at.bytes.Load() != 0 || sock.closes != 1 {
		t.Fatalf("queued %d, node %d, socket closed %d times; want 0, 0, 1", q, at.bytes.Load(), sock.closes)
	}
	if len(o.hits) != 1 || o.hits[0] != limMaxConnOutput {
		t.Fatalf("limits hit %v, want [%d]", o.hits, limMaxConnOutput)
	}

	sock = newFakeSock(-1)
	w, o, at = testWriter(t, sock, true)
	at.bytes.Store(at.lim.MaxOutput) // the other connections' bytes
	if !w.queue(make([]byte, 64<<10), nil) {
		t.Fatal("64 KiB refused: a connection holding that little is not the node's trouble")
	}
	if w.queue([]byte("x"), nil) || len(o.hits) != 1 || o.hits[0] != limMaxOutput {
		t.Fatalf("limits hit %v, want [%d]", o.hits, limMaxOutput)
	}
	if got := at.bytes.Load(); got != at.lim.MaxOutput {
		t.Fatalf("node holds %d after the close, want the others' %d", got, at.lim.MaxOutput)
	}
}

// The reader pauses at readPauseAt bytes unread and resumes only below
// readResumeAt; a replication stream's reader never pauses.
func TestOutBackPressure(t *testing.T) {
	sock := newFakeSock(0)
	w, _, _ := testWriter(t, sock, true) // not ready: no writer goroutine drains it
	ctx := context.Background()
	if !w.waitDrained(ctx) {
		t.Fatal("an empty connection waits")
	}
	w.queue(make([]byte, readPauseAt-1), w.holdBack())
	w.afterBatch(true)
	if !w.waitDrained(ctx) {
		t.Fatal("a connection under readPauseAt waits")
	}
	w.queue(make([]byte, 1), nil)
	done := make(chan bool, 1)
	go func() { done <- w.waitDrained(ctx) }()
	// The paused reader writes what it held back first, which the socket
	// does not take.
	waitFor(t, "the reader to write what it held", func() bool {
		_, inline, _ := w.state()
		return inline == 0 && strings.HasPrefix(sock.log(), "try")
	})
	stillPaused := func(what string) {
		t.Helper()
		select {
		case <-done:
			t.Fatalf("%s: the reader resumed", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// A direct write drains the connection to n bytes unwritten. (With
	// bytes queued, a goroutine promises to write only in this test: in
	// the node the writer goroutine would have them.)
	drainTo := func(n int) {
		t.Helper()
		var f flushList
		w.mu.Lock()
		promised := f.promise(w)
		q := w.queued
		w.mu.Unlock()
		if !promised {
			t.Fatal("no direct write")
		}
		sock.mu.Lock()
		sock.room = q - n
		sock.mu.Unlock()
		f.flush()
		if q, _, _ := w.state(); q != n {
			t.Fatalf("drained to %d, want %d", q, n)
		}
	}
	stillPaused("at readPauseAt")
	drainTo(readPauseAt - 10)
	stillPaused("under readPauseAt")
	drainTo(readResumeAt)
	stillPaused("at readResumeAt")
	drainTo(readResumeAt - 1)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the reader was told the connection closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader is still paused under readResumeAt")
	}

	// A snapshot's producer waits for room under readResumeAt.
	roomed := make(chan bool, 1)
	w.queue(make([]byte, 1), nil)
	go func() { roomed <- w.waitRoom(ctx) }()
	select {
	case <-roomed:
		t.Fatal("waitRoom returned at readResumeAt")
	case <-time.After(50 * time.Millisecond):
	}
	drainTo(readResumeAt - 1)
	if !<-roomed {
		t.Fatal("waitRoom reports the connection closed")
	}

	w.setStream()
	w.queue(make([]byte, readPauseAt), nil)
	if !w.waitDrained(ctx) {
		t.Fatal("a stream's reader paused")
	}
	w.flushAndClose()
	if w.waitDrained(ctx) || w.waitRoom(ctx) {
		t.Fatal("a closed connection's waits report it open")
	}
}

// The writer goroutine returns once nothing is queued, and a later
// answer starts another.
func TestOutWriterExitsWhenIdleAndRestarts(t *testing.T) {
	sock := newFakeSock(-1)
	w, _, at := testWriter(t, sock, true)
	w.ready()
	for i, line := range []string{"a\n", "b\n"} {
		w.queue([]byte(line), nil) // outside any batch: the writer's
		at.wg.Wait()
		if _, _, running := w.state(); running {
			t.Fatalf("answer %d: the writer still counts as running after it returned", i)
		}
	}
	if got, want := sock.log(), `write "a\n"; write "b\n"`; got != want {
		t.Fatalf("writes: %s; want %s", got, want)
	}
}

// An answer queued as the writer goroutine decides to return is not
// lost: the writer sees the signal, or a new writer starts. Run under
// -race, with answers from goroutines of their own, each queued as a
// writer may be returning.
func TestOutNoAnswerLostWhenASignalRacesTheWritersExit(t *testing.T) {
	const producers, lines = 3, 8
	iterations := 1000
	if testing.Short() {
		iterations = 100
	}
	for it := range iterations {
		sock := newFakeSock(-1)
		w, _, at := testWriter(t, sock, true)
		w.ready()
		want := producers * lines * len("p0 l0\n")
		full := make(chan struct{})
		sock.want, sock.full = want, full
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for l := range lines {
					w.queue(fmt.Appendf(nil, "p%d l%d\n", p, l), nil)
					if l%2 == p%2 {
						runtime.Gosched()
					}
				}
			})
		}
		wg.Wait()
		select {
		case <-full:
		case <-time.After(10 * time.Second):
			t.Fatalf("iteration %d: %d of %d bytes written: an answer waits with no writer", it, len(sock.written()), want)
		}
		at.wg.Wait()
		got := sock.written()
		for p := range producers {
			var order []string
			for _, l := range strings.Split(got, "\n") {
				if strings.HasPrefix(l, fmt.Sprintf("p%d ", p)) {
					order = append(order, l)
				}
			}
			for l := range lines {
				if l >= len(order) || order[l] != fmt.Sprintf("p%d l%d", p, l) {
					t.Fatalf("iteration %d: producer %d's answers came as %v", it, p, order)
				}
			}
		}
		if q, inline, running := w.state(); q != 0 || inline != 0 || running {
			t.Fatalf("iteration %d: queued %d, inline %d, writer running %v after all was written", it, q, inline, running)
		}
	}
}

// Over TLS (no direct writes) an answer queued during a batch is not
// promised: the writer goroutine writes it with a blocking write.
func TestOutWithoutDirectWritesTheWriterWrites(t *testing.T) {
	sock := newFakeSock(-1)
	w, _, at := testWriter(t, sock, false)
	w.ready()
	var f flushList
	w.queue([]byte("A k 1\n"), &f)
	if len(f.ws) != 0 {
		t.Fatal("a goroutine promised to write a TLS connection")
	}
	f.flush()
	at.wg.Wait()
	if got, want := sock.log(), `write "A k 1\n"`; got != want {
		t.Fatalf("writes: %s; want %s", got, want)
	}
}

// An idle connection holds no buffer of the pool's size. One that a
// backlog grew stays while the connection is busy, and goes when its
// reader rests (shedOut), counted for trimLoop; with a write in flight,
// once the write is done.
func TestOutShedsBuffersAfterIdle(t *testing.T) {
	sock := newFakeSock(-1)
	w, _, at := testWriter(t, sock, true)
	w.ready()
	held := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return cap(w.out) + cap(w.spare)
	}
	w.queue([]byte("S - 1\n"), nil)
	at.wg.Wait()
	if h := held(); h != 0 {
		t.Fatalf("after a small answer, %d B held", h)
	}
	w.queue(make([]byte, 3*outBufSize), nil)
	at.wg.Wait()
	grown := held()
	if grown < 3*outBufSize {
		t.Fatalf("after a backlog, %d B held; want the grown buffer kept while busy", grown)
	}
	w.shedOut()
	if h := held(); h != 0 || at.shed.Load() != uint64(grown) {
		t.Fatalf("after the rest, %d B held, %d counted shed; want 0, %d", h, at.shed.Load(), grown)
	}

	inside, release := sock.blockWrites()
	w.queue(make([]byte, 3*outBufSize), nil)
	<-inside
	w.shedOut()
	release()
	at.wg.Wait()
	if h := held(); h != 0 || at.shed.Load() <= uint64(grown) {
		t.Fatalf("after a rest during a write, %d B held, %d counted shed", h, at.shed.Load())
	}
}

// Watch news waits until what the connection holds is written: the
// writer goroutine then asks for it (watchRoom), once; a direct writer,
// which must not take the node mutex, wakes the writer to.
func TestOutWatchWaitsForTheConnectionToDrain(t *testing.T) {
	sock := newFakeSock(-1)
	w, o, at := testWriter(t, sock, true)
	w.ready()
	if !w.watchWhenDrained() {
		t.Fatal("an idle connection made watch news wait")
	}
	inside, release := sock.blockWrites()
	w.queue([]byte("W k 1\n"), nil)
	<-inside
	if w.watchWhenDrained() {
		t.Fatal("watch news did not wait for a write in flight")
	}
	release()
	at.wg.Wait()
	if n := o.roomCalls(); n != 1 {
		t.Fatalf("watchRoom called %d times, want 1", n)
	}

	var f flushList
	w.queue([]byte("W k 2\n"), &f)
	if w.watchWhenDrained() {
		t.Fatal("watch news did not wait for a promised write")
	}
	f.flush()
	at.wg.Wait()
	if n := o.roomCalls(); n != 2 {
		t.Fatalf("watchRoom called %d times after a direct write, want 2", n)
	}
	if got, want := sock.log(), `write "W k 1\n"; try "W k 2\n" of 6`; got != want {
		t.Fatalf("writes: %s; want %s", got, want)
	}
}

// A write that fails while answers wait behind it closes the connection:
// what waits is dropped and no longer counted, the socket is closed
// once, nothing more is queued, and no writer is left running.
func TestOutFailedWriteCloses(t *testing.T) {
	sock := newFakeSock(-1)
	w, _, at := testWriter(t, sock, true)
	inside, release := sock.blockWrites()
	w.ready()
	w.queue([]byte("a\n"), nil)
	<-inside
	w.queue([]byte("b\n"), nil)
	sock.mu.Lock()
	sock.fail = errors.New("connection reset by peer")
	sock.mu.Unlock()
	release()
	at.wg.Wait()
	if w.queue([]byte("c\n"), nil) || !w.isClosed() {
		t.Fatal("queued after a failed write")
	}
	if got, want := sock.log(), `write failed; close`; got != want {
		t.Fatalf("calls: %s; want %s", got, want)
	}
	if q, inline, running := w.state(); q != 0 || inline != 0 || running || at.bytes.Load() != 0 {
		t.Fatalf("queued %d (node %d), inline %d, writer running %v; want all 0", q, at.bytes.Load(), inline, running)
	}
}

// A limit's close while a direct write is in flight: the write's rest,
// which the socket did not take, is dropped with the rest instead of
// going to a writer goroutine, and the counts fall to zero.
func TestOutLimitCloseDuringADirectWrite(t *testing.T) {
	sock := newFakeSock(3)
	w, o, at := testWriter(t, sock, true)
	at.lim.MaxConnOutput = 100
	w.ready()
	sock.onTry = func() {
		if w.queue(make([]byte, 100), nil) {
			t.Error("110 B taken at a limit of 100")
		}
	}
	var f flushList
	w.queue([]byte("abcdefghi\n"), &f)
	f.flush()
	at.wg.Wait()
	if got := sock.written(); got != "abc" {
		t.Fatalf("written %q, want %q", got, "abc")
	}
	if q, inline, running := w.state(); q != 0 || inline != 0 || running || at.bytes.Load() != 0 {
		t.Fatalf("queued %d (node %d), inline %d, writer running %v; want all 0", q, at.bytes.Load(), inline, running)
	}
	if sock.closes != 1 || len(o.hits) != 1 || o.hits[0] != limMaxConnOutput {
		t.Fatalf("socket closed %d times, limits hit %v; want 1, [%d]", sock.closes, o.hits, limMaxConnOutput)
	}
}
