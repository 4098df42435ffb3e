package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/lockd-io/lockd/proto/client"
)

// execCommand runs a command while holding a lock, the way flock(1) does
// for a local file: acquire, run, release, and pass on the command's exit
// status.
type execCommand struct {
	lockFlags
	grace       time.Duration
	timeoutCode int
}

func (c *execCommand) Command() *cli.Command {
	return &cli.Command{
		Name:  "exec",
		Usage: "run a command while holding a lock",
		UsageText: "lockctl exec --key KEY [--key KEY]... [--shared] [--lease 30s]\n" +
			"       [-w DURATION | -n] [--limit N] [-E CODE] [--grace 10s]\n" +
			"       -- COMMAND [ARGS...]",
		ArgsUsage: "-- COMMAND [ARGS...]",
		Description: "Acquires KEY, runs COMMAND with stdin, stdout and stderr passed through,\n" +
			"renews the lease every third of it while COMMAND runs, and releases the lock\n" +
			"when COMMAND exits. COMMAND sees LOCKD_KEY, LOCKD_TOKEN (the fencing token\n" +
			"to hand to whatever the lock protects), LOCKD_LIMIT (--limit, 1 for a lock),\n" +
			"LOCKD_NAME (--name) and LOCKD_ADDR in its environment; with several --key,\n" +
			"LOCKD_KEY and LOCKD_TOKEN are the first key's, and every key n (from 1, in\n" +
			"the order of --key) is LOCKD_KEY_n with its token LOCKD_TOKEN_n (set for\n" +
			"one key too).\n\n" +
			"SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to COMMAND (those a\n" +
			"terminal sends to its whole foreground group, like Ctrl-C, already reach it\n" +
			"and are not sent twice). If the lock is lost while COMMAND runs, lockctl\n" +
			"sends it SIGTERM, then SIGKILL after --grace, and exits 5. If lockctl\n" +
			"itself dies (kill -9, the OOM killer), nothing renews the lock any more:\n" +
			"on Linux the kernel then sends COMMAND SIGKILL (a parent-death signal), so\n" +
			"it does not run on unlocked; only COMMAND gets it, so a script that starts\n" +
			"others should exec its last command or stop its children itself.\n\n" +
			waitHelp + limitHelp + keysHelp +
			"A lock still held when the wait ends exits 3, or -E/--timeout-code CODE (as\n" +
			"flock -E); with -E 0, a busy lock skips COMMAND silently.\n\n" +
			"Examples:\n" +
			"   lockctl exec --key nightly-backup -- ./backup.sh --full\n" +
			"   lockctl exec --key deploy -w 10m -- sh -c 'deploy --fence \"$LOCKD_TOKEN\"'\n" +
			"   lockctl exec -n -E 0 --key cron-job -- ./job   # skip the run if busy\n" +
			"   lockctl exec --key builds --limit 3 -- make   # at most 3 builds at once\n" +
			"   lockctl exec --key cfg --shared -- ./read-config   # readers together\n" +
			"   lockctl exec --key acct/1 --key acct/2 -- ./transfer   # both, or neither\n\n" +
			exitCodesHelp(
				exitLine("N", "COMMAND's own exit code, 0 when it succeeded"),
				exitLine("1", "lockd refused the request"),
				helpExitUsage,
				exitLine("3", "the lock was held: -n, or --wait elapsed (-E/--timeout-code changes it)"),
				helpExitUnavailable,
				exitLine("5", "the lock was lost while COMMAND ran, and COMMAND was stopped"),
				helpExitNoAnswer,
				exitLine("126", "COMMAND is not executable"),
				exitLine("127", "COMMAND was not found"),
				exitLine("128+N", "COMMAND was killed by signal N (130 SIGINT, 143 SIGTERM)"),
				exitLine("", "COMMAND may exit 1 to 6 itself: -E tells a busy lock apart"),
				exitLine("", "130/143 also when a signal stops lockctl before COMMAND starts")),
		Flags: append(c.flags(true),
			&cli.DurationFlag{Name: "grace", Destination: &c.grace, Value: 10 * time.Second,
				Usage: "after the lock is lost, the `DURATION` COMMAND has to exit on SIGTERM before SIGKILL"},
			&cli.IntFlag{Name: "timeout-code", Aliases: []string{"E"}, Destination: &c.timeoutCode, Value: exitTimeout,
				Usage: "exit `CODE` when the lock is held (-n) or --wait elapses, as flock -E; 0 skips COMMAND silently"},
		),
		Action: c.Run,
	}
}

