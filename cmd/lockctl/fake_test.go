package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// fakeLockd answers just enough of the wire protocol for lockctl: it
// grants acquires in FIFO order with growing tokens (or answers T at once
// for keys marked busy), honours waits, and renews and releases what it
// granted. It keeps every request line.
type fakeLockd struct {
	addr string
	ln   net.Listener

	mu        sync.Mutex
	next      uint64
	held      map[string]uint64
	queue     map[string][]*fakeWaiter
	busy      map[string]bool   // acquire answers T at once
	readers   map[uint64]string // the key each reader's token holds
	renewGone bool              // renew answers notheld
	lose      map[string]bool   // renew of these keys answers notheld
	mute      bool              // answers nothing at all: a hung server
	renewGate chan struct{}     // when set, renew answers wait for openGate
	gateOnce  sync.Once
	log       []string
	wg        sync.WaitGroup
	conns     map[net.Conn]bool
	accepted  []string   // remote address of every connection, in accept order
	changed   *sync.Cond // on mu: accepted or log grew
}

// fakeConn serialises the writes of one connection: grants to waiters
// are written from whichever goroutine frees the key.
type fakeConn struct {
	mu sync.Mutex
	c  net.Conn
}

func (fc *fakeConn) write(b []byte) error {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	_, err := fc.c.Write(b)
	return err
}

type fakeWaiter struct {
	key   string
	conn  *fakeConn
	timer *time.Timer
}

func startFake(t *testing.T) *fakeLockd {
	t.Helper()
	return startFakeOn(t, listenLocal(t))
}

// startFakeOn is startFake serving on ln.
func startFakeOn(t *testing.T, ln net.Listener) *fakeLockd {
	t.Helper()
	f := &fakeLockd{
		addr:    ln.Addr().String(),
		ln:      ln,
		next:    7360982537641984001, // a realistic token: wider than 2^53
		held:    make(map[string]uint64),
		queue:   make(map[string][]*fakeWaiter),
		busy:    make(map[string]bool),
		readers: make(map[uint64]string),
		lose:    make(map[string]bool),
		conns:   make(map[net.Conn]bool),
	}
	f.changed = sync.NewCond(&f.mu)
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeLockd) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = true
		f.accepted = append(f.accepted, c.RemoteAddr().String())
		f.changed.Broadcast()
		f.mu.Unlock()
		f.wg.Add(1)
		go f.serve(&fakeConn{c: c})
	}
}

func (f *fakeLockd) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.openGate()
	f.wg.Wait()
}

// holdRenewals makes renew answers wait until openGate.
func (f *fakeLockd) holdRenewals() {
	f.mu.Lock()
	f.renewGate = make(chan struct{})
	f.mu.Unlock()
}

func (f *fakeLockd) openGate() {
	f.mu.Lock()
	gate := f.renewGate
	f.mu.Unlock()
	if gate != nil {
		f.gateOnce.Do(func() { close(gate) })
	}
}

func (f *fakeLockd) serve(fc *fakeConn) {
	defer f.wg.Done()
	defer f.dropWaiters(fc)
	defer fc.c.Close()
	r := bufio.NewReader(fc.c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line, more, shared := setWords(line)
		req, perr := proto.Parse([]byte(line))
		var out []byte
		if perr == nil && req.Op == proto.OpAcquire && (len(more) > 0 || shared) {
			out = f.answerSet(req, more, shared)
		} else if perr != nil {
			var pe *proto.ParseError
			errors.As(perr, &pe)
			out = proto.AppendError(nil, pe.Key, pe.Op, pe.Msg)
		} else {
			out = f.answer(fc, req)
		}
		if out != nil && fc.write(out) != nil {
			return
		}
	}
}

