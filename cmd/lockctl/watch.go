package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto"
)

// watchCommand prints a key's holders and waiters as they change.
type watchCommand struct {
	key string
}

func (c *watchCommand) Command() *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "print a key's holders and waiters each time they change",
		UsageText: "lockctl watch --key KEY [-o json]",
		Description: "Prints one line with KEY's state now, then one line after every change:\n" +
			"a grant, a release, an expiry, a waiter joining or leaving (renewals alone\n" +
			"change nothing). lockd pushes the changes; nothing polls. It follows the\n" +
			"active node through failovers and handoffs, printing the state there first.\n" +
			"When it loses the cluster (no node has served the watch for\n" +
			"--failure-timeout) it says so on stderr, since the last line printed may then\n" +
			"be out of date, and keeps trying; once a node serves it again it says so\n" +
			"there too and prints the state that node has. SIGINT (Ctrl-C) or SIGTERM\n" +
			"ends it, exit 0.\n\n" +
			"A line reads\n" +
			"   KEY free [waiting=N]\n" +
			"   KEY held token=TOKEN name=NAME lease_left=DURATION waiting=N [set=SET]\n" +
			"   KEY held 2/3 tokens=TOKEN,TOKEN waiting=N      (a semaphore: --limit)\n" +
			"   KEY held shared readers=N tokens=TOKEN,... waiting=N   (readers: --shared)\n" +
			"where set=SET marks a holder that took KEY with other keys at once (SET is\n" +
			"the token of the set's first key), and with -o json one object a line:\n" +
			"{\"key\",\"held\",\"mode\",\"limit\",\"holders\":[{\"token\",\"name\",\n" +
			"\"lease_left_seconds\",\"set\",\"place\"}],\"waiting\",\"waiters\":[{\"name\",\n" +
			"\"waited_seconds\",\"mode\",\"set\"}]}, tokens as strings; mode is \"shared\" or\n" +
			"\"exclusive\", and set and place appear where they apply (a waiter's set\n" +
			"lists the keys it asks for together).\n\n" +
			"Examples:\n" +
			"   lockctl watch --key deploy\n" +
			"   lockctl watch --key leader -o json | jq -r .holders[0].name\n\n" +
			exitCodesHelp(exitLine("0", "stopped by SIGINT or SIGTERM"),
				helpExitFailed, helpExitUsage, helpExitUnavailable, helpExitNoAnswer),
		Flags:  []cli.Flag{keyFlag(&c.key)},
		Action: c.Run,
	}
}

func (c *watchCommand) Run(cCtx *cli.Context) error {
	const name = "watch"
	g, err := globalsOf(cCtx)
	if err != nil {
		return err
	}
	if err := firstError(noArgs(cCtx), checkKey(name, c.key)); err != nil {
		return err
	}
	ctx, stop := withSignals(cCtx.Context)
	defer stop()
	cl, err := g.lockClient()
	if err != nil {
		return err
	}
	defer cl.Close()

	events, err := cl.WatchEvents(ctx, c.key)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return clientFailure(ctx, g, fmt.Sprintf("watching %q", c.key), err)
	}
	stale := false
	for ev := range events {
		if ev.Stale {
			stale = true
			fmt.Fprintf(g.Stderr, "lockctl: %s\n", printableText(ev.Err.Error()))
			continue
		}
		if stale {
			stale = false
			fmt.Fprintf(g.Stderr, "lockctl: watch %s is current again: %s serves it; its state follows\n", printable(c.key), printable(ev.Addr))
		}
		if err := printWatch(g.Stdout, g.JSON, ev.Queue); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return &exitError{code: exitFailed, what: fmt.Sprintf("the watch of %q ended", c.key),
		try: "run lockctl watch again"}
}

type watchJSON struct {
	Key     string            `json:"key"`
	Held    bool              `json:"held"`
	Mode    string            `json:"mode,omitempty"` // when held
	Limit   int               `json:"limit"`
	Holders []watchHolderJSON `json:"holders"`
	Waiting int               `json:"waiting"`
	Waiters []watchWaiterJSON `json:"waiters"`
}

type watchHolderJSON struct {
	Token     uint64  `json:"token,string"`
	Name      string  `json:"name"`
	LeaseLeft float64 `json:"lease_left_seconds"`
	Set       uint64  `json:"set,omitempty,string"`
	Place     int     `json:"place,omitempty"`
}

type watchWaiterJSON struct {
	Name   string   `json:"name"`
	Waited float64  `json:"waited_seconds"`
	Mode   string   `json:"mode"`
	Set    []string `json:"set,omitempty"`
}

// modeName is how lockctl names a mode: shared (readers) or exclusive.
func modeName(shared bool) string {
	if shared {
		return "shared"
	}
	return "exclusive"
}

// printWatch writes one state of a watched key as a line.
func printWatch(w io.Writer, asJSON bool, q proto.Queue) error {
	limit := max(q.Limit, 1)
	holders := q.Holders
	if q.Held && len(holders) == 0 {
		holders = []proto.QueueHolder{{Token: q.Token, LeaseLeft: q.LeaseLeft}}
	}
	waiting := max(q.Waiting, len(q.Waiters))
	if asJSON {
		v := watchJSON{Key: q.Key, Held: q.Held, Limit: limit, Waiting: waiting,
			Holders: []watchHolderJSON{}, Waiters: []watchWaiterJSON{}}
		if q.Held {
			v.Mode = modeName(q.Shared)
		}
		for _, h := range holders {
			v.Holders = append(v.Holders, watchHolderJSON{Token: h.Token, Name: h.Name(), LeaseLeft: seconds(h.LeaseLeft), Set: h.Set, Place: h.Place})
		}
		for _, wt := range q.Waiters {
			v.Waiters = append(v.Waiters, watchWaiterJSON{Name: wt.Name(), Waited: seconds(wt.Waited), Mode: modeName(wt.Shared), Set: wt.Set})
		}
		return printJSON(w, v)
	}
	var b strings.Builder
	b.WriteString(printable(q.Key))
	switch {
	case !q.Held:
		b.WriteString(" free")
		if waiting > 0 {
			fmt.Fprintf(&b, " waiting=%d", waiting)
		}
	case q.Shared:
		fmt.Fprintf(&b, " held shared readers=%d tokens=%s waiting=%d", len(holders), tokenList(holders), waiting)
	case limit > 1:
		fmt.Fprintf(&b, " held %d/%d tokens=%s waiting=%d", len(holders), limit, tokenList(holders), waiting)
	default:
		h := holders[0]
		name := h.Name()
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(&b, " held token=%d name=%s lease_left=%s waiting=%d", h.Token, printable(name), h.LeaseLeft.Round(100*time.Millisecond), waiting)
		if h.Set != 0 {
			fmt.Fprintf(&b, " set=%d", h.Set)
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// tokenList is the holders' tokens, comma-separated.
func tokenList(holders []proto.QueueHolder) string {
	tokens := make([]string, len(holders))
	for i, h := range holders {
		tokens[i] = strconv.FormatUint(h.Token, 10)
	}
	return strings.Join(tokens, ",")
}
