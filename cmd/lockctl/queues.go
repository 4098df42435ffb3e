package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// queuesCommand shows who holds which key and who waits for it.
type queuesCommand struct {
	key    string
	prefix string
}

const (
	// queuesInFlight bounds the Q requests pipelined at once.
	queuesInFlight = 64
	// longWait is a wait worth pointing out.
	longWait = 10 * time.Second
)

func (c *queuesCommand) Command() *cli.Command {
	return &cli.Command{
		Name:      "queues",
		Usage:     "show every held key with its holder and its waiters in queue order",
		UsageText: "lockctl queues [--key KEY | --prefix PREFIX]",
		Description: "Lists the keys that are held or waited on (all of them, one, or those\n" +
			"starting with a prefix), sorted by key, each with its holder's fencing token\n" +
			"and remaining lease, and its waiters in the order they will be granted: how\n" +
			"long each has waited and the address of its connection. Piped, it prints one\n" +
			"line per waiter (the key repeated), so grep and awk work line by line.\n\n" +
			"--json prints one object:\n" +
			"   {\"keys\":[{\"key\":\"deploy\",\"held\":true,\"token\":123,\"lease_left_seconds\":29.5,\n" +
			"    \"waiters\":[{\"position\":1,\"waited_seconds\":3.2,\"addr\":\"10.0.0.9:51234\"}]}],\n" +
			"    \"total\":1}\n" +
			"token and lease_left_seconds are null when nobody holds the key; total counts\n" +
			"the matching keys, which can exceed the listed ones (lockd lists at most " +
			strconv.Itoa(proto.MaxListKeys) + ").\n\n" +
			"Examples:\n" +
			"   lockctl queues\n" +
			"   lockctl queues --key deploy\n" +
			"   lockctl queues --prefix jobs/ --json | jq '.keys[] | select(.waiters | length > 0)'\n\n" +
			exitCodesHelp(helpExitOK,
				exitLine("1", "lockd refused the request"),
				helpExitUsage, helpExitUnavailable, helpExitNoAnswer, helpExitSignal),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "key", Destination: &c.key,
				Usage: "show this `KEY` only"},
			&cli.StringFlag{Name: "prefix", Destination: &c.prefix,
				Usage: "show the keys starting with `PREFIX` only"},
		},
		Action: c.Run,
	}
}

func (c *queuesCommand) Run(cCtx *cli.Context) error {
	const name = "queues"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := noArgs(cCtx); err != nil {
		return err
	}
	pattern := "*"
	switch {
	case cCtx.IsSet("key") && cCtx.IsSet("prefix"):
		return usageError(name, "--key and --prefix do not go together")
	case cCtx.IsSet("key"):
		if err := checkKey(name, c.key); err != nil {
			return err
		}
		pattern = c.key
	case cCtx.IsSet("prefix"):
		if c.prefix == "" {
			return usageError(name, "--prefix is empty; leave it out to list every key")
		}
		if msg := proto.CheckKey([]byte(c.prefix + "*")); msg != "" {
			return usageError(name, "--prefix %q: %s", c.prefix, msg)
		}
		pattern = c.prefix + "*"
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	cl, err := g.client(client.Options{})
	if err != nil {
		return err
	}
	defer cl.Close()

	list, total, err := fetchQueues(ctx, cl, pattern)
	if err != nil {
		return clientFailure(ctx, g, "listing the queues", err)
	}
	if g.JSON {
		return printJSON(g.Stdout, queuesJSONOf(list, total))
	}
	s := styleOf(g)
	if len(list) == 0 {
		// Nothing on stdout, so that `| wc -l` counts 0; a person at a
		// terminal is told on stderr.
		if g.TTY {
			fmt.Fprintln(g.Stderr, "lockctl: "+printableText(emptyQueues(pattern)))
		}
		return nil
	}
	if !s.Table && total > len(list) {
		warn(g.Stderr, fmt.Sprintf("showing %d of %d keys", len(list), total), "narrow the list with --prefix")
	}
	return renderQueues(g.Stdout, list, total, s)
}

// queueSource is what fetchQueues needs of a client.
type queueSource interface {
	Keys(ctx context.Context, pattern string) ([]string, int, error)
	Queue(ctx context.Context, key string) (proto.Queue, error)
}

// fetchQueues lists the keys pattern selects, then asks for each one's
// queue, pipelining the requests on the client's connections. Keys freed
// in between are left out. The result is sorted by key.
func fetchQueues(ctx context.Context, cl queueSource, pattern string) ([]proto.Queue, int, error) {
	keys, total, err := cl.Keys(ctx, pattern)
	if err != nil {
		return nil, 0, err
	}
	got := make([]proto.Queue, len(keys))
	errs := make([]error, len(keys))
	sem := make(chan struct{}, queuesInFlight)
	var wg sync.WaitGroup
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got[i], errs[i] = cl.Queue(ctx, k)
		})
	}
	wg.Wait()
	var list []proto.Queue
	for i, q := range got {
		if errs[i] != nil {
			return nil, 0, errs[i]
		}
		if q.Held || len(q.Waiters) > 0 {
			list = append(list, q)
		}
	}
	slices.SortFunc(list, func(a, b proto.Queue) int { return strings.Compare(a.Key, b.Key) })
	if total <= len(keys) {
		// Every match was listed: count what is still there.
		total = len(list)
	}
	return list, total, nil
}

