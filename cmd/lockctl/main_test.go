package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
	"github.com/lockd-io/lockd/proto/client/porttest"
)

// The test binary doubles as lockctl, for tests that must signal it (run
// with envRunMain=1), and as the command exec runs, for tests that need a
// command that behaves in a precise way (run with childArg MODE: exec
// passes its environment on, so the child is chosen by its arguments).
const (
	envRunMain = "LOCKCTL_TEST_MAIN"
	childArg   = "lockctl-test-child"
)

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == childArg {
		child(os.Args[2])
		return
	}
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// child is a command for exec tests.
func child(mode string) {
	// A child waits on a signal nobody sends rather than on select {}: in
	// a binary without cgo (the tags of make build) the runtime takes a
	// process whose every goroutine blocks forever for a deadlock.
	never := make(chan os.Signal, 1)
	signal.Notify(never, syscall.SIGUSR2)
	switch mode {
	case "block":
		// Say when ready, then wait for a signal: SIGTERM and SIGINT end
		// the process by their default action.
		fmt.Println("ready")
		<-never
	case "ignore-term":
		// Only SIGKILL ends this one.
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		<-never
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	os.Exit(99)
}

// childCommand is the command line exec runs to get child(mode).
func childCommand(mode string) []string {
	return []string{os.Args[0], childArg, mode}
}

// startLockctl runs lockctl as a process of its own, for tests that
// signal it. Its stdout is returned as a reader to wait on its output; its
// stderr is read once it has exited.
func startLockctl(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, bufio.NewReader(out), &stderr
}

// exitStatus waits for cmd and returns its exit code.
func exitStatus(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

// lockctl runs lockctl in this process and returns its exit code, stdout
// and stderr.
func lockctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"lockctl"}, args...), strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// serveConns serves every connection ln accepts with handle, each on a
// goroutine of its own, closes ln when the test ends, and returns its
// address.
func serveConns(t *testing.T, ln net.Listener, handle func(net.Conn)) string {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// listenLocal listens on a free port of 127.0.0.1.
func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// closedAddr is an address nothing listens on, and nothing will until
// the test ends (porttest).
func closedAddr(t *testing.T) string {
	return porttest.Reserve(t).Addr
}

// unsetenv removes key for the test and restores it after.
func unsetenv(t *testing.T, key string) {
	t.Setenv(key, "")
	os.Unsetenv(key)
}

func TestUsageErrorsExit2(t *testing.T) {
	unsetenv(t, "LOCKD_ADDR")
	cases := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"acquire"}, "--key is required"},
		{[]string{"acquire", "--key", "a b"}, "space"},
		{[]string{"acquire", "--key", strings.Repeat("k", 256)}, "longer than 255"},
		{[]string{"acquire", "--key", "k", "--lease", "0s"}, "--lease 0s"},
		{[]string{"acquire", "--key", "k", "--lease", "500us"}, "at least 1ms"},
		{[]string{"acquire", "--key", "k", "--wait", "-1s"}, "--wait -1s"},
		{[]string{"acquire", "--key", "k", "--wait", "banana"}, `--wait "banana": want a duration like 500ms, 30s or 2m, or seconds like 10 or 0.5`},
		{[]string{"acquire", "--key", "k", "-n", "--wait", "5s"}, "--nonblock and --wait 5s do not go together"},
		{[]string{"acquire", "--key", "k", "--lease", "banana"}, `--lease "banana": want a duration`},
		{[]string{"acquire", "--key", "k", "--nope"}, "unknown flag --nope"},
		{[]string{"acquire", "--key"}, "--key needs a value"},
		{[]string{"acquire", "--key", "k", "stray"}, `unexpected argument "stray"`},
		{[]string{"release", "--key", "k"}, "--token is required"},
		{[]string{"release", "--key", "k", "--token", "-1"}, "not an unsigned 64-bit integer"},
		{[]string{"renew", "--key", "k", "--token", "18446744073709551616"}, "larger than 2^64-1"},
		{[]string{"hold"}, "--key is required"},
		{[]string{"exec", "--key", "k"}, "no command to run"},
		{[]string{"exec", "--key", "k", "--timeout-code", "256", "--", "true"}, "-E/--timeout-code 256"},
		{[]string{"exec", "--key", "k", "--grace", "-1s", "--", "true"}, "--grace -1s"},
		{[]string{"bench", "--workers", "0"}, "--workers 0"},
		{[]string{"bench", "--mode", "fast"}, `--mode "fast"`},
		{[]string{"bench", "--keys", "lukewarm"}, `--keys "lukewarm"`},
		{[]string{"bench", "--mode", "per-worker", "--conns", "3"}, "--conns applies to --mode pipelined"},
		{[]string{"bench", "--duration", "0s"}, "--duration 0s"},
		{[]string{"--color", "sometimes", "acquire", "--key", "k"}, `--color "sometimes"`},
		{[]string{"--addr", "nocolon", "acquire", "--key", "k"}, `"nocolon" is not HOST:PORT`},
		{[]string{"--addr", " , ", "acquire", "--key", "k"}, "--addr (or LOCKD_ADDR) is empty"},
		{[]string{"frobnicate"}, `no command named "frobnicate"`},
		{[]string{"help", "frobnicate"}, `no command named "frobnicate"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := lockctl(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q does not mention %q", stderr, tc.want)
			}
			if !strings.HasPrefix(stderr, "lockctl: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--help`") {
				t.Errorf("want one line \"lockctl: ...; see `lockctl ... --help`\", got %q", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout should be empty on a usage error, got %q", stdout)
			}
		})
	}
}

