package lockd_test

// Commands the scenario scripts add to testscript's language, for what a
// shell does badly: pick ports, wait for a condition instead of sleeping,
// speak the line protocol by hand like nc, and check exit codes and
// orderings. Every command is bounded in time and talks to 127.0.0.1 only.
//
//	freeport VAR...
//	    Set each VAR to 127.0.0.1:PORT, a port free at that moment and
//	    never handed out before in this test process.
//	waitport ADDR [TIMEOUT]
//	    Wait until a TCP connect to ADDR succeeds (default 10s).
//	waitanswer ADDR REQUEST REGEXP [TIMEOUT]
//	    Send REQUEST on a fresh connection to ADDR, read one answer, and
//	    repeat until the answer matches REGEXP (default 10s). Used to wait
//	    for a state, for example a queue of two waiters.
//	waitrole ADDR ROLE [TIMEOUT]
//	    waitanswer ADDR 'S -' ' role=ROLE( |$)': wait until the node at
//	    ADDR reports ROLE (active, standby, joining, handoff).
//	waitfile FILE REGEXP [TIMEOUT]
//	    Wait until FILE exists and its contents match REGEXP (in
//	    multi-line mode, like stdout), default 10s: for what a background
//	    job writes, such as a marker that it started.
//	wire open NAME ADDR
//	wire nc NAME ADDR               a plain TCP connection, as nc makes, whatever the environment says
//	wire send NAME WORD...          send the words joined by single spaces, then \n
//	wire sendcrlf NAME WORD...      the same, ending the line with \r\n as telnet does
//	wire sendpart NAME WORD...      the same, with no line ending: a line begun and not finished
//	wire sendn NAME COUNT WORD...   send the line COUNT times, in one write
//	wire expect NAME REGEXP [VAR] [TIMEOUT]
//	    Read the next line (default timeout 5s) and fail unless it matches
//	    REGEXP. VAR, if given, is set to the first capture group (or the
//	    whole match when REGEXP has no group).
//	wire expectn NAME COUNT REGEXP  the next COUNT lines all match REGEXP
//	wire silent NAME DURATION       no line arrives, and the connection stays open, for DURATION
//	wire eof NAME [TIMEOUT]         the server closes the connection (lines before the close are skipped)
//	wire close NAME                 close the connection from the client side
//	    A raw protocol connection, so a script shows the protocol literally.
//	    When the script's environment sets LOCKD_TLS_CA (and LOCKD_TLS_CERT,
//	    LOCKD_TLS_KEY) the connection speaks TLS, and when it sets
//	    LOCKD_SECRET_FILE it proves that secret first, as lockctl would;
//	    waitanswer, waitrole and burst connect the same way.
//	capture VAR REGEXP
//	    Set VAR from the most recent stdout: the first capture group of
//	    REGEXP (in multi-line mode, like stdout), or the whole match.
//	tokengt A B
//	    A and B are tokens (u64); A must be greater than B.
//	exitcode CODE PROG [ARG...]
//	    Run PROG like exec and fail unless it exits with CODE.
//	repeat VAR COUNT TEXT
//	    Set VAR to TEXT repeated COUNT times (long keys, over-long lines).
//	nointerleave FILE COUNT
//	    FILE holds exactly COUNT sections, each a "begin X" line directly
//	    followed by "end X": the jobs that wrote them never overlapped.
//	proxy start NAME LISTEN TARGET
//	    Forward every TCP connection made to LISTEN on to TARGET, from
//	    goroutines of the test process. A cluster script writes each node
//	    in --peers by its proxy's address (--advertise), so that all
//	    traffic to a node passes its proxy.
//	proxy stop NAME
//	    Close the proxy's listener and every connection it carries: the
//	    node behind it is cut off from everyone who reaches it through
//	    the proxy (a partition), while its own links to others still work.
//	    A later proxy start with the same LISTEN heals. Proxies still
//	    running stop when the script ends.
//	httpget URL [STATUS REGEXP [TIMEOUT]]
//	    GET URL over plain HTTP, as curl does, and print the answer's body
//	    on stdout, for stdout to check. With STATUS and REGEXP, repeat the
//	    GET until the answer has that status and its body matches REGEXP
//	    (in multi-line mode, like stdout), within TIMEOUT (default 10s).
//	    For lockd --metrics-listen: /metrics, /healthz, /readyz.
//	burst ADDR KEY N [VAR]
//	    On one connection, run N acquire/release cycles (A KEY-i 5 0, then
//	    R KEY-i TOKEN) as fast as the node answers, pipelined over the keys
//	    KEY-0 to KEY-63, and fail on any other answer (M, T, E). VAR, if
//	    given, is set to the largest token granted.
//
// TIMEOUT and DURATION are Go durations (300ms, 2s) or plain seconds (1.5).

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/lockd-io/lockd/proto/auth"
)

var scenarioCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"freeport":     cmdFreeport,
	"waitport":     cmdWaitport,
	"waitanswer":   cmdWaitanswer,
	"waitrole":     cmdWaitrole,
	"waitfile":     cmdWaitfile,
	"wire":         cmdWire,
	"capture":      cmdCapture,
	"tokengt":      cmdTokengt,
	"exitcode":     cmdExitcode,
	"repeat":       cmdRepeat,
	"nointerleave": cmdNointerleave,
	"proxy":        cmdProxy,
	"burst":        cmdBurst,
	"httpget":      cmdHttpget,
}

const (
	defaultWaitTimeout   = 10 * time.Second
	defaultExpectTimeout = 5 * time.Second
	pollEvery            = 25 * time.Millisecond
	dialTimeout          = time.Second
)

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseTimeout reads a Go duration ("300ms") or plain seconds ("1.5").
func parseTimeout(s string) (time.Duration, bool) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && f < 3600 {
		return time.Duration(f * float64(time.Second)), true
	}
	return 0, false
}

// optTimeout returns the optional TIMEOUT argument at args[i], or def.
func optTimeout(ts *testscript.TestScript, args []string, i int, def time.Duration) time.Duration {
	if len(args) <= i {
		return def
	}
	d, ok := parseTimeout(args[i])
	if !ok {
		ts.Fatalf("bad timeout %q: want a duration like 5s or 300ms", args[i])
	}
	return d
}

func noNeg(ts *testscript.TestScript, neg bool, name string) {
	if neg {
		ts.Fatalf("unsupported: ! %s", name)
	}
}

func compile(ts *testscript.TestScript, expr string) *regexp.Regexp {
	re, err := regexp.Compile(expr)
	if err != nil {
		ts.Fatalf("bad regexp %q: %v", expr, err)
	}
	return re
}

// firstGroup is what a capturing command stores: the first capture group
// of the match, or the whole match when the regexp has no group.
func firstGroup(m []string) string {
	if len(m) > 1 {
		return m[1]
	}
	return m[0]
}

// Ports handed out by freeport in this process. Scripts run in parallel,
// and a port just released by one freeport call must not be handed to
// another script before the first one's lockd binds it.
var (
	portsMu   sync.Mutex
	portsUsed = make(map[int]bool)
)

func cmdFreeport(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "freeport")
	if len(args) == 0 {
		ts.Fatalf("usage: freeport VAR...")
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	// Every listener stays open until all ports are chosen, so that one
	// call never returns the same port twice.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, v := range args {
		if !varName.MatchString(v) {
			ts.Fatalf("freeport: %q is not a variable name", v)
		}
		for tries := 0; ; tries++ {
			if tries == 100 {
				ts.Fatalf("freeport: no free port found for %s", v)
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			ts.Check(err)
			held = append(held, l)
			port := l.Addr().(*net.TCPAddr).Port
			if portsUsed[port] {
				continue
			}
			portsUsed[port] = true
			addr := "127.0.0.1:" + strconv.Itoa(port)
			ts.Setenv(v, addr)
			ts.Logf("%s=%s", v, addr)
			break
		}
	}
}

