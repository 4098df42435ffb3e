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
		Usage:     "show the held keys, their holders and their waiters in order",
		UsageText: "lockctl queues [--key KEY | --prefix PREFIX]",
		Description: "Lists the keys that are held or waited on (all of them, one, or those\n" +
			"starting with a prefix), sorted by key. HELD is how many hold the key of how\n" +
			"many may (1/1 a lock, 2/3 a semaphore of three places); each holder comes\n" +
			"with its name (lockctl's --name, as it acquired), its fencing token and the\n" +
			"lease it has left, and the waiters follow in the order they will be granted:\n" +
			"how long each has waited and the address of its connection. Row i shows the\n" +
			"i-th holder beside the i-th waiter. A table on a terminal leaves the tokens\n" +
			"out to fit; piped output has them, one line per row with the key (and a\n" +
			"lock's holder) repeated, so grep and awk work line by line; -o wide adds the\n" +
			"waiters' names. When a key listed is held or waited on by readers (--shared)\n" +
			"or by sets (several --key), MODE and WMODE say which holder and waiter is a\n" +
			"reader (HELD is then the readers' count), and SET and WSET the keys taken\n" +
			"together; --json adds mode, set, set_id, place and value where they apply.\n\n" +
			"--json prints one object:\n" +
			"   {\"keys\":[{\"key\":\"deploy\",\"held\":true,\"token\":\"123\",\n" +
			"    \"lease_left_seconds\":29.5,\n" +
			"    \"limit\":1,\"holders\":[{\"token\":\"123\",\"lease_left_seconds\":29.5,\n" +
			"    \"name\":\"alice@ci-1:4242\",\"id\":\"alice@ci-1:4242#9f3c2a7d1e5b6a70-1\"}],\n" +
			"    \"waiters\":[{\"position\":1,\"waited_seconds\":3.2,\"addr\":\"10.0.0.9:51234\",\n" +
			"    \"name\":\"bob@ci-2:77\",\"id\":\"bob@ci-2:77#0c1d2e3f40516273-1\"}]}],\"total\":1}\n" +
			"token and lease_left_seconds are the oldest holder's, null when nobody\n" +
			"holds the key; name and id are null for an acquire that carried no id;\n" +
			"total counts the matching keys, which can exceed the listed ones (lockd\n" +
			"lists at most " +
			strconv.Itoa(proto.MaxListKeys) + ").\n\n" +
			"Examples:\n" +
			"   lockctl queues\n" +
			"   lockctl queues --key deploy\n" +
			"   lockctl queues --prefix jobs/ --json |\n" +
			"       jq '.keys[] | select(.waiters | length > 0)'\n\n" +
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
	cl, err := g.lockClient()
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
	QueueInfo(ctx context.Context, key string) (client.QueueInfo, error)
}

// fetchQueues lists the keys pattern selects, then asks for each one's
// queue, pipelining the requests on the client's connections. Keys freed
// in between are left out. The result is sorted by key.
func fetchQueues(ctx context.Context, cl queueSource, pattern string) ([]client.QueueInfo, int, error) {
	keys, total, err := cl.Keys(ctx, pattern)
	if err != nil {
		return nil, 0, err
	}
	got := make([]client.QueueInfo, len(keys))
	errs := make([]error, len(keys))
	sem := make(chan struct{}, queuesInFlight)
	var wg sync.WaitGroup
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got[i], errs[i] = cl.QueueInfo(ctx, k)
		})
	}
	wg.Wait()
	var list []client.QueueInfo
	for i, q := range got {
		if errs[i] != nil {
			return nil, 0, errs[i]
		}
		if q.Held || len(q.Waiters) > 0 {
			list = append(list, q)
		}
	}
	slices.SortFunc(list, func(a, b client.QueueInfo) int { return strings.Compare(a.Key, b.Key) })
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

// queueKeyJSON is one key. Token and lease_left_seconds are its oldest
// holder's, so that a script written for one holder per key reads a
// semaphore's key the same way; holders lists every holder.
type queueKeyJSON struct {
	Key              string            `json:"key"`
	Held             bool              `json:"held"`
	Token            *uint64           `json:"token,string"`
	LeaseLeftSeconds *float64          `json:"lease_left_seconds"`
	Limit            int               `json:"limit"`
	Mode             string            `json:"mode,omitempty"`
	Holders          []queueHolderJSON `json:"holders"`
	Waiters          []queueWaiterJSON `json:"waiters"`
}

type queueHolderJSON struct {
	Token            uint64   `json:"token,string"`
	LeaseLeftSeconds float64  `json:"lease_left_seconds"`
	Name             *string  `json:"name"`
	ID               *string  `json:"id"`
	Set              []string `json:"set,omitempty"`
	SetID            uint64   `json:"set_id,omitempty,string"`
	Place            int      `json:"place,omitempty"`
	Value            *string  `json:"value,omitempty"`
}