// queuesJSON is the --json shape of queues; it is part of lockctl's
// contract with scripts.
type queuesJSON struct {
	Keys  []queueKeyJSON `json:"keys"`
	Total int            `json:"total"`
}

type queueKeyJSON struct {
	Key              string            `json:"key"`
	Held             bool              `json:"held"`
	Token            *uint64           `json:"token"`
	LeaseLeftSeconds *float64          `json:"lease_left_seconds"`
	Waiters          []queueWaiterJSON `json:"waiters"`
}

type queueWaiterJSON struct {
	Position      int     `json:"position"`
	WaitedSeconds float64 `json:"waited_seconds"`
	Addr          *string `json:"addr"`
}

func queuesJSONOf(list []proto.Queue, total int) queuesJSON {
	out := queuesJSON{Keys: []queueKeyJSON{}, Total: total}
	for _, q := range list {
		k := queueKeyJSON{Key: q.Key, Held: q.Held, Waiters: []queueWaiterJSON{}}
		if q.Held {
			k.Token = ptrTo(q.Token)
			k.LeaseLeftSeconds = ptrTo(secondsJSON(q.LeaseLeft))
		}
		for i, w := range q.Waiters {
			wj := queueWaiterJSON{Position: i + 1, WaitedSeconds: secondsJSON(w.Waited)}
			if w.Addr != "" {
				wj.Addr = ptrTo(w.Addr)
			}
			k.Waiters = append(k.Waiters, wj)
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

// renderQueues draws the queues: for a person, one row per key with its
// waiters under it and a summary line; plain, one line per waiter (the
// key and holder repeated, every cell filled), so that each line stands
// on its own for grep and awk. An empty list draws nothing: the caller
// says so on a terminal.
func renderQueues(w io.Writer, list []proto.Queue, total int, s renderStyle) error {
	if len(list) == 0 {
		return nil
	}
	p := newPalette(w, s.Color)
	t := grid{header: []string{"KEY", "HOLDER", "LEASE", "WAITER", "WAITED", "FROM"},
		shrink: []shrinkable{{col: 5, middle: true}, {col: 0}}}
	strong := func(c string) string { return p.strong.Render(c) }
	faint := func(c string) string { return p.faint.Render(c) }
	warn := func(c string) string { return p.warn.Render(c) }
	held, waiters := 0, 0
	var longest time.Duration
	longestKey := ""
	for _, q := range list {
		// Escaped before anything measures it.
		key := printable(q.Key)
		token, lease := cellNone, cellNone
		if q.Held {
			held++
			token = strconv.FormatUint(q.Token, 10)
			lease = humanDuration(q.LeaseLeft)
		}
		if !s.Table {
			if len(q.Waiters) == 0 {
				t.add([]string{key, token, lease, cellNone, cellNone, cellNone})
			}
			for i, wt := range q.Waiters {
				t.add([]string{key, token, lease, strconv.Itoa(i + 1), humanDuration(wt.Waited), addrOrNone(wt.Addr)})
			}
			continue
		}
		if len(q.Waiters) == 0 {
			t.add([]string{key, token, lease, "", "", ""}, strong)
		}
		for i, wt := range q.Waiters {
			waiters++
			if wt.Waited > longest {
				longest, longestKey = wt.Waited, key
			}
			var waited func(string) string
			if wt.Waited >= longWait {
				waited = warn
			}
			k, tok, ls := "", "", ""
			if i == 0 {
				k, tok, ls = key, token, lease
			}
			t.add([]string{k, tok, ls, "#" + strconv.Itoa(i+1), humanDuration(wt.Waited), addrOrNone(wt.Addr)},
				strong, nil, nil, nil, waited, faint)
		}
	}
	if err := t.draw(w, s, p); err != nil || !s.Table {
		return err
	}
	parts := []string{countOf(held, "key", "keys") + " held", countOf(waiters, "waiter", "waiters")}
	if waiters > 0 {
		parts = append(parts, fmt.Sprintf("longest wait %s (%s)", humanDuration(longest), longestKey))
	}
	if total > len(list) {
		parts = append(parts, p.warn.Render(fmt.Sprintf("showing %d of %d keys: narrow with --prefix", len(list), total)))
	}
	_, err := io.WriteString(w, summaryLine(parts, s))
	return err
}

// emptyQueues is what queues says, on a terminal only, when nothing
// matches.
func emptyQueues(pattern string) string {
	switch {
	case pattern == "*":
		return "no keys are held or waited on"
	case strings.HasSuffix(pattern, "*"):
		return fmt.Sprintf("no keys starting with %q are held or waited on", strings.TrimSuffix(pattern, "*"))
	}
	return fmt.Sprintf("%q is neither held nor waited on", pattern)
}

// addrOrNone is a waiter's address for a table cell.
func addrOrNone(a string) string {
	if a == "" {
		return cellNone
	}
	return printable(a)
}

// countOf is n and the noun that goes with it: "1 key", "2 keys".
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