func cmdWaitport(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "waitport")
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitport ADDR [TIMEOUT]")
	}
	addr := args[0]
	timeout := optTimeout(ts, args, 1, defaultWaitTimeout)
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, dialTimeout)
		if err == nil {
			c.Close()
			ts.Logf("%s accepts connections after %v", addr, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitport: %s not accepting connections after %v: %v", addr, timeout, err)
		}
		time.Sleep(pollEvery)
	}
}

// askOnce sends one request on a fresh connection and reads one answer.
func askOnce(env envFunc, addr, request string) (string, error) {
	c, r, err := dialScript(env, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(request + "\n")); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\n"), nil
}

func waitAnswer(ts *testscript.TestScript, addr, request string, re *regexp.Regexp, timeout time.Duration) {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		line, err := askOnce(ts.Getenv, addr, request)
		if err == nil && re.MatchString(line) {
			ts.Logf("%s answered %q after %v", addr, line, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			if err != nil {
				ts.Fatalf("%s: no answer to %q matching %q after %v; last error: %v", addr, request, re, timeout, err)
			}
			ts.Fatalf("%s: no answer to %q matching %q after %v; last answer: %q", addr, request, re, timeout, line)
		}
		time.Sleep(pollEvery)
	}
}

func cmdWaitanswer(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "waitanswer")
	if len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: waitanswer ADDR REQUEST REGEXP [TIMEOUT]")
	}
	waitAnswer(ts, args[0], args[1], compile(ts, args[2]), optTimeout(ts, args, 3, defaultWaitTimeout))
}

func cmdWaitrole(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "waitrole")
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: waitrole ADDR ROLE [TIMEOUT]")
	}
	re := compile(ts, " role="+regexp.QuoteMeta(args[1])+"( |$)")
	waitAnswer(ts, args[0], "S -", re, optTimeout(ts, args, 2, defaultWaitTimeout))
}

func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "waitfile")
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: waitfile FILE REGEXP [TIMEOUT]")
	}
	re := compile(ts, "(?m)"+args[1])
	timeout := optTimeout(ts, args, 2, defaultWaitTimeout)
	path := ts.MkAbs(args[0])
	start := time.Now()
	for {
		b, err := os.ReadFile(path)
		if err == nil && re.Match(b) {
			ts.Logf("%s matched %q after %v", args[0], args[1], time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > timeout {
			if err != nil {
				ts.Fatalf("waitfile: %s: %v after %v", args[0], err, timeout)
			}
			ts.Fatalf("waitfile: %s does not match %q after %v; it holds:\n%s", args[0], args[1], timeout, b)
		}
		time.Sleep(pollEvery)
	}
}

// envFunc reads a script's environment.
type envFunc func(string) string

// dialScript opens a protocol connection to addr the way the script's
// environment says lockctl would: with TLS when LOCKD_TLS_CA is set (and
// the client certificate of LOCKD_TLS_CERT), then proving the secret of
// LOCKD_SECRET_FILE. A script run plain sets neither and gets plain TCP,
// as nc would.
func dialScript(env envFunc, addr string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(dialTimeout))
	if ca := env("LOCKD_TLS_CA"); ca != "" {
		t, err := auth.LoadTLS(auth.TLSFiles{CA: ca, Cert: env("LOCKD_TLS_CERT"), Key: env("LOCKD_TLS_KEY")}, nil)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		tc := tls.Client(c, t.ClientConfig(addr))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, nil, err
		}
		c = tc
	}
	r := bufio.NewReaderSize(c, 64<<10)
	if path := env("LOCKD_SECRET_FILE"); path != "" {
		secret, _, err := auth.ReadSecretFile("secret-file", path)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		if _, err := auth.Authenticate(c, r, auth.Client, secret, addr, false); err != nil {
			c.Close()
			return nil, nil, err
		}
	}
	c.SetDeadline(time.Time{})
	return c, r, nil
}

// stateKey indexes a script's scriptState in testscript's Values.
type stateKey struct{}