func TestHelpListsExitCodes(t *testing.T) {
	for _, cmd := range []string{"acquire", "release", "renew", "hold", "exec", "bench"} {
		code, stdout, _ := lockctl(t, cmd, "--help")
		if code != 0 {
			t.Errorf("%s --help: exit %d", cmd, code)
		}
		for _, want := range []string{"EXIT CODES:", "Examples:", "lockctl " + cmd} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s --help lacks %q", cmd, want)
			}
		}
	}
	code, stdout, _ := lockctl(t, "--help")
	if code != 0 || !strings.Contains(stdout, "EXIT CODES:") || !strings.Contains(stdout, "LOCKD_ADDR") {
		t.Errorf("lockctl --help: exit %d, output %q", code, stdout)
	}
	// Exit 3 is also -n's (a lock held, not waited for), not --wait's only.
	for _, cmd := range []string{"", "acquire", "hold"} {
		args := []string{"--help"}
		if cmd != "" {
			args = []string{cmd, "--help"}
		}
		_, stdout, _ := lockctl(t, args...)
		if !strings.Contains(stdout, "3      the lock was held: -n/--nonblock, or --wait elapsed") {
			t.Errorf("lockctl %s --help: exit 3 does not say -n:\n%s", cmd, stdout)
		}
	}
}

