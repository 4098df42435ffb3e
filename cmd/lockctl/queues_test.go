package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/olekukonko/tablewriter/pkg/twwidth"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// fakeQueues answers K and Q from a fixed set of queues.
type fakeQueues map[string]proto.Queue

func (f fakeQueues) Keys(ctx context.Context, pattern string) ([]string, int, error) {
	var keys []string
	for k := range f {
		if proto.MatchKeys(pattern, k) {
			keys = append(keys, k)
		}
	}
	return keys, len(keys), nil
}

func (f fakeQueues) QueueInfo(ctx context.Context, key string) (client.QueueInfo, error) {
	q, err := f.Queue(ctx, key)
	return client.QueueInfo{Queue: q}, err
}

// infos reads queues as the client's QueueInfo, saying nothing more.
func infos(qs []proto.Queue) []client.QueueInfo {
	out := make([]client.QueueInfo, len(qs))
	for i, q := range qs {
		out[i] = client.QueueInfo{Queue: q}
	}
	return out
}

func (f fakeQueues) Queue(ctx context.Context, key string) (proto.Queue, error) {
	if q, ok := f[key]; ok {
		return q, nil
	}
	return proto.Queue{Key: key}, nil
}

func TestFetchQueuesSortsAndDropsFreedKeys(t *testing.T) {
	f := fakeQueues{
		"b":    {Key: "b", Held: true, Token: 2},
		"a":    {Key: "a", Held: true, Token: 1},
		"gone": {Key: "gone"}, // freed between K and Q
	}
	list, total, err := fetchQueues(context.Background(), f, "*")
	if err != nil || len(list) != 2 || list[0].Key != "a" || list[1].Key != "b" || total != 2 {
		t.Fatalf("got %+v, total %d, %v", list, total, err)
	}
}