// scriptState is what the commands of one script share: its open wire
// connections. Scripts run in parallel, each with its own state.
type scriptState struct {
	conns   map[string]*wireConn
	proxies map[string]*tcpProxy // made by the first proxy start
}

func (st *scriptState) closeAll() {
	for name, c := range st.conns {
		c.close()
		delete(st.conns, name)
	}
}

func stateOf(ts *testscript.TestScript) *scriptState {
	st, ok := ts.Value(stateKey{}).(*scriptState)
	if !ok {
		ts.Fatalf("scenario state missing: Setup did not run")
	}
	return st
}

// wireConn is one raw protocol connection. A goroutine reads lines into a
// channel, so that expect and silent can wait with a timeout without
// disturbing a half-read line.
type wireConn struct {
	conn  net.Conn
	br    *bufio.Reader
	lines chan string
	done  chan struct{} // closed when the reader stops; err says why
	quit  chan struct{} // closed by close, so the reader never blocks
	err   error
}

func dialWire(env envFunc, addr string) (*wireConn, error) {
	c, r, err := dialScript(env, addr)
	if err != nil {
		return nil, err
	}
	w := &wireConn{
		conn:  c,
		br:    r,
		lines: make(chan string, 1024),
		done:  make(chan struct{}),
		quit:  make(chan struct{}),
	}
	go w.read()
	return w, nil
}

func (w *wireConn) read() {
	defer close(w.done)
	for {
		line, err := w.br.ReadString('\n')
		if err != nil {
			if line != "" {
				err = fmt.Errorf("%w after a partial line %q", err, line)
			}
			w.err = err
			return
		}
		select {
		case w.lines <- strings.TrimSuffix(line, "\n"):
		case <-w.quit:
			w.err = net.ErrClosed
			return
		}
	}
}

var errNoLine = errors.New("no line")

// next returns the next line, errNoLine when none arrives within timeout,
// or the reason the connection ended.
func (w *wireConn) next(timeout time.Duration) (string, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case line := <-w.lines:
		return line, nil
	case <-w.done:
		// Lines read before the end come first.
		select {
		case line := <-w.lines:
			return line, nil
		default:
		}
		if w.err == nil || errors.Is(w.err, net.ErrClosed) {
			return "", errors.New("connection closed")
		}
		return "", w.err
	case <-timer.C:
		return "", errNoLine
	}
}

func (w *wireConn) close() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	w.conn.Close()
	<-w.done
}