func TestClientErrorsMapToExitCodes(t *testing.T) {
	g := &globals{AddrList: "127.0.0.1:7070"}
	intr, cancel := context.WithCancelCause(context.Background())
	cancel(interrupted{syscall.SIGINT})
	term, cancel2 := context.WithCancelCause(context.Background())
	cancel2(interrupted{syscall.SIGTERM})
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		code int
		want string
	}{
		{"timeout", context.Background(), fmt.Errorf("acquire k: %w", client.ErrTimeout), exitTimeout, "timed out"},
		{"unavailable", context.Background(), fmt.Errorf("%w: %w", client.ErrUnavailable, refused), exitUnavailable,
			"cannot reach lockd at 127.0.0.1:7070 (connection refused); start it with `lockd` or point --addr/LOCKD_ADDR at a running node"},
		{"notheld", context.Background(), fmt.Errorf("release k: %w", client.ErrNotHeld), exitFailed, "does not hold"},
		{"refused", context.Background(), &client.ServerError{Op: proto.OpAcquire, Key: "k", Msg: "lease above the limit"}, exitFailed, "lease above the limit"},
		{"queue full", context.Background(), &client.ServerError{Op: proto.OpAcquire, Key: "k", Msg: "queue full: the node's limit of 1 waiter per key is reached; retry later"}, exitFailed,
			"lockd refused acquiring \"k\": queue full: the node's limit of 1 waiter per key is reached; retry later; to raise the limit, start lockd with a higher --max-waiters (or LOCKD_MAX_WAITERS)"},
		{"too many waiters", context.Background(), &client.ServerError{Op: proto.OpAcquire, Key: "k", Msg: "too many waiters: the node's limit of 2 waiters over all keys is reached; retry later"}, exitFailed,
			"; to raise the limit, start lockd with a higher --max-total-waiters (or LOCKD_MAX_TOTAL_WAITERS)"},
		{"too many keys", context.Background(), &client.ServerError{Op: proto.OpAcquire, Key: "k", Msg: "too many keys: the node's limit of 2 keys held or waited on at once is reached; release some first"}, exitFailed,
			"release some first; to raise the limit, start lockd with a higher --max-keys (or LOCKD_MAX_KEYS)"},
		{"lease range", context.Background(), &client.ServerError{Op: proto.OpAcquire, Key: "k", Msg: "lease out of range: lease must be more than 0 and at most 86400 seconds (the node's longest lease)"}, exitFailed,
			"(the node's longest lease); ask for a shorter --lease, or start lockd with a longer --max-lease (or LOCKD_MAX_LEASE)"},
		{"wait range", context.Background(), &client.ServerError{Op: proto.OpAcquire, Key: "k", Msg: "wait out of range: wait must be 0 (forever) or at most 86400 seconds (the node's longest wait)"}, exitFailed,
			"; wait less (--wait), or start lockd with a longer --max-wait (or LOCKD_MAX_WAIT)"},
		{"admin role", context.Background(), &client.ServerError{Op: proto.OpHandoff, Key: "-", Msg: "this needs the admin role: authenticate with the admin secret or an admin certificate"}, exitFailed,
			"pass the node's --admin-secret-file with --secret-file"},
		{"sigint", intr, context.Canceled, 130, "interrupted by SIGINT"},
		{"sigterm", term, context.Canceled, 143, "interrupted by SIGTERM"},
		{"other", context.Background(), errors.New("boom"), exitFailed, "boom"},
		{"invalid", context.Background(), fmt.Errorf("acquire-all a+b: the request line would be 4216 bytes: %w", client.ErrInvalidArgument), exitUsage,
			`acquiring "k" refused before sending: acquire-all a+b: the request line would be 4216 bytes`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := clientFailure(tc.ctx, g, `acquiring "k"`, tc.err)
			if got := exitCode(err); got != tc.code {
				t.Errorf("exit code %d, want %d", got, tc.code)
			}
			var stderr bytes.Buffer
			if got := reportError(&stderr, err); got != tc.code {
				t.Errorf("reportError returned %d, want %d", got, tc.code)
			}
			if !strings.Contains(stderr.String(), tc.want) || !strings.HasPrefix(stderr.String(), "lockctl: ") {
				t.Errorf("message %q does not say %q", stderr.String(), tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("the cause is lost: %v", err)
			}
		})
	}
	if exitCode(nil) != exitOK || exitCode(errors.New("x")) != exitFailed || exitCode(silentExit(42)) != 42 {
		t.Error("exitCode of nil, a plain error or silentExit(42) is wrong")
	}
	var stderr bytes.Buffer
	if reportError(&stderr, silentExit(7)) != 7 || stderr.Len() != 0 {
		t.Errorf("silentExit must print nothing, printed %q", stderr.String())
	}
}

func TestUnreachableExit4(t *testing.T) {
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"acquire", "--key", "k"},
		{"release", "--key", "k", "--token", "1"},
		{"renew", "--key", "k", "--token", "1"},
		{"hold", "--key", "k"},
		{"exec", "--key", "k", "--", "true"},
		{"bench", "--duration", "1s"},
	} {
		// Not parallel: urfave/cli shares its help flag between apps.
		// release takes the client's 5 seconds of re-sending.
		t.Run(args[0], func(t *testing.T) {
			code, _, stderr := lockctl(t, append([]string{"--addr", addr}, args...)...)
			if code != exitUnavailable {
				t.Errorf("exit %d, want %d; stderr %q", code, exitUnavailable, stderr)
			}
			want := "lockctl: cannot reach lockd at " + addr + " ("
			if !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "LOCKD_ADDR") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr %q, want one line starting %q", stderr, want)
			}
		})
	}
}

