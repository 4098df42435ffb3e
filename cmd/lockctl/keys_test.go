package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

func TestExecSeveralKeysExportsEveryToken(t *testing.T) {
	f := startFake(t)
	t.Setenv("LOCKD_TOKEN_3", "stale") // from an outer exec with more keys
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "exec", "--key", "a", "--key", "b,c", "--",
		"sh", "-c", `echo "$LOCKD_KEY $LOCKD_TOKEN|$LOCKD_KEY_1 $LOCKD_TOKEN_1|$LOCKD_KEY_2 $LOCKD_TOKEN_2|${LOCKD_TOKEN_3-unset}"`)
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	first := strconv.FormatUint(f.next-2, 10)
	second := strconv.FormatUint(f.next-1, 10)
	want := "a " + first + "|a " + first + "|b,c " + second + "|unset\n"
	if stdout != want {
		t.Errorf("the command printed %q, want %q", stdout, want)
	}
	if n := f.count("A a 30 0 key=b,c"); n != 1 {
		t.Errorf("requests %q: want one acquire of both keys, the comma kept", f.requests())
	}
	if f.count("R a "+first) != 1 || f.count("R b,c "+second) != 1 {
		t.Errorf("requests %q: want both keys released", f.requests())
	}
}

func TestExecOneKeyExportsNumberedVariablesToo(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "exec", "--key", "job", "--",
		"sh", "-c", `echo "$LOCKD_KEY_1 $LOCKD_TOKEN_1 ${LOCKD_KEY_2-unset}"`)
	want := "job " + strconv.FormatUint(f.next-1, 10) + " unset\n"
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout %q (want %q), stderr %q", code, stdout, want, stderr)
	}
	if n := f.count("A job 30 0"); n != 1 || strings.Contains(strings.Join(f.requests(), "\n"), "key=") {
		t.Errorf("requests %q: one key goes as before", f.requests())
	}
}

func TestSharedSendsAReader(t *testing.T) {
	f := startFake(t)
	for _, cmd := range [][]string{
		{"acquire", "--key", "cfg", "--shared"},
		{"exec", "--shared", "--key", "cfg", "--", "true"},
	} {
		code, _, stderr := lockctl(t, append([]string{"--addr", f.addr}, cmd...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d; stderr %q", cmd[0], code, stderr)
		}
	}
	if n := f.count("A cfg 30 0 mode=shared"); n != 2 {
		t.Errorf("requests %q: want two readers", f.requests())
	}
	// A writer does not get past the readers.
	code, _, stderr := lockctl(t, "--addr", f.addr, "acquire", "--key", "cfg", "-n")
	if code != exitTimeout {
		t.Errorf("a writer beside a reader: exit %d, stderr %q", code, stderr)
	}
}

func TestAcquireSeveralKeysPrintsATokenALine(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "acquire", "--key", "a", "--key", "b", "--key", "c")
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("stdout %q: want three tokens", stdout)
	}
	for i, k := range []string{"a", "b", "c"} {
		tok, _ := f.holder(k)
		if lines[i] != strconv.FormatUint(tok, 10) {
			t.Errorf("line %d %q, want %s's token %d", i+1, lines[i], k, tok)
		}
	}
	code, stdout, _ = lockctl(t, "--addr", f.addr, "--json", "acquire", "--key", "d", "--key", "e", "--shared")
	var got []lockJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || len(got) != 2 || got[1].Key != "e" || !got[1].Shared {
		t.Errorf("--json: exit %d, %q", code, stdout)
	}
	// All or none: one key busy, none taken.
	f.busy["z"] = true
	code, _, stderr = lockctl(t, "--addr", f.addr, "acquire", "--key", "y", "--key", "z", "-n")
	if code != exitTimeout || !strings.Contains(stderr, `one of "y" and "z" at least is held by another client, and none was taken`) {
		t.Errorf("a busy key: exit %d, stderr %q", code, stderr)
	}
	if _, held := f.holder("y"); held {
		t.Error("y was taken although z was busy")
	}
}

