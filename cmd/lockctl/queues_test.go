package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

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
	code, out, errOut := lockctl(t, "--addr", addr, "queues")
	if code != 0 || out != "no keys are held or waited on\n" {
		t.Fatalf("empty: exit %d %q %s", code, out, errOut)
	}
	code, out, _ = lockctl(t, "--addr", addr, "queues", "--json")
	if code != 0 || out != "{\"keys\":[],\"total\":0}\n" {
		t.Fatalf("empty --json: exit %d %q", code, out)
	}

	cl, err := client.New([]string{addr}, client.Options{})
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
		w, err := client.New([]string{addr}, client.Options{ConnsPerAddr: 1})
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
	if f := strings.Fields(lines[2]); f[1] != strconv.FormatUint(held.Token, 10) || f[3] != "1" {
		t.Errorf("first waiter line: %q", lines[2])
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
