package cluster

// The fakes the writer's tests (outwriter_test.go) drive it with: a
// socket that takes what a test lets it, and an owner that records what
// the writer tells it.

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// fakeSock is an outSocket that records what is written to it. tryWrite
// takes room bytes at most (all when room is negative); write takes
// everything, after waiting for block to close when it is set.
type fakeSock struct {
	mu     sync.Mutex
	got    []byte
	calls  []string
	room   int
	block  chan struct{} // when not nil, write waits for it to close
	inside chan struct{} // write sends here as it starts to wait
	onTry  func()        // called inside tryWrite, as a write in flight
	closes int
	fail   error // when not nil, what write returns, having written nothing
	// full is closed once want bytes were written.
	want int
	full chan struct{}
}

func newFakeSock(room int) *fakeSock { return &fakeSock{room: room} }

func (s *fakeSock) took(b []byte) {
	s.got = append(s.got, b...)
	if s.full != nil && len(s.got) >= s.want {
		close(s.full)
		s.full = nil
	}
}

func (s *fakeSock) write(b []byte) (int, error) {
	s.mu.Lock()
	block, inside := s.block, s.inside
	s.mu.Unlock()
	if block != nil {
		inside <- struct{}{}
		<-block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		s.calls = append(s.calls, "write failed")
		return 0, s.fail
	}
	s.calls = append(s.calls, "write "+brief(b))
	s.took(b)
	return len(b), nil
}

func (s *fakeSock) tryWrite(b []byte) (int, error) {
	if s.onTry != nil {
		s.onTry()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(b)
	if s.room >= 0 {
		n = min(n, s.room)
	}
	s.calls = append(s.calls, fmt.Sprintf("try %s of %d", brief(b[:n]), len(b)))
	s.took(b[:n])
	if n < len(b) {
		return n, errWouldBlock
	}
	return n, nil
}

func (s *fakeSock) close() {
	s.mu.Lock()
	s.closes++
	s.calls = append(s.calls, "close")
	s.mu.Unlock()
}

// blockWrites makes write wait until the returned function is called.
func (s *fakeSock) blockWrites() (inside <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.block, s.inside = make(chan struct{}), make(chan struct{}, 16)
	block := s.block
	return s.inside, func() {
		s.mu.Lock()
		s.block = nil
		s.mu.Unlock()
		close(block)
	}
}

func (s *fakeSock) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.calls, "; ")
}

func (s *fakeSock) written() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.got)
}

// brief is b, or its length when it is long.
func brief(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%dB", len(b))
	}
	return fmt.Sprintf("%q", b)
}

// fakeOwner records what a writer tells its connection.
type fakeOwner struct {
	mu    sync.Mutex
	hits  []int
	rooms int
}

func (o *fakeOwner) limitClosed(hit int, why string) {
	o.mu.Lock()
	o.hits = append(o.hits, hit)
	o.mu.Unlock()
}

func (o *fakeOwner) watchRoom() {
	o.mu.Lock()
	o.rooms++
	o.mu.Unlock()
}

func (o *fakeOwner) roomCalls() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rooms
}

// testWriter is a writer on sock, with the default limits, whose writer
// goroutines the test waits for as it ends.
func testWriter(t *testing.T, sock outSocket, direct bool) (*outWriter, *fakeOwner, *outShared) {
	t.Helper()
	lim := DefaultLimits
	at := &outShared{lim: &lim, wg: &sync.WaitGroup{}}
	o := &fakeOwner{}
	w := &outWriter{}
	w.init(at, o, sock, direct)
	t.Cleanup(at.wg.Wait)
	return w, o, at
}

// state is what the test looks at of w, under its lock.
func (w *outWriter) state() (queued, inline int, running bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queued, w.inline, w.wr.running
}