func cmdWire(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "wire")
	if len(args) < 2 {
		ts.Fatalf("usage: wire open|send|sendcrlf|expect|silent|eof|close NAME ...")
	}
	st := stateOf(ts)
	verb, name, rest := args[0], args[1], args[2:]
	if verb == "open" || verb == "nc" {
		if len(rest) != 1 {
			ts.Fatalf("usage: wire %s NAME ADDR", verb)
		}
		if st.conns[name] != nil {
			ts.Fatalf("wire: %s is already open", name)
		}
		env := ts.Getenv
		if verb == "nc" {
			env = func(string) string { return "" }
		}
		w, err := dialWire(env, rest[0])
		if err != nil {
			ts.Fatalf("wire open %s: %v", name, err)
		}
		st.conns[name] = w
		ts.Logf("[%s] connected to %s from %s", name, rest[0], w.conn.LocalAddr())
		return
	}
	w := st.conns[name]
	if w == nil {
		ts.Fatalf("wire %s: no open connection named %q", verb, name)
	}
	switch verb {
	case "send", "sendcrlf", "sendpart":
		line := strings.Join(rest, " ")
		eol, shown := "\n", ""
		switch verb {
		case "sendcrlf":
			eol, shown = "\r\n", ` (ends in \r\n)`
		case "sendpart":
			eol, shown = "", " (no line ending)"
		}
		w.conn.SetWriteDeadline(time.Now().Add(defaultExpectTimeout))
		if _, err := w.conn.Write([]byte(line + eol)); err != nil {
			ts.Fatalf("wire %s %s: %v", verb, name, err)
		}
		ts.Logf("[%s] > %s%s", name, clip(line), shown)

	case "sendn":
		if len(rest) < 2 {
			ts.Fatalf("usage: wire sendn NAME COUNT WORD...")
		}
		count, err := strconv.Atoi(rest[0])
		if err != nil || count < 1 || count > 1_000_000 {
			ts.Fatalf("wire sendn: bad count %q", rest[0])
		}
		line := strings.Join(rest[1:], " ") + "\n"
		w.conn.SetWriteDeadline(time.Now().Add(defaultExpectTimeout))
		if _, err := w.conn.Write([]byte(strings.Repeat(line, count))); err != nil {
			ts.Fatalf("wire sendn %s: %v", name, err)
		}
		ts.Logf("[%s] > %s (%d times)", name, clip(strings.TrimSuffix(line, "\n")), count)

	case "expectn":
		if len(rest) != 2 {
			ts.Fatalf("usage: wire expectn NAME COUNT REGEXP")
		}
		count, err := strconv.Atoi(rest[0])
		if err != nil || count < 1 || count > 1_000_000 {
			ts.Fatalf("wire expectn: bad count %q", rest[0])
		}
		re := compile(ts, rest[1])
		for i := 0; i < count; i++ {
			line, err := w.next(defaultExpectTimeout)
			if err != nil {
				ts.Fatalf("wire expectn %s: line %d of %d: %v, want one matching %q", name, i+1, count, err, rest[1])
			}
			if !re.MatchString(line) {
				ts.Fatalf("wire expectn %s: line %d of %d is %q, want one matching %q", name, i+1, count, line, rest[1])
			}
		}
		ts.Logf("[%s] < %d lines matching %q", name, count, rest[1])

	case "expect":
		if len(rest) < 1 || len(rest) > 3 {
			ts.Fatalf("usage: wire expect NAME REGEXP [VAR] [TIMEOUT]")
		}
		re := compile(ts, rest[0])
		timeout := defaultExpectTimeout
		var capVar string
		for _, a := range rest[1:] {
			if d, ok := parseTimeout(a); ok {
				timeout = d
			} else if varName.MatchString(a) {
				capVar = a
			} else {
				ts.Fatalf("wire expect: %q is neither a variable name nor a timeout", a)
			}
		}
		line, err := w.next(timeout)
		if err == errNoLine {
			ts.Fatalf("wire expect %s: no line within %v, want one matching %q", name, timeout, rest[0])
		}
		if err != nil {
			ts.Fatalf("wire expect %s: %v, want a line matching %q", name, err, rest[0])
		}
		ts.Logf("[%s] < %s", name, clip(line))
		m := re.FindStringSubmatch(line)
		if m == nil {
			ts.Fatalf("wire expect %s: got %q, want a line matching %q", name, line, rest[0])
		}
		if capVar != "" {
			ts.Setenv(capVar, firstGroup(m))
			ts.Logf("%s=%s", capVar, firstGroup(m))
		}

	case "silent":
		if len(rest) != 1 {
			ts.Fatalf("usage: wire silent NAME DURATION")
		}
		d, ok := parseTimeout(rest[0])
		if !ok {
			ts.Fatalf("wire silent: bad duration %q", rest[0])
		}
		line, err := w.next(d)
		switch {
		case err == errNoLine:
			ts.Logf("[%s] silent for %v", name, d)
		case err != nil:
			ts.Fatalf("wire silent %s: connection ended: %v", name, err)
		default:
			ts.Fatalf("wire silent %s: got %q within %v, want no line", name, line, d)
		}

	case "eof":
		if len(rest) > 1 {
			ts.Fatalf("usage: wire eof NAME [TIMEOUT]")
		}
		timeout := optTimeout(ts, rest, 0, defaultExpectTimeout)
		deadline := time.Now().Add(timeout)
		for {
			line, err := w.next(time.Until(deadline))
			if err == errNoLine {
				ts.Fatalf("wire eof %s: still open after %v", name, timeout)
			}
			if err != nil {
				ts.Logf("[%s] closed by the server: %v", name, err)
				break
			}
			ts.Logf("[%s] < %s (before the close)", name, clip(line))
		}
		w.close()
		delete(st.conns, name)

	case "close":
		if len(rest) != 0 {
			ts.Fatalf("usage: wire close NAME")
		}
		w.close()
		delete(st.conns, name)
		ts.Logf("[%s] closed", name)

	default:
		ts.Fatalf("wire: unknown verb %q (open, send, sendcrlf, expect, silent, eof, close)", verb)
	}
}

