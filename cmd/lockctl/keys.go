package main

// --key repeated (several keys at once, all or none) and --shared (a
// reader), as acquire, hold and exec take them.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto/client"
)

// keyList is a --key given once or more, in order. Each --key is one key
// whole: a key may hold commas, so the values are not split.
type keyList []string

func (k *keyList) Set(s string) error {
	*k = append(*k, s)
	return nil
}

func (k *keyList) String() string {
	if k == nil {
		return ""
	}
	return strings.Join(*k, " ")
}

// keysFlag is --key of the commands that take several keys at once.
func keysFlag(dst *keyList) cli.Flag {
	return &cli.GenericFlag{Name: "key", Value: dst,
		Usage: "the lock's name, any `KEY` of 1 to 255 bytes without spaces or control characters (required); " +
			"repeat it to take up to " + strconv.Itoa(client.MaxSetKeys) + " keys at once, all or none"}
}

// sharedFlag is --shared: take the key(s) as a reader.
func sharedFlag(dst *bool) cli.Flag {
	return &cli.BoolFlag{Name: "shared", Destination: dst,
		Usage: "take the key as a reader: readers hold it together, never beside a writer (a command without --shared)"}
}

// checkKeys checks every --key, and what --shared and --limit make of
// them.
func checkKeys(cmd string, keys keyList, shared bool, limit int) error {
	if len(keys) == 0 {
		return usageError(cmd, "--key is required")
	}
	if len(keys) > client.MaxSetKeys {
		return usageError(cmd, "%d keys given: one request takes at most %d --key", len(keys), client.MaxSetKeys)
	}
	for i, k := range keys {
		if err := checkKey(cmd, k); err != nil {
			return err
		}
		for j := range i {
			if keys[j] == k {
				return usageError(cmd, "--key %s is given twice (keys %d and %d): name each key once", clipKey(k), j+1, i+1)
			}
		}
	}
	if shared && limit > 1 {
		return usageError(cmd, "--shared and --limit %d do not go together: a semaphore's places are all alike; take --shared for a reader of a lock, or --limit alone", limit)
	}
	return nil
}

// keysHelp is the paragraph on a repeated --key and --shared that
// acquire, hold and exec share.
const keysHelp = "--shared takes KEY as a reader: readers hold it together, never beside a\n" +
	"writer (the same command without --shared); a reader waits behind a writer\n" +
	"queued before it. --key given more than once takes every key at once, all\n" +
	"or none (up to 16, each with its own token, in one request line of at most\n" +
	"4096 bytes: 16 keys near 255 bytes each do not fit, and exit 2): no deadlock\n" +
	"against another command taking the same keys in another order; losing one\n" +
	"loses them all.\n\n"

// keeper is a lock hold and exec keep: one key (*client.Held) or several
// (*client.HeldSet).
type keeper interface {
	Done() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
	Key() string
	Token() uint64
	Lock() client.Lock
}

// locksOf is every key a keeper holds, in the order asked.
func locksOf(k keeper) client.Locks {
	if s, ok := k.(*client.HeldSet); ok {
		return s.Locks()
	}
	return client.Locks{k.Lock()}
}

// keysText names the keys asked for in a message: "a", or "a", "b" and "c".
func keysText(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// setLost says which key of a set ended it, for lostError.
func setLost(k keeper) (key string, token uint64, of string) {
	s, ok := k.(*client.HeldSet)
	if !ok {
		return k.Key(), k.Token(), ""
	}
	l, by := s.EndedBy()
	if !by {
		l = s.Lock()
	}
	return l.Key, l.Token, fmt.Sprintf(" (one of %s, all given back)", keysText(s.Keys()))
}

// setEnv is what exec adds to the command's environment for every key:
// LOCKD_KEY_n and LOCKD_TOKEN_n, n from 1, in the order of --key.
func setEnv(locks client.Locks) []string {
	var env []string
	for i, l := range locks {
		n := strconv.Itoa(i + 1)
		env = append(env, "LOCKD_KEY_"+n+"="+l.Key, "LOCKD_TOKEN_"+n+"="+strconv.FormatUint(l.Token, 10))
	}
	return env
}
