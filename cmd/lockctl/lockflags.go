package main

// The flags the lock commands share (--key, --lease, --wait, --limit,
// --token) and the checks of their values.

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/durflag"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// noArgs refuses positional arguments for commands that take none: a key
// typed without --key is the usual mistake.
func noArgs(cCtx *cli.Context) error {
	if cCtx.NArg() > 0 {
		return usageError(cCtx.Command.Name, "unexpected argument %q: %s takes flags only (the key goes in --key KEY)", cCtx.Args().First(), cCtx.Command.Name)
	}
	return nil
}

// Checks of the flags the lock commands share. The server refuses the same
// things, but a usage error names the flag and costs no round trip.

func checkKey(cmd, key string) error {
	if key == "" {
		return usageError(cmd, "--key is required")
	}
	if msg := proto.CheckKey([]byte(key)); msg != "" {
		return usageError(cmd, "--key %s: %s", clipKey(key), msg)
	}
	return nil
}

// clipKeyAt is how many bytes of a key an error echoes: a key of
// 100,000 bytes makes an error of 100,000 bytes that scrolls away what it
// says.
const clipKeyAt = 40

// clipKey is key quoted for an error, its start only when it is long,
// with its length in bytes.
func clipKey(key string) string {
	if len(key) <= clipKeyAt {
		return strconv.Quote(key)
	}
	cut := clipKeyAt
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(key[:cut]), len(key))
}

func checkLease(cmd string, lease time.Duration) error {
	switch {
	case lease < time.Millisecond:
		return usageError(cmd, "--lease %s: must be at least 1ms (lockd counts in milliseconds)", lease)
	case lease > proto.MaxSeconds*time.Second:
		return usageError(cmd, "--lease %s: must be at most %s", lease, proto.MaxSeconds*time.Second)
	}
	return nil
}

// minHeldLease is the shortest lease hold and exec keep through a
// failover, for a client whose --failure-timeout is failureTimeout: the
// Go client's rule (client.MinHoldLease), which every client shares. The
// renewal lost with a crashed active goes to the next one once the
// client notices (within about a failure timeout) and a standby has
// taken the role (about one more).
func minHeldLease(failureTimeout time.Duration) time.Duration {
	return client.MinHoldLeaseFor(failureTimeout)
}

// checkHeldLease refuses a lease hold or exec could not renew across a
// failover: the lock would be lost in every one, silently for whoever
// relies on it.
func checkHeldLease(cmd string, lease, failureTimeout time.Duration) error {
	if min := minHeldLease(failureTimeout); lease < min {
		return usageError(cmd, "--lease %s is too short to be renewed across a failover: a renewal lost with the active "+
			"reaches the next one only after --failure-timeout %s; take --lease %s or more (twice --failure-timeout), "+
			"or, against nodes started with a shorter --failure-timeout, give lockctl the same",
			lease, failureTimeout, min)
	}
	return nil
}

// shortLeaseWarning is acquire's word on a lease that would not survive a
// failover. acquire does not renew (the token goes to whoever renews or
// releases it), and a lock meant to lapse soon is a fair use, so it takes
// the lease, and says what it costs.
func shortLeaseWarning(w io.Writer, lease, failureTimeout time.Duration) {
	if min := minHeldLease(failureTimeout); lease < min {
		warn(w, fmt.Sprintf("--lease %s is shorter than the %s a renewal needs to get through a failover: a failover will end this lock", lease, min),
			fmt.Sprintf("take --lease %s or more for a lock that must outlive one", min))
	}
}

// lockWait is how long a command waits in a key's queue: --wait and
// --nonblock, read the way flock(1) reads -w and -n. No --wait waits
// forever; --wait 0 or --nonblock does not wait at all.
type lockWait struct {
	d   time.Duration
	set bool // --wait or --nonblock was given
}

// Set reads a --wait value: a Go duration (500ms, 2m) or, as flock's
// -w, plain seconds (10, 0.5).
func (w *lockWait) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > proto.MaxSeconds {
			return fmt.Errorf("want a duration like 500ms, 30s or 2m, or seconds like 10 or 0.5")
		}
		d = time.Duration(f * float64(time.Second))
	}
	w.d, w.set = d, true
	return nil
}

func (w *lockWait) String() string {
	if w == nil || !w.set {
		return ""
	}
	return w.d.String()
}

// atOnce reports whether the command must not wait at all.
func (w lockWait) atOnce() bool { return w.set && w.d == 0 }

// nonblockWait is the wait lockctl sends for "do not wait": the
// protocol's wait 0 means forever (proto/doc.go), and it has no "do not
// queue", so lockctl asks for the smallest wait there is, 0.001 s. "At
// once" is within a millisecond: a lock freed in that millisecond is
// still granted.
const nonblockWait = time.Millisecond

// wire is the wait the client sends: 0 (forever) when none was given.
func (w lockWait) wire() time.Duration {
	switch {
	case !w.set:
		return 0
	case w.d < nonblockWait:
		return nonblockWait
	}
	return w.d
}

// describe says how long the command waited, for messages.
func (w lockWait) describe() string {
	if w.atOnce() {
		return "at once"
	}
	return "after waiting " + w.d.String()
}