// clip keeps the log readable when a script sends a deliberately huge line.
func clip(s string) string {
	const max = 120
	if len(s) > max {
		return fmt.Sprintf("%s... (%d bytes)", s[:max], len(s))
	}
	return s
}

func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "capture")
	if len(args) != 2 || !varName.MatchString(args[0]) {
		ts.Fatalf("usage: capture VAR REGEXP")
	}
	// Multi-line mode, as testscript's own stdout command matches.
	re := compile(ts, "(?m)"+args[1])
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if m == nil {
		ts.Fatalf("capture: no match for %q in stdout", args[1])
	}
	ts.Setenv(args[0], firstGroup(m))
	ts.Logf("%s=%s", args[0], firstGroup(m))
}

func cmdTokengt(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: tokengt A B")
	}
	var tok [2]uint64
	for i, a := range args {
		v, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			ts.Fatalf("tokengt: %q is not a token (u64): %v", a, err)
		}
		tok[i] = v
	}
	if gt := tok[0] > tok[1]; gt == neg {
		if neg {
			ts.Fatalf("token %d is greater than %d", tok[0], tok[1])
		}
		ts.Fatalf("token %d is not greater than %d", tok[0], tok[1])
	}
}

func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "exitcode")
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode CODE PROG [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil || want < 0 || want > 255 {
		ts.Fatalf("exitcode: bad code %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() < 0 {
			ts.Fatalf("exitcode: %s did not exit normally: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with code %d, want %d", args[1], got, want)
	}
	ts.Logf("[exit code %d]", got)
}

func cmdRepeat(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "repeat")
	if len(args) != 3 || !varName.MatchString(args[0]) {
		ts.Fatalf("usage: repeat VAR COUNT TEXT")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n*len(args[2]) > 1<<20 {
		ts.Fatalf("repeat: bad count %q", args[1])
	}
	ts.Setenv(args[0], strings.Repeat(args[2], n))
}

func cmdNointerleave(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "nointerleave")
	if len(args) != 2 {
		ts.Fatalf("usage: nointerleave FILE COUNT")
	}
	want, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("nointerleave: bad count %q", args[1])
	}
	lines := strings.Split(strings.TrimSuffix(ts.ReadFile(args[0]), "\n"), "\n")
	if len(lines) != 2*want {
		ts.Fatalf("%s has %d lines, want %d (a begin and an end for each of %d jobs)", args[0], len(lines), 2*want, want)
	}
	seen := make(map[string]bool)
	for i := 0; i < len(lines); i += 2 {
		id, ok := strings.CutPrefix(lines[i], "begin ")
		if !ok || id == "" {
			ts.Fatalf("%s line %d: got %q, want begin ID", args[0], i+1, lines[i])
		}
		if lines[i+1] != "end "+id {
			ts.Fatalf("%s line %d: got %q after %q, want \"end %s\": jobs overlapped", args[0], i+2, lines[i+1], lines[i], id)
		}
		if seen[id] {
			ts.Fatalf("%s: job %s ran twice", args[0], id)
		}
		seen[id] = true
	}
}

// tcpProxy forwards the connections made to its listener on to a target,
// so that a script can cut a node off (stop) and reconnect it (start
// again) without touching the node.
type tcpProxy struct {
	listen, target string
	ln             net.Listener
	wg             sync.WaitGroup // the accept loop and every forwarded pair

	mu      sync.Mutex
	conns   map[net.Conn]struct{} // both ends of every forwarded pair
	stopped bool
}

