package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/lockd-io/lockd/proto/auth"
	"github.com/lockd-io/lockd/proto/client"
)

// Exit codes are part of lockctl's contract with scripts: every --help
// lists the ones its command can return.
const (
	exitOK          = 0 // done
	exitFailed      = 1 // refused, not held, or a command-specific failure
	exitUsage       = 2 // bad flags or arguments
	exitTimeout     = 3 // the wait elapsed before the lock was granted
	exitUnavailable = 4 // no lockd node could be reached
	exitLost        = 5 // the lock was lost while hold or exec ran
	exitNoAnswer    = 6 // a node took the connection but did not answer in time
	// A command interrupted by a signal exits 128+N, as a shell reports it:
	// 130 for SIGINT, 143 for SIGTERM.
	exitSignalBase = 128
)

// exitCodesHelp is the block every command's description ends with;
// each command passes the lines that apply to it.
func exitCodesHelp(lines ...string) string {
	return "EXIT CODES:\n" + strings.Join(lines, "\n")
}

// exitLine is one line of an EXIT CODES block.
func exitLine(code, meaning string) string {
	return fmt.Sprintf("   %-6s %s", code, meaning)
}

// Lines for exitCodesHelp shared by several commands.
var (
	helpExitOK          = exitLine("0", "done")
	helpExitFailed      = exitLine("1", "refused by lockd, or the token does not hold the key")
	helpExitUsage       = exitLine("2", "bad flags or arguments")
	helpExitTimeout     = exitLine("3", "the lock was held: -n/--nonblock, or --wait elapsed before it was granted")
	helpExitUnavailable = exitLine("4", "no lockd node could be reached at --addr")
	helpExitLost        = exitLine("5", "the lock was lost: lockd said notheld, or no renewal got through in time")
	helpExitNoAnswer    = exitLine("6", "lockd took the connection but did not answer within --timeout (or --failure-timeout)")
	helpExitSignal      = exitLine("130", "interrupted by Ctrl-C (SIGINT); 143 by SIGTERM")
)

// exitError is how a command ends with a code other than 0. Its message is
// printed as one line, "lockctl: what; try", or not at all when what is
// empty (exec passing on its command's code).
type exitError struct {
	code int
	what string // what happened
	try  string // what the user can do about it
	err  error  // the cause, for errors.Is; never printed raw
	// answered: the command already printed its JSON answer, which says
	// what went wrong (status --check), so no error object follows it.
	answered bool
}

func (e *exitError) Error() string {
	if e.try == "" {
		return e.what
	}
	return e.what + "; " + e.try
}

func (e *exitError) ExitCode() int { return e.code }
func (e *exitError) Unwrap() error { return e.err }

func fail(code int, what, try string) *exitError {
	return &exitError{code: code, what: what, try: try}
}

// usageError reports bad flags or arguments of cmd ("" for lockctl itself).
func usageError(cmd, format string, args ...any) *exitError {
	help := "lockctl --help"
	if cmd != "" {
		help = "lockctl " + cmd + " --help"
	}
	return fail(exitUsage, fmt.Sprintf(format, args...), "see `"+help+"`")
}

// silentExit ends lockctl with code and prints nothing: exec uses it to
// pass on its command's exit status.
func silentExit(code int) *exitError { return &exitError{code: code} }

// interrupted is the cancel cause of a context stopped by a signal.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

func (i interrupted) code() int {
	if s, ok := i.sig.(syscall.Signal); ok {
		return exitSignalBase + int(s)
	}
	return exitSignalBase + int(syscall.SIGINT)
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return sig.String()
}