func TestQueuesCommand(t *testing.T) {
	tc := startCluster(t, 1)
	addr := tc.addrs[0]
	// Nothing held: nothing on stdout (| wc -l counts 0), and, piped,
	// nothing on stderr either.
	code, out, errOut := lockctl(t, "--addr", addr, "queues")
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("empty: exit %d %q %s", code, out, errOut)
	}
	code, out, _ = lockctl(t, "--addr", addr, "queues", "--json")
	if code != 0 || out != "{\"keys\":[],\"total\":0}\n" {
		t.Fatalf("empty --json: exit %d %q", code, out)
	}

	cl, err := client.New([]string{addr}, client.Options{Name: "alice@ci-1:42"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	held, err := cl.Acquire(ctx, "deploy", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, "backup", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	// Two waiters, on connections of their own, in a known order.
	for i := range 2 {
		w, err := client.New([]string{addr}, client.Options{ConnsPerAddr: 1, Name: "waiter-" + strconv.Itoa(i+1)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go w.Acquire(wctx, "deploy", time.Minute, 0)
		waitQueueLen(t, cl, "deploy", i+1)
	}

	code, out, errOut = lockctl(t, "--addr", addr, "queues")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "backup ") || !strings.HasPrefix(lines[2], "deploy ") || !strings.HasPrefix(lines[3], "deploy ") {
		t.Fatalf("queues:\n%s", out)
	}
	if f := strings.Fields(lines[2]); f[1] != "1/1" || f[2] != strconv.FormatUint(held.Token, 10) || f[3] != "alice@ci-1:42" || f[5] != "1" {
		t.Errorf("first waiter line: %q", lines[2])
	}
	code, out, _ = lockctl(t, "--addr", addr, "-o", "wide", "queues", "--key", "deploy")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 3 ||
		!strings.HasSuffix(lines[1], " waiter-1") || !strings.HasSuffix(lines[2], " waiter-2") {
		t.Errorf("-o wide names the waiters: exit %d\n%s", code, out)
	}

	code, out, _ = lockctl(t, "--addr", addr, "queues", "--key", "deploy", "--json")
	var got queuesJSON
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	if len(got.Keys) != 1 {
		t.Fatalf("--key deploy: %s", out)
	}
	k := got.Keys[0]
	if k.Key != "deploy" || !k.Held || *k.Token != held.Token || len(k.Waiters) != 2 ||
		k.Waiters[0].Position != 1 || k.Waiters[0].WaitedSeconds < k.Waiters[1].WaitedSeconds || k.Waiters[0].Addr == nil {
		t.Errorf("deploy: %s", out)
	}
	if k.Limit != 1 || len(k.Holders) != 1 || k.Holders[0].Token != held.Token || *k.Holders[0].ID != held.ID ||
		*k.Holders[0].Name != "alice@ci-1:42" || *k.Waiters[1].Name != "waiter-2" {
		t.Errorf("deploy's holder and waiters by name: %s", out)
	}

	code, out, _ = lockctl(t, "--addr", addr, "queues", "--prefix", "back")
	if code != 0 || !strings.Contains(out, "backup") || strings.Contains(out, "deploy") {
		t.Errorf("--prefix back: exit %d\n%s", code, out)
	}
	if code, _, _ := lockctl(t, "--addr", addr, "queues", "--key", "a", "--prefix", "b"); code != exitUsage {
		t.Errorf("--key with --prefix: exit %d, want 2", code)
	}
}

// waitQueueLen waits until key has n waiters.
func waitQueueLen(t *testing.T, cl *client.Client, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, err := cl.Queue(context.Background(), key)
		if err == nil && len(q.Waiters) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %d waiters: %+v %v", key, n, q, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hostileQueues holds keys, waiter addresses and holder and waiter names
// that must not reach a terminal raw, and two that may (CJK, plain
// ASCII).
func hostileQueues() []proto.Queue {
	return []proto.Queue{
		{Key: rlo, Held: true, Token: tokA, LeaseLeft: 29500 * time.Millisecond,
			Holders: []proto.QueueHolder{{Token: tokA, LeaseLeft: 29500 * time.Millisecond, ID: isolate + "#1"}},
			Waiters: []proto.QueueWaiter{
				{Waited: 14200 * time.Millisecond, Addr: "10.0.0.9:51234\u202e", ID: c1 + "#2"},
				{Waited: 400 * time.Millisecond, Addr: sgr + ":1", ID: sgr + "#3"},
			}},
		{Key: cjk, Held: true, Token: tokB, LeaseLeft: 12 * time.Second,
			Holders: []proto.QueueHolder{{Token: tokB, LeaseLeft: 12 * time.Second, ID: cjk + "#4"}}},
		{Key: c1, Waiters: []proto.QueueWaiter{{Waited: 2 * time.Second, Addr: isolate}}},
		{Key: invalid, Held: true, Token: 1, LeaseLeft: time.Second},
		{Key: backslash, Held: true, Token: 2, LeaseLeft: time.Second},
		{Key: lineSep + zeroWidth, Held: true, Token: 3, LeaseLeft: time.Second},
		{Key: "plain", Held: true, Token: 4, LeaseLeft: time.Second},
	}
}

func TestQueuesNeverPrintAHostileRune(t *testing.T) {
	fixedWidths(t)
	var words []string
	for _, q := range hostileQueues() {
		words = append(words, q.Key)
		for _, w := range q.Waiters {
			words = append(words, w.Addr, w.ID)
		}
		for _, h := range q.Holders {
			words = append(words, h.ID)
		}
	}
	for _, tc := range []struct {
		file  string
		style renderStyle
	}{
		{"queues_hostile_table.golden", renderStyle{Table: true}},
		{"queues_hostile_plain.golden", renderStyle{}},
		{"", renderStyle{Table: true, Color: true}},
		{"", renderStyle{Table: true, Wide: true}},
	} {
		var b bytes.Buffer
		if err := renderQueues(&b, infos(hostileQueues()), 7, tc.style); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		assertNoHostileBytes(t, fmt.Sprintf("%+v", tc.style), out, tc.style.Color, words...)
		for _, want := range []string{`deploy\u202e`, `10.0.0.9:51234\u202e`, `\x1b[31mred:1`, `nel\u0085csi\u009b`, `inv\xffalid\xc3`, `back\\slash`, cjk, "plain",
			`\u2066yolped\u2069 `} {
			if !strings.Contains(out, want) {
				t.Errorf("%+v lacks %s:\n%s", tc.style, want, out)
			}
		}
		if tc.style.Wide && (!strings.Contains(out, `nel\u0085csi\u009b`+"\n") || !strings.Contains(out, `\x1b[31mred`+"\n")) {
			t.Errorf("wide lacks the waiters' names, escaped:\n%s", out)
		}
		if tc.file != "" {
			golden(t, tc.file, b.Bytes())
		}
		if tc.style.Table {
			if !strings.Contains(out, `longest wait 14.2s (deploy\u202e)`) {
				t.Errorf("summary:\n%s", out)
			}
			continue
		}
		// Plain columns stay aligned, as a terminal shows them: the
		// escaped cells were measured in columns.
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 9 {
			t.Fatalf("want a header and 8 lines:\n%s", out)
		}
		starts := columnStarts(lines[0])
		for _, l := range lines[1:] {
			r := byColumn(l)
			for _, s := range starts[1:] {
				if s >= len(r) || r[s-1] != ' ' || r[s] == ' ' {
					t.Errorf("line %q does not start a column at %d (header %q)", l, s, lines[0])
					break
				}
			}
		}
	}

	// JSON keeps the keys and addresses exact, and still prints none raw.
	var b bytes.Buffer
	if err := printJSON(&b, queuesJSONOf(infos(hostileQueues()), 7)); err != nil {
		t.Fatal(err)
	}
	assertNoHostileBytes(t, "JSON", b.String(), false)
	var got queuesJSON
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for i, q := range hostileQueues() {
		want := strings.ToValidUTF8(q.Key, "\ufffd") // as encoding/json has always had it
		if q.Key == invalid {
			want = "inv\ufffdalid\ufffd"
		}
		if got.Keys[i].Key != want {
			t.Errorf("key %q reads back as %q", q.Key, got.Keys[i].Key)
		}
		for j, w := range q.Waiters {
			if a := got.Keys[i].Waiters[j].Addr; a == nil || *a != w.Addr {
				t.Errorf("address %q reads back as %v", w.Addr, a)
			}
		}
	}
}

// columnStarts is the rune offset where each column of a plain header
// begins: columns are two or more spaces apart.
func columnStarts(header string) []int {
	starts := []int{0}
	r := []rune(header)
	for i := 2; i < len(r); i++ {
		if r[i] != ' ' && r[i-1] == ' ' && r[i-2] == ' ' {
			starts = append(starts, i)
		}
	}
	return starts
}

// byColumn is a line as the terminal shows it: one entry per column, a
// wide rune in the first of its columns and 0 in the next.
func byColumn(line string) []rune {
	var cols []rune
	for _, r := range line {
		cols = append(cols, r)
		for range twwidth.Width(string(r)) - 1 {
			cols = append(cols, 0)
		}
	}
	return cols
}

func TestQueuesCommandHostileKeys(t *testing.T) {
	tc := startCluster(t, 1)
	addr := tc.addrs[0]
	cl, err := client.New([]string{addr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	keys := []string{rlo, isolate, c1, invalid, backslash, looksLike, cjk}
	for _, k := range keys {
		if _, err := cl.Acquire(ctx, k, time.Minute, 0); err != nil {
			t.Fatalf("%q: %v", k, err)
		}
	}
	w, err := client.New([]string{addr}, client.Options{ConnsPerAddr: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go w.Acquire(wctx, rlo, time.Minute, 0)
	waitQueueLen(t, cl, rlo, 1)

	code, out, errOut := lockctl(t, "--addr", addr, "queues")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	assertNoHostileBytes(t, "queues", out, false, keys...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1+len(keys) {
		t.Fatalf("want a header and %d keys:\n%s", len(keys), out)
	}
	// One line per key, escaped; the key that looks like an escape and the
	// key it looks like print apart.
	for _, want := range []string{`back\\slash `, `deploy\\u202e `, `deploy\u202e `, `inv\xffalid\xc3 `, `nel\u0085csi\u009b `, `\u2066yolped\u2069 `, cjk + " "} {
		if !strings.Contains(out, "\n"+want) {
			t.Errorf("no line starts %q:\n%s", want, out)
		}
	}

	code, out, _ = lockctl(t, "--addr", addr, "queues", "--key", rlo, "--json")
	var got queuesJSON
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	assertNoHostileBytes(t, "--json", out, false)
	if len(got.Keys) != 1 || got.Keys[0].Key != rlo || len(got.Keys[0].Waiters) != 1 {
		t.Errorf("--key %q --json: %s", rlo, out)
	}
}