// proxyListenFor bounds how long proxy start retries a busy LISTEN: a
// connection of the proxy it replaces, or a dial that the kernel gave
// LISTEN as its own port while nothing listened there, may hold it for
// a moment.
const proxyListenFor = 3 * time.Second

func startProxy(listen, target string) (*tcpProxy, error) {
	deadline := time.Now().Add(proxyListenFor)
	for {
		ln, err := net.Listen("tcp", listen)
		if err == nil {
			p := &tcpProxy{listen: listen, target: target, ln: ln, conns: make(map[net.Conn]struct{})}
			p.wg.Add(1)
			go p.acceptLoop()
			return p, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(pollEvery)
	}
}

func (p *tcpProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.isStopped() {
				return
			}
			time.Sleep(pollEvery)
			continue
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward dials the target for the accepted connection down and copies
// both ways until either side ends, then ends both, as a cut cable would.
func (p *tcpProxy) forward(down net.Conn) {
	defer p.wg.Done()
	defer p.untrack(down)
	up, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, down); done <- struct{}{} }()
	go func() { io.Copy(down, up); done <- struct{}{} }()
	<-done
	down.Close()
	up.Close()
	<-done
}

// track registers c so that stop can cut it; once stopped, it closes c
// and reports false.
func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *tcpProxy) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// stop closes the listener and every connection the proxy carries, waits
// for its goroutines, and returns how many forwarded pairs it cut. It is
// safe to call twice.
func (p *tcpProxy) stop() int {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return 0
	}
	p.stopped = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
	return len(conns) / 2
}

func cmdProxy(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "proxy")
	if len(args) < 2 {
		ts.Fatalf("usage: proxy start NAME LISTEN TARGET | proxy stop NAME")
	}
	st := stateOf(ts)
	verb, name := args[0], args[1]
	switch verb {
	case "start":
		if len(args) != 4 {
			ts.Fatalf("usage: proxy start NAME LISTEN TARGET")
		}
		if p := st.proxies[name]; p != nil && !p.isStopped() {
			ts.Fatalf("proxy %s is already running (%s -> %s)", name, p.listen, p.target)
		}
		p, err := startProxy(args[2], args[3])
		if err != nil {
			ts.Fatalf("proxy start %s: %v", name, err)
		}
		if st.proxies == nil {
			st.proxies = make(map[string]*tcpProxy)
		}
		st.proxies[name] = p
		ts.Defer(func() { p.stop() })
		ts.Logf("proxy %s: %s -> %s", name, p.listen, p.target)
	case "stop":
		if len(args) != 2 {
			ts.Fatalf("usage: proxy stop NAME")
		}
		p := st.proxies[name]
		if p == nil {
			ts.Fatalf("proxy stop: no proxy named %q", name)
		}
		if p.isStopped() {
			ts.Fatalf("proxy %s is already stopped", name)
		}
		cut := p.stop()
		ts.Logf("proxy %s stopped: %s closed, %d connections to %s cut", name, p.listen, cut, p.target)
	default:
		ts.Fatalf("proxy: unknown verb %q (start, stop)", verb)
	}
}

const (
	// burstKeys is how many keys a burst cycles through at once: enough
	// to keep the connection busy while each answer crosses the wire.
	burstKeys = 64
	// burstTimeout bounds a whole burst.
	burstTimeout = 20 * time.Second
)

func cmdBurst(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "burst")
	if len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: burst ADDR KEY N [VAR]")
	}
	addr, key := args[0], args[1]
	n, err := strconv.Atoi(args[2])
	if err != nil || n <= 0 || n > 10_000_000 {
		ts.Fatalf("burst: bad count %q", args[2])
	}
	capVar := ""
	if len(args) == 4 {
		if !varName.MatchString(args[3]) {
			ts.Fatalf("burst: %q is not a variable name", args[3])
		}
		capVar = args[3]
	}
	start := time.Now()
	maxTok, grants, err := runBurst(ts.Getenv, addr, key, n)
	took := time.Since(start)
	if err != nil {
		ts.Fatalf("burst on %s: %v (after %d grants in %v)", addr, err, grants, took.Round(time.Millisecond))
	}
	ts.Logf("burst: %d grants and releases on %s in %v (%.0f grants/s); largest token %d",
		grants, addr, took.Round(time.Millisecond), float64(grants)/took.Seconds(), maxTok)
	if capVar != "" {
		ts.Setenv(capVar, strconv.FormatUint(maxTok, 10))
	}
}