// answer returns the answer to req, or nil when the answer comes later (a
// queued acquire).
func (f *fakeLockd) answer(fc *fakeConn, req proto.Request) []byte {
	f.mu.Lock()
	if f.mute {
		f.mu.Unlock()
		return nil
	}
	if req.Op != proto.OpStatus {
		// S is the client's keep-alive: not worth a line of the log.
		f.log = append(f.log, strings.TrimSpace(fmt.Sprintf("%s %s %s", req.Op, req.Key, argsOf(req))))
		f.changed.Broadcast()
	}
	gate := f.renewGate
	f.mu.Unlock()
	if req.Op == proto.OpRenew && gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch req.Op {
	case proto.OpAcquire:
		if f.busy[req.Key] || f.readersLocked(req.Key) > 0 {
			return proto.AppendTimeout(nil, req.Key)
		}
		if _, taken := f.held[req.Key]; !taken {
			return proto.AppendGranted(nil, req.Key, f.grantLocked(req.Key))
		}
		w := &fakeWaiter{key: req.Key, conn: fc}
		if req.Wait > 0 {
			w.timer = time.AfterFunc(req.Wait, func() { f.expire(w) })
		}
		f.queue[req.Key] = append(f.queue[req.Key], w)
		return nil
	case proto.OpRelease:
		if f.readers[req.Token] == req.Key {
			delete(f.readers, req.Token)
			return proto.AppendWord(nil, proto.OpRelease, req.Key, proto.WordOK)
		}
		if tok, ok := f.held[req.Key]; ok && tok == req.Token {
			delete(f.held, req.Key)
			f.handOnLocked(req.Key)
			return proto.AppendWord(nil, proto.OpRelease, req.Key, proto.WordOK)
		}
		return proto.AppendWord(nil, proto.OpRelease, req.Key, proto.WordNotHeld)
	case proto.OpRenew:
		if tok, ok := f.held[req.Key]; ((ok && tok == req.Token) || f.readers[req.Token] == req.Key) && !f.renewGone && !f.lose[req.Key] {
			return proto.AppendWord(nil, proto.OpRenew, req.Key, proto.WordOK)
		}
		return proto.AppendWord(nil, proto.OpRenew, req.Key, proto.WordNotHeld)
	case proto.OpStatus:
		return proto.AppendStatus(nil, req.Key, proto.Status{Self: f.addr, Role: "active", Active: f.addr,
			Peers: []proto.PeerStatus{{Addr: f.addr, Role: "active", Reachable: true}}})
	}
	return proto.AppendError(nil, req.Key, req.Op, "not in the fake")
}

func (f *fakeLockd) grantLocked(key string) uint64 {
	tok := f.next
	f.next++
	f.held[key] = tok
	return tok
}

// handOnLocked grants a freed key to the head of its queue.
func (f *fakeLockd) handOnLocked(key string) {
	q := f.queue[key]
	if len(q) == 0 {
		return
	}
	w := q[0]
	f.queue[key] = q[1:]
	if w.timer != nil {
		w.timer.Stop()
	}
	// Written outside f.mu would be tidier; a write to a local socket
	// does not block for long.
	w.conn.write(proto.AppendGranted(nil, key, f.grantLocked(key)))
}

// expire answers T to a waiter whose wait elapsed.
func (f *fakeLockd) expire(w *fakeWaiter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removeLocked(w) {
		w.conn.write(proto.AppendTimeout(nil, w.key))
	}
}

func (f *fakeLockd) removeLocked(w *fakeWaiter) bool {
	q := f.queue[w.key]
	for i, x := range q {
		if x == w {
			f.queue[w.key] = append(q[:i:i], q[i+1:]...)
			return true
		}
	}
	return false
}

// dropWaiters removes the waiters of a closed connection.
func (f *fakeLockd) dropWaiters(fc *fakeConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, fc.c)
	for _, q := range f.queue {
		for _, w := range q {
			if w.conn == fc {
				if w.timer != nil {
					w.timer.Stop()
				}
				f.removeLocked(w)
			}
		}
	}
}

