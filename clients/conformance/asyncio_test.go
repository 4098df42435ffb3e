package conformance

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// asyncHoldScript is a program as a user of lockd.AsyncClient writes it:
// a hold in the same async with as its client, a second hold of the key
// that waits and is given up by cancelling its task, and a failover
// under the hold. It says what it sees, one line at a time, and waits
// for a line on stdin where the test acts.
const asyncHoldScript = `
import asyncio, sys
import lockd

async def main(addrs):
    loop = asyncio.get_running_loop()
    async with lockd.AsyncClient(addrs, failure_timeout=0.6) as client, client.hold("async-k", lease=3) as lock:
        print("held", lock.token, flush=True)
        waiter = asyncio.ensure_future(client.hold("async-k", lease=3).__aenter__())
        while (await client.queue("async-k")).nwaiters == 0:
            await asyncio.sleep(0.01)
        print("queued", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        waiter.cancel()
        try:
            await waiter
            print("granted: the cancel was lost", flush=True)
        except asyncio.CancelledError:
            print("cancelled", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        # The test killed the active node: the hold renews on the next one.
        await asyncio.sleep(4)
        lock.check()
        print("still", lock.token, (await client.queue("async-k")).token, flush=True)
    print("ended", lock.reason, flush=True)

asyncio.run(main(sys.argv[1]))
`

// TestPythonAsyncHoldOnCluster runs asyncHoldScript against a 3-node
// cluster: the hold is granted, a cancelled waiter leaves the active
// node's queue (X), and the hold keeps its lock through a kill -9 of the
// active node.
func TestPythonAsyncHoldOnCluster(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if requiredClients()["python-asyncio"] {
			t.Fatalf("python-asyncio must run, and python3 is not on PATH: %v", err)
		}
		t.Skip("python3 is not on PATH")
	}
	t.Parallel()
	c := startCluster(t)
	gc, err := client.New(c.addrs(), client.Options{FailureTimeout: clusterFT})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gc.Close() })
	queue := func() (nwaiters int, token uint64) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		q, err := gc.Queue(ctx, "async-k")
		if err != nil {
			t.Fatalf("queue async-k: %v", err)
		}
		if q.Held {
			token = q.Token
		}
		return q.Waiting, token
	}

	cmd := exec.Command(py, "-c", asyncHoldScript, strings.Join(c.addrs(), ","))
	cmd.Env = append(cmd.Environ(), "PYTHONPATH="+filepath.Join(repoRoot, "clients", "python"))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	next := func(want string) []string {
		t.Helper()
		select {
		case l, ok := <-lines:
			f := strings.Fields(l)
			if !ok || len(f) == 0 || f[0] != want {
				t.Fatalf("the program said %q, want %s...; its stderr:\n%s", l, want, stderr.String())
			}
			return f
		case <-time.After(20 * time.Second):
			t.Fatalf("no %q line from the program in 20 s; its stderr:\n%s", want, stderr.String())
		}
		return nil
	}

	held := next("held")
	next("queued")
	if n, tok := queue(); n != 1 || tok == 0 {
		t.Fatalf("the active's queue: want the hold's token and 1 waiter, got token %d, %d waiters", tok, n)
	}
	io.WriteString(stdin, "cancel\n")
	next("cancelled")
	deadline := time.Now().Add(time.Second)
	for {
		n, _ := queue()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a second after its task was cancelled, the waiter is still in the active's queue: the client should withdraw it (X)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.nodes[0].kill()
	io.WriteString(stdin, "killed\n")
	still := next("still")
	if still[1] != held[1] || still[2] != held[1] {
		t.Errorf("after the failover the hold's token and the new active's holder are %s and %s, want %s (the hold kept its lock)", still[1], still[2], held[1])
	}
	if ended := next("ended"); ended[1] != "released" {
		t.Errorf("the hold ended with reason %s, want released", ended[1])
	}
}