func TestHoldSetLostOneKey(t *testing.T) {
	f := startFake(t)
	f.lose["b"] = true
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "--failure-timeout", "100ms", "hold", "--key", "a", "--key", "b", "--lease", "300ms")
	if code != exitLost {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitLost, stderr)
	}
	if len(strings.Fields(stdout)) != 2 {
		t.Errorf("stdout %q: want both tokens", stdout)
	}
	if !strings.Contains(stderr, `lost the lock on "b"`) || !strings.Contains(stderr, `(one of "a" and "b", all given back)`) {
		t.Errorf("stderr %q: want the lost key named", stderr)
	}
	if _, held := f.holder("a"); held {
		t.Error("a is still held after b was lost")
	}
}

func TestKeysUsageErrors(t *testing.T) {
	f := startFake(t)
	many := []string{"--addr", f.addr, "acquire"}
	for i := range 17 {
		many = append(many, "--key", "k"+strconv.Itoa(i))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{many, "17 keys given: one request takes at most 16 --key"},
		{[]string{"--addr", f.addr, "exec", "--key", "a", "--key", "b", "--key", "a", "--", "true"}, `--key "a" is given twice (keys 1 and 3)`},
		{[]string{"--addr", f.addr, "hold", "--key", "a", "--shared", "--limit", "3"}, "--shared and --limit 3 do not go together"},
		{[]string{"--addr", f.addr, "acquire", "--shared"}, "--key is required"},
	} {
		code, _, stderr := lockctl(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args[2:], code, stderr, exitUsage, tc.want)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Errorf("a usage error sent %q", reqs)
	}
}

// queues shows a reader key's mode and the sets that hold and wait, in
// columns of their own that show only when a key listed has them.
func TestQueuesShowsModesAndSets(t *testing.T) {
	list := []client.QueueInfo{
		{Queue: proto.Queue{Key: "a", Held: true, Token: 7, LeaseLeft: 20 * time.Second,
			Holders: []proto.QueueHolder{{Token: 7, LeaseLeft: 20 * time.Second}},
			Waiting: 1, Waiters: []proto.QueueWaiter{{Waited: time.Second}}},
			HolderInfo: []client.HolderInfo{{Set: 7}},
			WaiterInfo: []client.WaiterInfo{{Shared: true, Set: []string{"a", "c"}}}},
		{Queue: proto.Queue{Key: "b", Held: true, Token: 8, LeaseLeft: 20 * time.Second,
			Holders: []proto.QueueHolder{{Token: 8, LeaseLeft: 20 * time.Second}}},
			HolderInfo: []client.HolderInfo{{Set: 7}}},
		{Queue: proto.Queue{Key: "cfg", Held: true, Token: 9, LeaseLeft: 20 * time.Second, Limit: 1,
			Holders: []proto.QueueHolder{{Token: 9, LeaseLeft: 20 * time.Second}, {Token: 10, LeaseLeft: 21 * time.Second}}},
			Shared: true, HolderInfo: make([]client.HolderInfo, 2)},
	}
	var b bytes.Buffer
	if err := renderQueues(&b, list, 3, renderStyle{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"MODE", "SET", "WMODE", "WSET", "a+b", "a+c", "shared"} {
		if !strings.Contains(out, want) {
			t.Errorf("queues lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if cfg := lines[len(lines)-1]; !strings.HasPrefix(cfg, "cfg") || !strings.Contains(cfg, "shared") || !strings.HasPrefix(strings.Join(strings.Fields(cfg)[:2], " "), "cfg 2") {
		t.Errorf("the second reader's row %q", cfg)
	}
	var j bytes.Buffer
	printJSON(&j, queuesJSONOf(list, 3))
	for _, want := range []string{`"mode":"shared"`, `"set":["a","b"],"set_id":"7"`, `"set":["a","c"]`} {
		if !strings.Contains(j.String(), want) {
			t.Errorf("--json lacks %s: %s", want, j.String())
		}
	}
	// Without readers or sets, the columns stay away.
	b.Reset()
	renderQueues(&b, list[:0:0], 0, renderStyle{})
	b.Reset()
	renderQueues(&b, infos([]proto.Queue{list[0].Queue}), 1, renderStyle{})
	if strings.Contains(b.String(), "MODE") || strings.Contains(b.String(), "SET") {
		t.Errorf("columns of readers and sets for a plain lock:\n%s", b.String())
	}
}