func TestGlobalFlagsBeforeOrAfterCommand(t *testing.T) {
	f := startFake(t)
	bad := closedAddr(t)

	t.Setenv("LOCKD_ADDR", f.addr)
	if code, out, errOut := lockctl(t, "acquire", "--key", "env"); code != 0 || out == "" {
		t.Fatalf("LOCKD_ADDR: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv("LOCKD_ADDR", bad)
	if code, _, errOut := lockctl(t, "--addr", f.addr, "acquire", "--key", "flag-beats-env"); code != 0 {
		t.Fatalf("--addr must win over LOCKD_ADDR: exit %d, %q", code, errOut)
	}
	if code, _, errOut := lockctl(t, "--addr", bad, "acquire", "--key", "after-wins", "--addr", f.addr); code != 0 {
		t.Fatalf("--addr after the command must win: exit %d, %q", code, errOut)
	}
	code, out, _ := lockctl(t, "acquire", "--addr", f.addr, "--key", "json-after", "--json")
	if code != 0 || !strings.HasPrefix(out, `{"key":"json-after"`) {
		t.Fatalf("--json after the command: exit %d, %q", code, out)
	}
}

// --addr and LOCKD_ADDR take a bare port as 127.0.0.1, as lockd --listen
// does: the port given to make run or lockd works as it is.
func TestAddrTakesABarePort(t *testing.T) {
	for in, want := range map[string]string{
		"7171": "127.0.0.1:7171", " 7171 ": "127.0.0.1:7171", ":7171": ":7171",
		"10.0.0.1:7070": "10.0.0.1:7070", "[::1]:7070": "[::1]:7070", "localhost:7070": "localhost:7070",
		"nocolon": "nocolon", "70799": "70799", "": "",
	} {
		if got := nodeAddr(in); got != want {
			t.Errorf("nodeAddr(%q) = %q, want %q", in, got, want)
		}
	}
	f := startFake(t)
	_, port, _ := net.SplitHostPort(f.addr)
	if code, out, errOut := lockctl(t, "--addr", port, "acquire", "--key", "flag"); code != 0 || out == "" {
		t.Fatalf("--addr %s: exit %d, %q %q", port, code, out, errOut)
	}
	t.Setenv("LOCKD_ADDR", closedAddr(t)+", "+port)
	if code, out, errOut := lockctl(t, "acquire", "--key", "env"); code != 0 || out == "" {
		t.Fatalf("LOCKD_ADDR with a bare port: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := lockctl(t, "--addr", "70799", "acquire", "--key", "k"); code != exitUsage || !strings.Contains(errOut, `"70799" is not HOST:PORT (or a bare PORT)`) {
		t.Fatalf("--addr 70799: exit %d, %q", code, errOut)
	}
}

// With --json (or -o json) a failure is JSON on
// stdout too, with the exit code, the message and the hint; the line on
// stderr stays.
func TestErrorsAreJSONWithJSON(t *testing.T) {
	dead := closedAddr(t)
	for _, args := range [][]string{
		{"--json", "--addr", dead, "acquire", "--key", "k"},
		{"--addr", dead, "-o", "json", "status"},
		{"--addr", dead, "release", "--key", "k", "--token", "1", "--output=json"},
		{"--json", "acquire", "--key", "k", "--lease", "banana"},
		{"--json", "frobnicate"},
	} {
		code, out, errOut := lockctl(t, args...)
		var got errorJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil || strings.Count(out, "\n") != 1 {
			t.Errorf("%v: stdout %q is not one JSON object: %v", args, out, err)
			continue
		}
		if got.Error.ExitCode != code || code == 0 || got.Error.Message == "" || got.Error.Hint == "" ||
			!strings.HasPrefix(errOut, "lockctl: "+got.Error.Message) {
			t.Errorf("%v: exit %d, JSON %+v, stderr %q", args, code, got, errOut)
		}
	}
	// Without JSON, stdout stays empty; after "--", --json is exec's
	// command's business.
	if _, out, _ := lockctl(t, "--addr", dead, "acquire", "--key", "k"); out != "" {
		t.Errorf("plain failure printed %q on stdout", out)
	}
	if _, out, _ := lockctl(t, "--addr", dead, "exec", "--key", "k", "--", "echo", "--json"); out != "" {
		t.Errorf("exec's own --json printed %q on stdout", out)
	}
}

// Lockctl --version and lockctl version.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		code, out, errOut := lockctl(t, args...)
		if code != 0 || !strings.HasPrefix(out, "lockctl dev (go") || strings.Count(out, "\n") != 1 || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	code, out, _ := lockctl(t, "--json", "version")
	if code != 0 || !strings.HasPrefix(out, `{"version":"dev","go":"go`) {
		t.Errorf("version --json: exit %d, %q", code, out)
	}
}

// A typo of a command or a flag gets a "did you
// mean", and a one-letter flag is echoed with one dash.
func TestDidYouMean(t *testing.T) {
	unsetenv(t, "LOCKD_ADDR")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"aquire", "--key", "k"}, `lockctl: no command named "aquire"; did you mean "acquire"?; see ` + "`lockctl --help`"},
		{[]string{"stauts"}, `did you mean "status"?`},
		{[]string{"help", "relase"}, `did you mean "release"?`},
		{[]string{"acquire", "--kye", "k"}, "lockctl: unknown flag --kye; did you mean --key?; see `lockctl acquire --help`"},
		{[]string{"queues", "--no-header"}, "unknown flag --no-header; did you mean --no-headers?"},
		{[]string{"--adr", "x:1", "status"}, "unknown flag --adr; did you mean --addr?"},
		{[]string{"acquire", "-k", "k"}, "lockctl: unknown flag -k; see `lockctl acquire --help`"},
		{[]string{"acquire", "--key"}, "lockctl: --key needs a value"},
		{[]string{"exec", "-E"}, "lockctl: -E needs a value"},
		{[]string{"frobnicate"}, `lockctl: no command named "frobnicate"; see`},
	} {
		code, _, errOut := lockctl(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// globalName knows every alias of a global flag, so that given finds a
// flag by any of its names.
func TestGlobalAliases(t *testing.T) {
	for _, f := range globalFlags(true) {
		names := f.Names()
		for _, alias := range names[1:] {
			if got := globalName(alias); got != names[0] {
				t.Errorf("globalName(%q) = %q, want %q: add the alias to globalName", alias, got, names[0])
			}
		}
	}
}

// A command's help lists its own flags, not the global ones: those are
// the same for every command, named in one line that points to the page
// that lists them, lockctl help flags (also in lockctl --help). Every way
// of asking for a command's help shows the same.
func TestCommandHelpLeavesGlobalFlagsToTheirPage(t *testing.T) {
	for _, args := range [][]string{
		{"exec", "--help"}, {"exec", "-h"}, {"exec", "--help=true"}, {"help", "exec"}, {"h", "exec"},
		{"--addr", "127.0.0.1:1", "exec", "--key", "k", "--help"}, {"--json", "help", "exec"},
	} {
		code, stdout, stderr := lockctl(t, args...)
		if code != 0 || !strings.Contains(stdout, "\n   --key KEY ") || !strings.Contains(stdout, "see lockctl help flags\n") {
			t.Errorf("lockctl %q: exit %d, no --key or no pointer to lockctl help flags:\n%s%s", args, code, stdout, stderr)
		}
		for _, global := range []string{"--addr NODES", "--tls-ca FILE", "--secret-file FILE", "--failure-timeout DURATION"} {
			if strings.Contains(stdout, global) {
				t.Errorf("lockctl %q lists the global flag %s:\n%s", args, global, stdout)
			}
		}
	}
	for _, cmd := range commands() {
		_, stdout, _ := lockctl(t, cmd.Name, "--help")
		if n := strings.Count(stdout, "\n"); n > 120 {
			t.Errorf("lockctl %s --help is %d lines", cmd.Name, n)
		}
	}
	for _, args := range [][]string{{"help", "flags"}, {"flags"}, {"--help"}} {
		code, stdout, stderr := lockctl(t, args...)
		if code != 0 {
			t.Errorf("lockctl %q: exit %d\n%s", args, code, stderr)
		}
		for _, f := range globalFlags(true) {
			if !strings.Contains(stdout, "\n   --"+f.Names()[0]+" ") {
				t.Errorf("lockctl %q does not list --%s:\n%s", args, f.Names()[0], stdout)
			}
		}
	}
}

// The help texts are written to fit 80 columns as they are printed
// (three columns in): a line of prose or an example that did not would be
// wrapped, its last words alone on a line before the next one, and a
// shell command cut without its backslash. Only list items (an exit code,
// a field, its text after two spaces) may run longer: they wrap hanging
// under their text.
func TestHelpTextsFitEightyColumns(t *testing.T) {
	app, _ := newApp(nil, nil, nil)
	texts := map[string]string{"lockctl": app.Description + "\n" + app.UsageText}
	for _, c := range commands() {
		texts[c.Name] = c.Description + "\n" + c.UsageText
		// lockctl --help lists it as "   NAME        USAGE".
		if w := 3 + len("completion") + 2 + textWidth(c.Usage); w > 80 {
			t.Errorf("lockctl --help lists %s in %d columns: shorten its Usage %q", c.Name, w, c.Usage)
		}
	}
	for name, text := range texts {
		for _, l := range strings.Split(text, "\n") {
			if textWidth(l)+3 > 80 && hangingIndent("   "+l, 80) == 3+len(l)-len(strings.TrimLeft(l, " ")) {
				t.Errorf("%s --help: a line of %d columns as printed:\n%s", name, textWidth(l)+3, l)
			}
		}
	}
}

// Help is wrapped at spaces to 80 columns when it is not printed on a
// terminal (to the terminal's width when it is), so that no word is
// broken where a terminal would wrap the line: every page, every line.
func TestHelpFitsEightyColumns(t *testing.T) {
	t.Setenv("COLUMNS", "")
	pages := [][]string{{"--help"}, {"help", "flags"}}
	for _, cmd := range commands() {
		pages = append(pages, []string{cmd.Name, "--help"})
	}
	for _, args := range pages {
		_, stdout, _ := lockctl(t, args...)
		for _, l := range strings.Split(stdout, "\n") {
			if w := textWidth(l); w > 80 {
				t.Errorf("lockctl %s: a line of %d columns:\n%s", strings.Join(args, " "), w, l)
			}
		}
	}
}

func TestMayShowHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"lockctl"}, false},
		{nil, false},
		{[]string{"lockctl", "exec", "--key", "k", "--", "sh", "-c", "x --help"}, false},
		{[]string{"lockctl", "--addr", "h:1", "acquire", "--key", "hh"}, false},
		{[]string{"lockctl", "exec", "--help"}, true},
		{[]string{"lockctl", "exec", "-h"}, true},
		{[]string{"lockctl", "exec", "--help=true"}, true},
		{[]string{"lockctl", "help", "exec"}, true},
		{[]string{"lockctl", "h", "exec"}, true},
	} {
		if got := mayShowHelp(tc.args); got != tc.want {
			t.Errorf("mayShowHelp(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// A run that builds only the command it names gives it the global flags
// when a flag after its name is not its own: a global flag, or a typo
// whose "did you mean" must see the global flags too.
func TestGlobalFlagsAfterTheCommand(t *testing.T) {
	exec := new(execCommand).Command()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"lockctl", "exec", "--key", "k", "--", "true"}, false},
		{[]string{"lockctl", "--json", "exec", "--key", "k", "--", "true"}, false},
		{[]string{"lockctl", "exec", "--key", "k", "--json", "--", "true"}, true},
		{[]string{"lockctl", "exec", "--key=k", "-o", "json", "--", "true"}, true},
		{[]string{"lockctl", "exec", "--jsn", "--key", "k"}, true},
		{[]string{"lockctl", "exec", "--key", "k", "--", "sh", "-c", "lockctl --json status"}, false},
	} {
		if got := flagsBeyond(tc.args, exec); got != tc.want {
			t.Errorf("flagsBeyond(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
	if code, _, stderr := lockctl(t, "exec", "--jsn", "--key", "k", "--", "true"); code != exitUsage || !strings.Contains(stderr, "did you mean --json?") {
		t.Errorf("a typo of a global flag after the command: exit %d, %q", code, stderr)
	}
}
