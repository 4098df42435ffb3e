package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lockd-io/lockd/proto"
)

// Errors a call may return, possibly wrapped with the key and a hint at
// what to do; test them with errors.Is.
var (
	// ErrTimeout: the acquire's wait elapsed without a grant (a T answer).
	ErrTimeout = errors.New("timed out waiting for the lock")
	// ErrNotHeld: the token does not hold the key (R or N answered notheld).
	ErrNotHeld = errors.New("the token does not hold the key")
	// ErrUnavailable: every connection was tried and none could serve. The
	// error wraps the last dial or connection error.
	ErrUnavailable = errors.New("no lockd node available")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("lockd client is closed")
	// ErrNoAnswer: a node took the connection (or the request) and then
	// answered nothing, not even the keep-alive, for
	// Options.FailureTimeout: a frozen process, a machine that vanished,
	// a listener that is not lockd. The connection is treated as dropped.
	// When no other node could serve either, the call's error wraps both
	// ErrUnavailable and ErrNoAnswer.
	ErrNoAnswer = errors.New("lockd did not answer")
	// ErrNotLockd: a node answered this client's first status request
	// with a line no lockd node sends: another service listens at its
	// address. When no other node could serve either, the call's error
	// wraps both ErrUnavailable and ErrNotLockd.
	ErrNotLockd = errors.New("not a lockd node")
	// ErrDisagree: a request was redirected (M) from node to node for
	// longer than three failure timeouts (and more than 10 times) in a
	// row, each node answering at once that another is active: the nodes
	// disagree on which one is, which a retry a moment later usually
	// finds settled. An acquire whose wait runs out while its request is
	// redirected so (more than twice in a row) reports it too, rather
	// than ErrTimeout: no node said the key was held.
	ErrDisagree = errors.New("the nodes disagree on which one is active")
	// ErrLimitMismatch: an acquire asked for a limit (Limit) other than
	// the one the key has, set by the acquire that created it; the key
	// keeps it while it is held or waited on. The error is the node's
	// *ServerError, which matches ErrLimitMismatch with errors.Is; Queue
	// tells the key's limit.
	ErrLimitMismatch = errors.New("the key exists with another limit")
	// ErrInvalidArgument: the call's arguments were refused before
	// anything was sent: a key that is not one, a lease, wait or limit
	// out of range, options that do not go together, a set's key named
	// twice, a value the wire cannot carry, a hold's lease too short
	// (ErrLeaseTooShort). The error's words say which, and what to give
	// instead.
	ErrInvalidArgument = errors.New("invalid argument")
)

// argError is a refusal of a call's arguments: err's words, matching
// ErrInvalidArgument as well as what err wraps.
type argError struct{ err error }

func (e *argError) Error() string { return e.err.Error() }

func (e *argError) Unwrap() error { return e.err }

func (e *argError) Is(target error) bool { return target == ErrInvalidArgument }

// argErrorf is fmt.Errorf for a refusal of a call's arguments.
func argErrorf(format string, a ...any) error {
	return &argError{fmt.Errorf(format, a...)}
}

// ServerError is an E answer: the node refused the request and said why.
type ServerError struct {
	Op       proto.Op
	Key, Msg string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("lockd refused %s %s: %s", opName(e.Op), e.Key, e.Msg)
}

// Is reports whether the refusal is a limit mismatch (proto's "E key A:
// limit mismatch: ..."), for errors.Is(err, ErrLimitMismatch).
func (e *ServerError) Is(target error) bool {
	return target == ErrLimitMismatch && e.Op == proto.OpAcquire && strings.HasPrefix(e.Msg, limitMismatch)
}

// limitMismatch starts the words of proto's limit-mismatch refusal.
const limitMismatch = "limit mismatch:"

func opName(op proto.Op) string {
	if n := op.Name(); n != "" {
		return n
	}
	return "request " + op.String()
}

func serverError(a proto.Answer) *ServerError {
	return &ServerError{Op: a.ReqOp(), Key: a.Key, Msg: a.ErrorText()}
}

// SetupError is a connection that reached a node but could not be made
// ready: TLS failed, or the node refused the secret. It is a setting to
// fix (certificates, --secret-file), not a node that is down.
type SetupError struct {
	Addr string
	What string // "TLS" or "the secret"
	Err  error
}

func (e *SetupError) Error() string {
	return e.Addr + ": " + e.What + ": " + e.Err.Error()
}

func (e *SetupError) Unwrap() error { return e.Err }