// checkWait checks --wait and folds --nonblock into it.
func checkWait(cmd string, w *lockWait, nonblock bool) error {
	switch {
	case nonblock && w.set && w.d != 0:
		return usageError(cmd, "--nonblock and --wait %s do not go together: --nonblock is --wait 0", w.d)
	case nonblock:
		w.d, w.set = 0, true
	case w.d < 0:
		return usageError(cmd, "--wait %s: must be 0 (do not wait) or more; leave --wait out to wait forever", w.d)
	case w.d > proto.MaxSeconds*time.Second:
		return usageError(cmd, "--wait %s: must be at most %s", w.d, proto.MaxSeconds*time.Second)
	}
	return nil
}

func parseToken(cmd, token string) (uint64, error) {
	if token == "" {
		return 0, usageError(cmd, "--token is required (the number acquire printed)")
	}
	// As `jq .token` prints it, quotes and all: JSON carries tokens as
	// strings.
	if len(token) >= 2 && token[0] == '"' && token[len(token)-1] == '"' {
		token = token[1 : len(token)-1]
	}
	t, err := proto.ParseToken(token)
	if err != nil {
		return 0, usageError(cmd, "--token: %v", err)
	}
	return t, nil
}

// Flags the lock commands share, bound to the command's own fields.

const defaultLease = 30 * time.Second

func keyFlag(dst *string) cli.Flag {
	return &cli.StringFlag{Name: "key", Destination: dst,
		Usage: "the lock's name, any `KEY` of 1 to 255 bytes without spaces or control characters (required)"}
}

func leaseFlag(dst *time.Duration, def time.Duration) cli.Flag {
	return durflag.New(cli.DurationFlag{Name: "lease", Destination: dst, Value: def,
		Usage: "how long lockd keeps the lock unless it is renewed, a `DURATION` (30s, 2m) or seconds (30, 0.5)"})
}

// heldLeaseFlag is --lease of the commands that keep renewing it.
func heldLeaseFlag(dst *time.Duration, def time.Duration) cli.Flag {
	return durflag.New(cli.DurationFlag{Name: "lease", Destination: dst, Value: def,
		Usage: "how long lockd keeps the lock if renewals stop, a `DURATION` (30s, 2m) or seconds (30, 0.5); " +
			"renewed every third of it, and at least twice --failure-timeout (2s by default), so that a renewal gets through a failover"})
}

// waitFlags are flock's -w and -n.
func waitFlags(dst *lockWait, nonblock *bool) []cli.Flag {
	return []cli.Flag{
		&cli.GenericFlag{Name: "wait", Aliases: []string{"w"}, Value: dst, DefaultText: "wait forever",
			Usage: "longest to wait in the key's queue for the lock, a `DURATION` (30s, 2m) or seconds (10, 0.5), as flock -w; " +
				"0 does not wait (fail at once if the lock is held)"},
		&cli.BoolFlag{Name: "nonblock", Aliases: []string{"n"}, Destination: nonblock,
			Usage: "fail at once if the lock is held, as flock -n (the same as --wait 0)"},
	}
}

// limitFlag is --limit: a semaphore of N places instead of a lock.
func limitFlag(dst *int) cli.Flag {
	return &cli.IntFlag{Name: "limit", Destination: dst, Value: 1,
		Usage: "let up to `N` hold the key at once, each with its own token (a semaphore); every user of a key must give the same N"}
}

// checkLimit checks --limit.
func checkLimit(cmd string, n int) error {
	if n < 1 || n > proto.MaxLimit {
		return usageError(cmd, "--limit %d: want how many may hold the key at once, from 1 (a lock, the default) to %d", n, proto.MaxLimit)
	}
	return nil
}

func tokenFlag(dst *string) cli.Flag {
	return &cli.StringFlag{Name: "token", Destination: dst,
		Usage: "the fencing `TOKEN` that acquire printed (required)"}
}

// lockFlags are the flags of the commands that take a lock (acquire,
// hold, exec): which keys, how, for how long, and how long to wait.
type lockFlags struct {
	keys     keyList
	shared   bool
	lease    time.Duration
	wait     lockWait
	nonblock bool
	limit    int
}

// flags defines them; kept says the command keeps the lock and renews it
// (hold, exec), whose --lease says so.
func (f *lockFlags) flags(kept bool) []cli.Flag {
	lease := leaseFlag(&f.lease, defaultLease)
	if kept {
		lease = heldLeaseFlag(&f.lease, defaultLease)
	}
	return append(append([]cli.Flag{keysFlag(&f.keys), sharedFlag(&f.shared), lease},
		waitFlags(&f.wait, &f.nonblock)...), limitFlag(&f.limit))
}

// check says what is wrong with them for cmd. A lock kept and renewed
// (kept) needs a lease a renewal can outlast a failover with, whose
// failure timeout is failureTimeout.
func (f *lockFlags) check(cmd string, kept bool, failureTimeout time.Duration) error {
	var short error
	if kept {
		short = checkHeldLease(cmd, f.lease, failureTimeout)
	}
	return firstError(checkKeys(cmd, f.keys, f.shared, f.limit), checkLease(cmd, f.lease), short,
		checkWait(cmd, &f.wait, f.nonblock), checkLimit(cmd, f.limit))
}

// ask is what they ask lockd for.
func (f *lockFlags) ask() lockAsk {
	return lockAsk{key: f.keys[0], lease: f.lease, wait: f.wait, limit: f.limit, keys: f.keys, shared: f.shared}
}

// firstError returns the first non-nil error, so a command's checks read
// as one list.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