func argsOf(req proto.Request) string {
	switch req.Op {
	case proto.OpAcquire:
		args := proto.FormatSeconds(req.Lease) + " " + proto.FormatSeconds(req.Wait)
		if req.Limit > 1 {
			args += " limit=" + strconv.Itoa(req.Limit)
		}
		return args
	case proto.OpRelease:
		return strconv.FormatUint(req.Token, 10)
	case proto.OpRenew:
		return strconv.FormatUint(req.Token, 10) + " " + proto.FormatSeconds(req.Lease)
	}
	return ""
}

// requests returns the request lines seen so far, as "OP KEY ARGS".
func (f *fakeLockd) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// count returns how many requests start with prefix.
func (f *fakeLockd) count(prefix string) int {
	n := 0
	for _, l := range f.requests() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// connections counts the connections opened to the fake so far, once the
// process that opened them is done with them: it opens one more itself and
// counts those accepted before it. The kernel hands connections to accept
// in the order their handshakes completed, so every earlier dial is
// counted, without waiting for a time.
func (f *fakeLockd) connections(t *testing.T) int {
	t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	marker := c.LocalAddr().String()
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if i := slices.Index(f.accepted, marker); i >= 0 {
			return i
		}
		f.changed.Wait()
	}
}

// dropConns closes every connection from the server's side, as a node
// whose network blinked would; the listener stays open.
func (f *fakeLockd) dropConns() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
	}
}

// waitRequest waits until the request log holds a line starting with
// prefix at index from or later, and returns the number of connections
// accepted by then. It fails the test after 10 seconds.
func (f *fakeLockd) waitRequest(t *testing.T, prefix string, from int) int {
	t.Helper()
	expired := false
	timer := time.AfterFunc(10*time.Second, func() {
		f.mu.Lock()
		expired = true
		f.changed.Broadcast()
		f.mu.Unlock()
	})
	defer timer.Stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for !expired {
		for _, l := range f.log[min(from, len(f.log)):] {
			if strings.HasPrefix(l, prefix) {
				return len(f.accepted)
			}
		}
		f.changed.Wait()
	}
	t.Fatalf("no request %q after the first %d of %q", prefix, from, f.log)
	return 0
}

// holder returns the token holding key, if any.
func (f *fakeLockd) holder(key string) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok, ok := f.held[key]
	return tok, ok
}

// setWords takes the key= and mode= words of an acquire out of line,
// for proto.Parse, which does not read them yet.
func setWords(line string) (rest string, more []string, shared bool) {
	var kept []string
	for _, w := range strings.Fields(line) {
		switch {
		case strings.HasPrefix(w, "key="):
			more = append(more, w[4:])
		case w == "mode=shared":
			shared = true
		case strings.HasPrefix(w, "mode="):
		default:
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " ") + "\n", more, shared
}

// answerSet answers an acquire of several keys, or of a reader: granted
// at once when every key is free (a reader: free of writers), T at once
// otherwise; it never queues. The log has the request's set and mode.
func (f *fakeLockd) answerSet(req proto.Request, more []string, shared bool) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := fmt.Sprintf("%s %s %s", req.Op, req.Key, argsOf(req))
	for _, k := range more {
		line += " key=" + k
	}
	if shared {
		line += " mode=shared"
	}
	f.log = append(f.log, line)
	f.changed.Broadcast()
	keys := append([]string{req.Key}, more...)
	for _, k := range keys {
		if _, taken := f.held[k]; taken || f.busy[k] || (!shared && f.readersLocked(k) > 0) {
			return proto.AppendTimeout(nil, req.Key)
		}
	}
	b := []byte("A " + req.Key)
	for _, k := range keys {
		tok := f.next
		f.next++
		if shared {
			f.readers[tok] = k
		} else {
			f.held[k] = tok
		}
		b = append(b, ' ')
		b = strconv.AppendUint(b, tok, 10)
	}
	return append(b, '\n')
}

// readersLocked counts the readers of key.
func (f *fakeLockd) readersLocked(key string) int {
	n := 0
	for _, k := range f.readers {
		if k == key {
			n++
		}
	}
	return n
}