// runBurst is the burst command's loop. Every key has one request in
// flight at a time: its grant is answered with a release, and its release
// with the next acquire, so the requests of all the keys share each
// write and each read.
func runBurst(env envFunc, addr, key string, n int) (maxTok uint64, grants int, err error) {
	c, r, err := dialScript(env, addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(burstTimeout))
	w := bufio.NewWriterSize(c, 64<<10)
	keys := make(map[string]bool)
	sent := 0
	acquire := func(k string) {
		fmt.Fprintf(w, "A %s 5 0\n", k)
		sent++
	}
	for i := 0; i < min(n, burstKeys); i++ {
		k := key + "-" + strconv.Itoa(i)
		keys[k] = true
		acquire(k)
	}
	for released := 0; released < n; {
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return maxTok, grants, err
			}
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return maxTok, grants, err
		}
		line = strings.TrimSuffix(line, "\n")
		f := strings.Split(line, " ")
		if len(f) != 3 || !keys[f[1]] {
			return maxTok, grants, fmt.Errorf("unexpected answer %q", line)
		}
		switch {
		case f[0] == "A":
			tok, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil {
				return maxTok, grants, fmt.Errorf("unexpected answer %q", line)
			}
			if tok <= maxTok {
				return maxTok, grants, fmt.Errorf("token %d granted after token %d: tokens must increase", tok, maxTok)
			}
			maxTok = tok
			grants++
			fmt.Fprintf(w, "R %s %s\n", f[1], f[2])
		case f[0] == "R" && f[2] == "ok":
			released++
			if sent < n {
				acquire(f[1])
			}
		default:
			return maxTok, grants, fmt.Errorf("unexpected answer %q", line)
		}
	}
	return maxTok, grants, nil
}

func cmdHttpget(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "httpget")
	if len(args) != 1 && len(args) != 3 && len(args) != 4 {
		ts.Fatalf("usage: httpget URL [STATUS REGEXP [TIMEOUT]]")
	}
	u, err := url.Parse(args[0])
	if err != nil || u.Scheme != "http" {
		ts.Fatalf("httpget: %q is not an http:// URL", args[0])
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		ts.Fatalf("httpget: %s is not a loopback address: scenarios talk to this machine only", u.Host)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	get := func() (int, string, error) {
		resp, err := client.Get(u.String())
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return resp.StatusCode, string(body), err
	}
	if len(args) == 1 {
		code, body, err := get()
		if err != nil {
			ts.Fatalf("httpget: %v", err)
		}
		ts.Logf("%s: %d", u, code)
		fmt.Fprint(ts.Stdout(), body)
		return
	}
	want, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("httpget: status %q is not a number", args[1])
	}
	re := compile(ts, "(?m)"+args[2])
	timeout := optTimeout(ts, args, 3, defaultWaitTimeout)
	start := time.Now()
	for {
		code, body, err := get()
		if err == nil && code == want && re.MatchString(body) {
			ts.Logf("%s answered %d after %v", u, code, time.Since(start).Round(time.Millisecond))
			fmt.Fprint(ts.Stdout(), body)
			return
		}
		if time.Since(start) > timeout {
			if err != nil {
				ts.Fatalf("httpget: %s: no %d matching %q after %v; last error: %v", u, want, args[2], timeout, err)
			}
			ts.Logf("last answer: %d\n%s", code, body)
			ts.Fatalf("httpget: %s: no %d matching %q after %v; last answer: %d", u, want, args[2], timeout, code)
		}
		time.Sleep(pollEvery)
	}
}