func (c *execCommand) Run(cCtx *cli.Context) error {
	const name = "exec"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := c.check(name, true, g.FailureTimeout); err != nil {
		return err
	}
	if c.grace < 0 {
		return usageError(name, "--grace %s: must be 0 (SIGKILL at once) or more", c.grace)
	}
	if c.timeoutCode < 0 || c.timeoutCode > 255 {
		return usageError(name, "-E/--timeout-code %d: must be between 0 and 255", c.timeoutCode)
	}
	args := cCtx.Args().Slice()
	if len(args) == 0 {
		return usageError(name, "no command to run: put it after --, as in `lockctl exec --key K -- make deploy`")
	}
	// The client dials in the background: the connection is being made
	// while the command is looked up and the signals are set up.
	cl, err := g.lockClient()
	if err != nil {
		return err
	}
	defer cl.Close()

	// A command that cannot start must not cost anyone the lock.
	path, err := lookCommand(args[0])
	if err != nil {
		return err
	}

	// From here on lockctl owns these signals: while it waits for the lock
	// they cancel the wait; while the command runs they are passed on.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	held, err := c.acquire(cCtx.Context, g, cl, sigs)
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   args,
		Env:    commandEnv(g, locksOf(held), c.limit),
		Stdin:  g.Stdin,
		Stdout: g.Stdout,
		Stderr: g.Stderr,
		// Bounds the wait for output copying when stdio are not files and
		// the command left children holding them open.
		WaitDelay: time.Second,
	}
	// If lockctl itself dies (kill -9), the lock stops being renewed:
	// the command must not run on without it.
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		c.release(g, held)
		return startFailure(args[0], path, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	}()

	var (
		lostCh = held.Done()
		lost   *lostError
		kill   <-chan time.Time
		killed bool
	)
	for running := true; running; {
		select {
		case sig := <-sigs:
			if !terminalSent(sig) {
				_ = cmd.Process.Signal(sig)
			}
		case <-lostCh:
			lostCh, lost = nil, heldLost(held)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(c.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			_ = cmd.Process.Kill()
			kill, killed = nil, true
		case <-exited:
			running = false
		}
	}
	if lost == nil && held.Err() != nil {
		lost = heldLost(held)
	}
	if lost != nil {
		// lockd may still count a lease lockctl gave up on: free it for the
		// next waiter if it does, but do not wait long for that.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = held.Release(ctx)
		cancel()
		how := fmt.Sprintf("stopped %s with SIGTERM", args[0])
		if killed {
			how = fmt.Sprintf("killed %s with SIGKILL, as it outlived --grace %s after SIGTERM", args[0], c.grace)
		} else if kill == nil {
			how = fmt.Sprintf("%s ended as the loss was noticed", args[0])
		}
		return lost.exit(how)
	}
	c.release(g, held)
	if code := commandStatus(cmd.ProcessState); code != 0 {
		return silentExit(code)
	}
	return nil
}

// acquire waits for the lock; the first signal cancels the wait. A signal
// that lands as the lock is granted still stops exec, lock released.
func (c *execCommand) acquire(parent context.Context, g *globals, cl *client.Client, sigs <-chan os.Signal) (keeper, error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			cancel(interrupted{sig})
		case <-ctx.Done():
		}
	}()
	held, err := holdShowingWait(ctx, g, cl, c.ask())
	cancel(nil)
	<-watched
	if err != nil {
		var e *exitError
		if errors.As(err, &e) && e.code == exitTimeout {
			if c.timeoutCode == 0 {
				// "Skip the run when the lock is busy": nothing went wrong,
				// and cron mails whatever lands on stderr.
				return nil, silentExit(0)
			}
			e.code = c.timeoutCode
		}
		return nil, err
	}
	var stop interrupted
	if errors.As(context.Cause(ctx), &stop) {
		c.release(g, held)
		return nil, &exitError{code: stop.code(), what: fmt.Sprintf("%s before the command started; the lock was released", stop)}
	}
	return held, nil
}

