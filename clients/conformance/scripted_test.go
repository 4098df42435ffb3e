package conformance

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client/porttest"
)

// scripted is a TCP server speaking lockd's line protocol as each case
// scripts it, recording every line a client sends. It shows what a real
// node cannot: answers out of order, a connection dropped under a
// request, silence, how many connections a client keeps.
//
// It answers every S (the keep-alive and hello of the clients) itself,
// as an active node; every other line goes to the case, on lines.
type scripted struct {
	t    *testing.T
	ln   net.Listener
	addr string

	mu      sync.Mutex
	conns   []*sconn
	accepts []time.Time
	changed chan struct{} // closed and replaced on every accept, close and line
	recv    []line
	// onAccept, when set, decides what a new connection does: return
	// false to close it at once, before it is answered anything.
	onAccept func(n int) bool
	// silent makes the node read and answer nothing more, S included,
	// keeping its connections open: a frozen process.
	silent bool
	// auto, when set, answers a line at once; it returns "" to leave the
	// line to the case.
	auto func(l line) string
}

// line is one request a client sent.
type line struct {
	conn *sconn
	at   time.Time
	text string
	op   string
	key  string
	args []string
}

// arg returns the value of name=VALUE among the line's words.
func (l line) arg(name string) string {
	for _, a := range l.args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// ref is the suffix that echoes the line's ref= (proto/doc.go, Pipelining and matching answers), "" when none.
func (l line) ref() string {
	if r := l.arg("ref"); r != "" {
		return " ref=" + r
	}
	return ""
}

// sconn is one accepted connection.
type sconn struct {
	s      *scripted
	n      int
	c      net.Conn
	wmu    sync.Mutex
	closed bool
	// answeredS counts the S requests answered on it: a client counts a
	// connection up once its first S is answered.
	answeredS int
}

func startScripted(t *testing.T) *scripted {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scripted{t: t, ln: ln, addr: ln.Addr().String(), changed: make(chan struct{})}
	go s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

// scriptedNotYet is a scripted node at a port reserved for it that does
// not listen until listen is called: a node not started yet.
func scriptedNotYet(t *testing.T) (s *scripted, listen func()) {
	t.Helper()
	port := porttest.Reserve(t)
	s = &scripted{t: t, addr: port.Addr, changed: make(chan struct{})}
	t.Cleanup(s.stop)
	return s, func() {
		ln := port.Listen()
		s.mu.Lock()
		s.ln = ln
		s.mu.Unlock()
		go s.serve(ln)
	}
}

func (s *scripted) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *scripted) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		sc := &sconn{s: s, n: len(s.conns), c: c}
		s.conns = append(s.conns, sc)
		s.accepts = append(s.accepts, time.Now())
		keep := s.onAccept == nil || s.onAccept(sc.n)
		s.notifyLocked()
		s.mu.Unlock()
		if !keep {
			sc.close()
			continue
		}
		go sc.read()
	}
}

func (s *scripted) stop() {
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
	}
	conns := s.conns
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

func (c *sconn) read() {
	r := bufio.NewReader(c.c)
	for {
		text, err := r.ReadString('\n')
		if err != nil {
			c.close()
			return
		}
		text = strings.TrimRight(text, "\r\n")
		f := strings.Fields(text)
		if len(f) < 2 {
			continue
		}
		s := c.s
		s.mu.Lock()
		if s.silent {
			s.mu.Unlock()
			continue
		}
		l := line{conn: c, at: time.Now(), text: text, op: f[0], key: f[1], args: f[2:]}
		if l.op == "S" {
			s.mu.Unlock()
			c.send("S " + l.key + " self=" + s.addr + " role=active active=" + s.addr + " token=0 seq=0 uptime=1 keys=0 waiters=0")
			s.mu.Lock()
			c.answeredS++
			s.notifyLocked()
			s.mu.Unlock()
			continue
		}
		s.recv = append(s.recv, l)
		auto := s.auto
		s.notifyLocked()
		s.mu.Unlock()
		if auto != nil {
			if a := auto(l); a != "" {
				c.send(a)
			}
		}
	}
}

func (c *sconn) send(text string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	c.c.Write([]byte(text + "\n"))
}

func (c *sconn) close() {
	c.s.mu.Lock()
	was := c.closed
	c.closed = true
	if !was {
		c.s.notifyLocked()
	}
	c.s.mu.Unlock()
	c.c.Close()
}

// set changes the node's script under its lock.
func (s *scripted) set(f func(s *scripted)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// waitFor waits up to limit until cond (called under the node's lock)
// holds, failing the case otherwise with what.
func (s *scripted) waitFor(limit time.Duration, what string, cond func(s *scripted) bool) {
	s.t.Helper()
	deadline := time.After(limit)
	for {
		s.mu.Lock()
		ok, ch := cond(s), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			s.t.Fatalf("scripted node %s: %s: not within %s; it got %v", s.addr, what, limit, s.lines())
		}
	}
}

// lines returns the text of every request received so far.
func (s *scripted) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.recv {
		out = append(out, l.text)
	}
	return out
}

// got returns the requests of op received so far ("" any op).
func (s *scripted) got(op string) []line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gotLocked(op)
}

func (s *scripted) gotLocked(op string) []line {
	var out []line
	for _, l := range s.recv {
		if op == "" || l.op == op {
			out = append(out, l)
		}
	}
	return out
}

// waitLines waits until n requests of op arrived and returns them.
func (s *scripted) waitLines(op string, n int, limit time.Duration) []line {
	s.t.Helper()
	s.waitFor(limit, "waiting for "+op+" requests", func(s *scripted) bool { return len(s.gotLocked(op)) >= n })
	return s.got(op)
}

// open returns the connections that are open now.
func (s *scripted) openConns() []*sconn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openLocked()
}

func (s *scripted) openLocked() []*sconn {
	var out []*sconn
	for _, c := range s.conns {
		if !c.closed {
			out = append(out, c)
		}
	}
	return out
}

// granting answers every acquire at once with a token of its own, every
// release and renew with ok: a node that serves.
func granting(tokens *uint64Counter) func(l line) string {
	return func(l line) string {
		switch l.op {
		case "A":
			return "A " + l.key + " " + tokens.next() + l.ref()
		case "R", "N":
			return l.op + " " + l.key + " ok"
		case "X":
			return "X " + l.key + " none"
		}
		return ""
	}
}

type uint64Counter struct {
	mu sync.Mutex
	n  uint64
}

func (c *uint64Counter) next() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return strconvU(1000 + c.n)
}

func strconvU(v uint64) string { return strconv.FormatUint(v, 10) }

// settle waits, up to a second, until every open connection had an S
// answered (a client that checks a connection before it uses it, as the
// Go client does, has it then), and a moment more for the client to read
// that answer: the client's connections are all up, as far as the node
// can tell.
func (s *scripted) settle() {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		all := true
		for _, c := range s.openLocked() {
			all = all && c.answeredS > 0
		}
		ch := s.changed
		s.mu.Unlock()
		if all {
			break
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
		}
	}
	time.Sleep(50 * time.Millisecond)
}