type queueWaiterJSON struct {
	Position      int      `json:"position"`
	WaitedSeconds float64  `json:"waited_seconds"`
	Addr          *string  `json:"addr"`
	Name          *string  `json:"name"`
	ID            *string  `json:"id"`
	Mode          string   `json:"mode,omitempty"`
	Set           []string `json:"set,omitempty"`
}

func queuesJSONOf(list []client.QueueInfo, total int) queuesJSON {
	out := queuesJSON{Keys: []queueKeyJSON{}, Total: total}
	sets := setsOf(list)
	for _, q := range list {
		k := queueKeyJSON{Key: q.Key, Held: q.Held, Limit: limitOf(q.Queue), Holders: []queueHolderJSON{}, Waiters: []queueWaiterJSON{}}
		if q.Shared {
			k.Mode = "shared"
		}
		if q.Held {
			k.Token = ptrTo(q.Token)
			k.LeaseLeftSeconds = ptrTo(seconds(q.LeaseLeft))
		}
		for i, h := range holdersOf(q.Queue) {
			hj := queueHolderJSON{Token: h.Token, LeaseLeftSeconds: seconds(h.LeaseLeft)}
			hj.Name, hj.ID = nameAndID(h.Name(), h.ID)
			if hi := holderInfo(q, i); hi.Set != 0 {
				hj.Set, hj.SetID = sets[hi.Set], hi.Set
			}
			hj.Place = holderInfo(q, i).Place
			if v := holderInfo(q, i).Value; v != "" {
				hj.Value = ptrTo(v)
			}
			k.Holders = append(k.Holders, hj)
		}
		for i, w := range q.Waiters {
			wj := queueWaiterJSON{Position: i + 1, WaitedSeconds: seconds(w.Waited)}
			if w.Addr != "" {
				wj.Addr = ptrTo(w.Addr)
			}
			wj.Name, wj.ID = nameAndID(w.Name(), w.ID)
			if wi := waiterInfo(q, i); wi.Shared {
				wj.Mode = "shared"
			}
			wj.Set = waiterInfo(q, i).Set
			k.Waiters = append(k.Waiters, wj)
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

// nameAndID are an acquire id and the name it leads with, for JSON: null
// when the acquire carried no id, or its id names nobody.
func nameAndID(name, id string) (*string, *string) {
	if id == "" {
		return nil, nil
	}
	if name == "" {
		return nil, ptrTo(id)
	}
	return ptrTo(name), ptrTo(id)
}

// limitOf is how many may hold q's key at once: 1 for a lock.
func limitOf(q proto.Queue) int {
	return max(q.Limit, 1)
}

// holdersOf lists q's holders, oldest first, whether the answer listed
// them (every answer ParseQueue reads does) or only gave the first.
func holdersOf(q proto.Queue) []proto.QueueHolder {
	if !q.Held {
		return nil
	}
	if len(q.Holders) == 0 {
		return []proto.QueueHolder{{Token: q.Token, LeaseLeft: q.LeaseLeft}}
	}
	return q.Holders
}

// nameCell is a holder's or waiter's name for a table cell.
func nameCell(name string) string {
	if name != "" {
		return printable(name)
	}
	return cellNone
}

// renderQueues draws the queues. Row i of a key shows its i-th holder
// beside its i-th waiter, as many rows as it has of the more numerous.
// For a person, the key and HELD (holders/limit) head its first row, and
// a summary line follows; plain, every row repeats the key and HELD and
// fills every cell, so that each line stands on its own for grep and
// awk, and a lock's one holder is repeated beside each of its waiters.
// A person's table leaves the tokens out, to fit the terminal; plain
// text has them, and wide adds the waiter's name. An empty list draws
// nothing: the caller says so on a terminal.
func renderQueues(w io.Writer, list []client.QueueInfo, total int, s renderStyle) error {
	if len(list) == 0 {
		return nil
	}
	p := newPalette(w, s.Color)
	// Every column; show picks those of this style. MODE and SET (the
	// holder's), WMODE and WSET (the waiter's) show only when a key
	// listed has readers or sets.
	const colToken, colFrom, colWaiterName, colMode, colSet, colWMode, colWSet = 2, 7, 8, 9, 10, 11, 12
	header := []string{"KEY", "HELD", "TOKEN", "HOLDER", "LEASE", "WAITER", "WAITED", "FROM", "WAITER-NAME", "MODE", "SET", "WMODE", "WSET"}
	modes, hasSets := kinds(list)
	sets := setsOf(list)
	show := func(col int) bool {
		switch col {
		case colToken:
			return !s.Table || s.Wide
		case colWaiterName:
			return s.Wide
		case colMode, colWMode:
			return modes
		case colSet, colWSet:
			return hasSets
		}
		return true
	}
	pick := func(cells []string) []string { return pickColumns(cells, show) }
	t := grid{header: pick(header)}
	// Cut FROM first, then HOLDER, then KEY.
	at := func(col int) int { return len(pick(header[:col])) }
	t.shrink = []int{at(colFrom), at(3), 0}

	strong := func(c string) string { return p.strong.Render(c) }
	faint := func(c string) string { return p.faint.Render(c) }
	warn := func(c string) string { return p.warn.Render(c) }
	blank := cellNone
	if s.Table {
		blank = ""
	}
	held, waiters := 0, 0
	var longest time.Duration
	longestKey := ""
	for _, q := range list {
		// Escaped before anything measures it.
		key := printable(q.Key)
		hs := holdersOf(q.Queue)
		if len(hs) > 0 {
			held++
		}
		count := strconv.Itoa(len(hs)) + "/" + strconv.Itoa(limitOf(q.Queue))
		if q.Shared {
			// Readers have no limit of their own: their count alone.
			count = strconv.Itoa(len(hs))
		}
		for i := range max(len(hs), len(q.Waiters), 1) {
			row := []string{key, count, blank, blank, blank, blank, blank, blank, blank, blank, blank, blank, blank}
			if s.Table && i > 0 {
				row[0], row[1] = "", ""
			}
			h := -1
			switch {
			case i < len(hs):
				h = i
			case !s.Table && len(hs) == 1 && limitOf(q.Queue) == 1 && !q.Shared:
				h = 0 // a lock's holder stands beside each of its waiters
			}
			if h >= 0 {
				row[2], row[3], row[4] = strconv.FormatUint(hs[h].Token, 10), nameCell(hs[h].Name()), humanDuration(hs[h].LeaseLeft)
				row[9] = "exclusive"
				if q.Shared {
					row[9] = "shared"
				}
				if id := holderInfo(q, h).Set; id != 0 {
					row[10] = setCell(sets[id], id)
				}
			}
			var waited func(string) string
			if i < len(q.Waiters) {
				wt := q.Waiters[i]
				pos := strconv.Itoa(i + 1)
				if s.Table {
					pos = "#" + pos
				}
				row[5], row[6], row[7], row[8] = pos, humanDuration(wt.Waited), addrOrNone(wt.Addr), nameCell(wt.Name())
				row[11] = "exclusive"
				if waiterInfo(q, i).Shared {
					row[11] = "shared"
				}
				if set := waiterInfo(q, i).Set; len(set) > 0 {
					row[12] = printable(strings.Join(set, "+"))
				}
				waiters++
				if wt.Waited > longest {
					longest, longestKey = wt.Waited, key
				}
				if wt.Waited >= longWait {
					waited = warn
				}
			}
			t.add(pick(row), pickColumns([]func(string) string{strong, nil, nil, nil, nil, nil, waited, faint, faint, nil, nil, nil, nil}, show)...)
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

// pickColumns keeps the cells of the columns show keeps.
func pickColumns[T any](cells []T, show func(col int) bool) []T {
	var out []T
	for i, c := range cells {
		if show(i) {
			out = append(out, c)
		}
	}
	return out
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

// kinds reports whether any key listed is held or waited on by readers,
// and whether any by sets: the columns that say so show only then.
func kinds(list []client.QueueInfo) (modes, sets bool) {
	for _, q := range list {
		modes = modes || q.Shared
		for _, h := range q.HolderInfo {
			sets = sets || h.Set != 0
		}
		for _, w := range q.WaiterInfo {
			modes = modes || w.Shared
			sets = sets || len(w.Set) > 0
		}
	}
	return modes, sets
}

// setsOf maps each set held among the keys listed to its keys listed.
func setsOf(list []client.QueueInfo) map[uint64][]string {
	sets := make(map[uint64][]string)
	for _, q := range list {
		for _, h := range q.HolderInfo {
			if h.Set != 0 {
				sets[h.Set] = append(sets[h.Set], q.Key)
			}
		}
	}
	return sets
}

// setCell names a holder's set: its keys listed, or, when only this one
// is, the set's id.
func setCell(keys []string, id uint64) string {
	if len(keys) > 1 {
		return printable(strings.Join(keys, "+"))
	}
	return "set " + strconv.FormatUint(id, 10)
}

// holderInfo and waiterInfo are what q says of its i-th holder or
// waiter beyond proto.Queue; zero when it says nothing.
func holderInfo(q client.QueueInfo, i int) client.HolderInfo {
	if i < len(q.HolderInfo) {
		return q.HolderInfo[i]
	}
	return client.HolderInfo{}
}

func waiterInfo(q client.QueueInfo, i int) client.WaiterInfo {
	if i < len(q.WaiterInfo) {
		return q.WaiterInfo[i]
	}
	return client.WaiterInfo{}
}