// release frees the lock after the command; failing to is worth a warning
// but does not hide the command's exit status.
func (c *execCommand) release(g *globals, held keeper) {
	token := held.Token()
	err := releaseHeld(g, held)
	switch {
	case err == nil:
	case errors.Is(err, client.ErrNotHeld):
		warn(g.Stderr, fmt.Sprintf("token %d no longer held %q when the command ended", token, held.Key()),
			"the lock was lost at some point after its last renewal (a failover may have dropped it)")
	default:
		warn(g.Stderr, fmt.Sprintf("could not release %s: %s", keysText(c.keys), renewTrouble(err)),
			fmt.Sprintf("lockd frees it when its lease ends, within %s", c.lease))
	}
}

// commandEnv is lockctl's environment plus what the command needs to
// fence its writes or renew the lock itself. A later entry wins in
// exec.Cmd.Env, so inherited LOCKD_* values are replaced.
func commandEnv(g *globals, locks client.Locks, limit int) []string {
	// LOCKD_KEY_n and LOCKD_TOKEN_n of an outer exec with more keys would
	// not be replaced: leave them all out.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LOCKD_KEY_") && !strings.HasPrefix(e, "LOCKD_TOKEN_") {
			env = append(env, e)
		}
	}
	env = append(env,
		"LOCKD_KEY="+locks[0].Key,
		"LOCKD_TOKEN="+strconv.FormatUint(locks[0].Token, 10),
		"LOCKD_LIMIT="+strconv.Itoa(limit),
		"LOCKD_NAME="+g.Name,
		"LOCKD_ADDR="+g.AddrList,
	)
	env = append(env, setEnv(locks)...)
	return append(env, g.SecurityEnv...)
}

// lookCommand finds the command as a shell would, with a shell's exit
// codes when it cannot: 127 not found, 126 found but not runnable.
func lookCommand(name string) (string, error) {
	path, err := exec.LookPath(name)
	if errors.Is(err, exec.ErrDot) {
		// Found through "." in PATH: a shell would run it, so do we.
		err = nil
	}
	if err == nil {
		if interp, ok := shebang(path); ok && filepath.IsAbs(interp) {
			if _, serr := os.Stat(interp); serr != nil {
				return "", startFailure(name, path, serr)
			}
		}
		return path, nil
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return "", &exitError{code: 127, what: "command not found: " + name,
			try: "check its name, or give its path", err: err}
	}
	return "", &exitError{code: 126, what: fmt.Sprintf("cannot run %s: %s", name, innermost(err)),
		try: "check that it is an executable file (chmod +x)", err: err}
}

// startFailure maps an error of exec.Cmd.Start the way lookCommand does,
// and as a shell would: a script whose #! line names an interpreter that
// is not there exits 126, saying so, since the script itself was found.
func startFailure(name, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		if interp, ok := shebang(path); ok {
			return &exitError{code: 126, what: fmt.Sprintf("cannot run %s: bad interpreter %s (its #! line): no such file", name, printable(interp)),
				try: "fix the script's first line, or install the interpreter it names", err: err}
		}
		return &exitError{code: 127, what: "command not found: " + name,
			try: "check its name, or give its path", err: err}
	}
	return &exitError{code: 126, what: fmt.Sprintf("cannot run %s: %s", name, innermost(err)),
		try: "check that it is an executable file for this system (chmod +x, #! line)", err: err}
}

// shebang reads the interpreter a script's #! line names, when the file
// at path exists and starts with one.
func shebang(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := io.ReadFull(f, buf)
	line, ok := strings.CutPrefix(string(buf[:n]), "#!")
	if !ok {
		return "", false
	}
	line, _, _ = strings.Cut(line, "\n")
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "", true
	}
	return fields[0], true
}

// innermost is the last error of a wrap chain: "permission denied" rather
// than "exec: fork/exec /x: permission denied".
func innermost(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// commandStatus is the exit code a shell would report for the command.
func commandStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// terminalSent reports whether sig most likely came from the terminal.
// A terminal sends SIGINT (Ctrl-C), SIGQUIT (Ctrl-\) and SIGHUP (hangup)
// to its whole foreground process group, which the command shares with
// lockctl: passing such a signal on would deliver it twice, and many
// programs take a second Ctrl-C as "skip the cleanup, quit now".
func terminalSent(sig os.Signal) bool {
	if sig != syscall.SIGINT && sig != syscall.SIGQUIT && sig != syscall.SIGHUP {
		return false
	}
	for _, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		fg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
		if err == nil {
			return fg == unix.Getpgrp()
		}
	}
	return false
}