// clientFailure turns an error of the lockd client into what lockctl says
// and the code it exits with. doing names the request in words, as in
// `acquiring "deploy"`; ctx is the context the request ran under, so that
// a cancel by signal is told apart from other failures.
func clientFailure(ctx context.Context, g *globals, doing string, err error) error {
	if err == nil {
		return nil
	}
	var stop interrupted
	if errors.As(context.Cause(ctx), &stop) {
		return &exitError{code: stop.code(), what: fmt.Sprintf("%s while %s", stop, doing), err: err}
	}
	var srv *client.ServerError
	var setup *client.SetupError
	var tlsNode *speaksTLSError
	if g.Security.TLS == nil && (errors.Is(err, client.ErrNoAnswer) || errors.Is(err, client.ErrUnavailable) || errors.As(err, &setup)) {
		// Down, silent, or closing on the first line: what a TLS node
		// looks like to plain TCP.
		if addr := probeTLS(g.Addrs, min(g.FailureTimeout, tlsProbeWait)); addr != "" {
			return needsTLS(addr, err)
		}
	}
	switch {
	case errors.As(err, &tlsNode):
		return needsTLS(tlsNode.addr, err)
	case errors.As(err, &setup):
		return setupFailure(setup, err)
	case errors.Is(err, client.ErrNoAnswer):
		return noAnswer(g, doing, err)
	case errors.Is(err, client.ErrDisagree):
		return &exitError{code: exitFailed, what: fmt.Sprintf("%s failed: %s", doing, disagreement(err)),
			try: "retry in a moment; `lockctl status` shows which nodes claim the active role", err: err}
	case errors.Is(err, client.ErrUnavailable):
		return unreachable(g, err)
	case errors.Is(err, client.ErrTimeout):
		return &exitError{code: exitTimeout, what: "timed out " + doing,
			try: "the key is still held; wait longer with --wait, or see who holds it with `lockctl queues`", err: err}
	case errors.Is(err, client.ErrNotHeld):
		return &exitError{code: exitFailed, what: "the token does not hold the key while " + doing,
			try: "it was released already, its lease expired, or it was never granted; acquire the key again", err: err}
	case errors.As(err, &srv):
		if e := authRequired(g.AddrList, srv.Msg, err); e != nil {
			return e
		}
		try := refusalHint(srv.Msg)
		if try == "" {
			try = "check the flags against the server's limits"
		}
		return &exitError{code: exitFailed, what: fmt.Sprintf("lockd refused %s: %s", doing, srv.Msg),
			try: try, err: err}
	case errors.Is(err, client.ErrInvalidArgument):
		// The client refused the arguments before sending anything (a
		// set of keys whose request line would be too long): the
		// flags are at fault, not the node.
		return &exitError{code: exitUsage, what: doing + " refused before sending: " + err.Error(), err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &exitError{code: exitNoAnswer, what: fmt.Sprintf("no answer from lockd at %s within --timeout %s while %s", printable(g.AddrList), g.Timeout, doing),
			try: "check that the node is up and not overloaded (`lockctl status`), or allow more with --timeout", err: err}
	}
	return &exitError{code: exitFailed, what: doing + " failed: " + err.Error(),
		try: "check `lockctl status`", err: err}
}

// refusalHints are lockctl's flags for the refusals that have them, by
// the words each starts with. A node says what happened in the terms of
// any client (its words reach a Go program's log as well); which flag
// changes it is lockctl's to say.
var refusalHints = []struct{ prefix, try string }{
	{"queue full:", "to raise the limit, start lockd with a higher --max-waiters (or LOCKD_MAX_WAITERS)"},
	{"too many waiters:", "to raise the limit, start lockd with a higher --max-total-waiters (or LOCKD_MAX_TOTAL_WAITERS)"},
	{"too many keys:", "to raise the limit, start lockd with a higher --max-keys (or LOCKD_MAX_KEYS)"},
	{"lease out of range:", "ask for a shorter --lease, or start lockd with a longer --max-lease (or LOCKD_MAX_LEASE)"},
	{"wait out of range:", "wait less (--wait), or start lockd with a longer --max-wait (or LOCKD_MAX_WAIT)"},
	{"this needs the admin role", "pass the node's --admin-secret-file with --secret-file, or an admin certificate (`lockd tls cert --role admin`) with --tls-cert and --tls-key"},
}

// refusalHint is what to do about the refusal msg, or "" when lockctl
// has nothing to add to it.
func refusalHint(msg string) string {
	for _, h := range refusalHints {
		if strings.HasPrefix(msg, h.prefix) {
			return h.try
		}
	}
	return ""
}

// setupFailure is a node that was reached but refused the connection's
// TLS or secret: a setting to fix, so it is not reported as unreachable.
func setupFailure(e *client.SetupError, err error) *exitError {
	var refused *auth.RefusedError
	var notTLS tls.RecordHeaderError
	what := fmt.Sprintf("lockd at %s: %s failed: %v", printable(e.Addr), e.What, e.Err)
	try := "check --tls-ca, --tls-cert and --tls-key against the node's certificates (lockd tls)"
	switch {
	case errors.As(err, &notTLS):
		what = fmt.Sprintf("lockd at %s does not speak TLS, and lockctl spoke TLS to it", printable(e.Addr))
		try = "leave out --tls and --tls-ca (and LOCKD_TLS, LOCKD_TLS_CA), or start the node with --tls-cert and --tls-key"
	case errors.As(err, &refused):
		words := strings.TrimSuffix(refused.Words, "; closing this connection")
		what = fmt.Sprintf("lockd at %s refused the secret: %s", printable(e.Addr), words)
		try = "pass --secret-file (or LOCKD_SECRET_FILE) the file the node was started with"
		if strings.Contains(words, "role admin") {
			try = "moving the active role needs the node's --admin-secret-file: pass that file with --secret-file"
		}
	case e.What == "the secret":
		try = "check that --secret-file is the file the node was started with"
	}
	return &exitError{code: exitFailed, what: what, try: try, err: err}
}

// noAnswer is the one message for "a node took the connection and then
// said nothing": a frozen process, a vanished machine, a port that is
// not lockd's.
func noAnswer(g *globals, doing string, err error) *exitError {
	return &exitError{
		code: exitNoAnswer,
		what: fmt.Sprintf("lockd at %s did not answer while %s: it took the connection, then said nothing for --failure-timeout %s",
			printable(g.AddrList), doing, g.FailureTimeout),
		try: "check that the node is not frozen or overloaded (`lockctl status`), or allow more with --failure-timeout",
		err: err,
	}
}

// disagreement is the client's words for a redirect loop, without the
// key and op it prefixes them with.
func disagreement(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "redirected "); i >= 0 {
		msg = msg[i:]
	}
	if i := strings.Index(msg, "; retry"); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// unreachable is the one message for "no node answered".
func unreachable(g *globals, err error) *exitError {
	cause := networkCause(err)
	try := "start it with `lockd` or point --addr/LOCKD_ADDR at a running node"
	if errors.Is(err, client.ErrNotLockd) {
		try = "point --addr/LOCKD_ADDR at the port a lockd node listens on (its --listen)"
	}
	if strings.HasPrefix(cause, "tls: ") {
		// The node answered, in TLS, and refused this end: a flag to fix.
		try = "check the TLS flags: --tls-ca verifies the node; a node started with --tls-client-auth wants --tls-cert and --tls-key"
	}
	return &exitError{
		code: exitUnavailable,
		what: fmt.Sprintf("cannot reach lockd at %s (%s)", printable(g.AddrList), cause),
		try:  try,
		err:  err,
	}
}

// networkCause digs the useful words ("connection refused", "i/o timeout")
// out of a chain of wrapped dial errors.
func networkCause(err error) string {
	if errors.Is(err, client.ErrNoAnswer) {
		return "it took the connection but did not answer"
	}
	if errors.Is(err, client.ErrNotLockd) {
		return "another service answered there, not lockd"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return "no answer before the dial timeout"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		// The name may be one a node redirected the client to.
		return "cannot resolve " + printable(dns.Name)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	// The client said why in its own words, already wrapped in advice of
	// its own; the one-line message keeps lockctl's advice only.
	return "no connection could be made"
}

// exitCode is the process exit status for the error a command returned.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var coder interface{ ExitCode() int }
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	return exitFailed
}
