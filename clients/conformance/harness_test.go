package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binaries the harness builds once per test binary.
var (
	repoRoot string
	lockdBin string
	goDriver string
)

const buildTags = "urfave_cli_no_docs,netgo,osusergo"

// binDirEnv names the directory of binaries a parent run built.
const binDirEnv = "LOCKD_CONFORMANCE_BIN_DIR"

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	repoRoot = filepath.Dir(filepath.Dir(wd))
	if dir := os.Getenv(binDirEnv); dir != "" {
		// A run of this binary started by TestHarnessCatches: the
		// parent built them already.
		lockdBin, goDriver = filepath.Join(dir, "lockd"), filepath.Join(dir, "godriver")
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "lockd-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	lockdBin = filepath.Join(dir, "lockd")
	goDriver = filepath.Join(dir, "godriver")
	for _, b := range []struct{ out, pkg string }{{lockdBin, "./cmd/lockd"}, {goDriver, "./clients/conformance/godriver"}} {
		cmd := exec.Command("go", "build", "-tags", buildTags, "-o", b.out, b.pkg)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: go build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// res is one result line of a driver.
type res map[string]any

func (r res) ok() bool { v, _ := r["ok"].(bool); return v }

func (r res) errKind() string { v, _ := r["error"].(string); return v }

func (r res) str(k string) string {
	switch v := r[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	}
	b, _ := json.Marshal(r[k])
	return string(b)
}

func (r res) num(k string) float64 { v, _ := r[k].(float64); return v }

func (r res) ms() time.Duration { return time.Duration(r.num("ms") * float64(time.Millisecond)) }

func (r res) String() string { b, _ := json.Marshal(map[string]any(r)); return string(b) }

// unsupported is the error kind, and the table cell, of a case a client
// cannot take yet.
const unsupported = "unsupported"

// driver is one running driver process.
type driver struct {
	t    *testing.T
	name string
	spec driverSpec
	cmd  *exec.Cmd
	in   io.WriteCloser

	mu      sync.Mutex
	next    int
	pending map[int]chan res
	events  []res
	evCh    chan struct{} // closed and replaced on every event
	stderr  bytes.Buffer
	exited  chan struct{}
	opened  res
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// startDriver starts spec's driver for the case t runs; it is closed and
// killed when t ends.
func startDriver(t *testing.T, spec driverSpec, extraEnv ...string) *driver {
	t.Helper()
	argv := append([]string(nil), spec.argv...)
	for i, a := range argv {
		if a == "{go}" {
			argv[i] = goDriver
		}
	}
	d := &driver{t: t, name: spec.name, spec: spec, pending: map[int]chan res{}, evCh: make(chan struct{}), exited: make(chan struct{})}
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Dir = repoRoot
	d.cmd.Env = append(append(os.Environ(), spec.env...), extraEnv...)
	d.cmd.Stderr = lockedWriter{&d.mu, &d.stderr}
	in, err := d.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.in = in
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start the %s driver (%s): %v", spec.name, strings.Join(argv, " "), err)
	}
	go d.read(out)
	t.Cleanup(d.stop)
	return d
}

func (d *driver) read(out io.Reader) {
	defer close(d.exited)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var r res
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			d.mu.Lock()
			fmt.Fprintf(&d.stderr, "[harness] stdout line is not JSON: %q\n", sc.Text())
			d.mu.Unlock()
			continue
		}
		d.mu.Lock()
		if _, ok := r["event"]; ok {
			d.events = append(d.events, r)
			close(d.evCh)
			d.evCh = make(chan struct{})
		} else if id, ok := r["id"].(float64); ok {
			if ch := d.pending[int(id)]; ch != nil {
				ch <- r
				delete(d.pending, int(id))
			}
		}
		d.mu.Unlock()
	}
}

func (d *driver) stop() {
	select {
	case <-d.exited:
	default:
		done := d.send(map[string]any{"cmd": "close"})
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		case <-d.exited:
		}
	}
	d.in.Close()
	wait := make(chan error, 1)
	go func() { wait <- d.cmd.Wait() }()
	select {
	case <-wait:
	case <-time.After(3 * time.Second):
		d.cmd.Process.Kill()
		<-wait
		d.t.Errorf("the %s driver did not exit within 3 s of its stdin closing (DRIVER.md: within a second)", d.name)
	}
	if d.t.Failed() {
		d.mu.Lock()
		d.t.Logf("%s driver stderr:\n%s", d.name, d.stderr.String())
		d.mu.Unlock()
	}
}

// kill ends the driver at once (SIGKILL), as a crash of the program
// would: its client releases and closes nothing.
func (d *driver) kill() {
	d.cmd.Process.Kill()
	<-d.exited
}

// send writes cmd with a fresh id and returns the channel its result
// comes on.
func (d *driver) send(cmd map[string]any) <-chan res {
	ch := make(chan res, 1)
	d.mu.Lock()
	d.next++
	id := d.next
	cmd["id"] = id
	d.pending[id] = ch
	d.mu.Unlock()
	b, _ := json.Marshal(cmd)
	d.t.Logf("%s <- %s", d.name, b)
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		d.t.Logf("writing to the %s driver: %v", d.name, err)
	}
	return ch
}

// wait returns the result on ch, failing the case after limit.
func (d *driver) wait(ch <-chan res, limit time.Duration) res {
	d.t.Helper()
	select {
	case r := <-ch:
		d.t.Logf("%s -> %s", d.name, r)
		return r
	case <-d.exited:
		select {
		case r := <-ch:
			return r
		default:
		}
		d.t.Fatalf("the %s driver closed its stdout before answering: it exited or crashed (its stderr follows)", d.name)
	case <-time.After(limit):
		d.t.Fatalf("the %s driver did not answer within %s", d.name, limit)
	}
	return nil
}

// do sends cmd and waits up to 30 s for its result.
func (d *driver) do(cmd map[string]any) res {
	d.t.Helper()
	return d.wait(d.send(cmd), 30*time.Second)
}

// must is do, failing the case unless the command succeeded; a command
// the driver does not support skips the case as unsupported.
func (d *driver) must(cmd map[string]any) res {
	d.t.Helper()
	r := d.do(cmd)
	d.need(r)
	if !r.ok() {
		d.t.Fatalf("%s failed: %s", cmd["cmd"], r)
	}
	return r
}

// need skips the case when r says the driver does not know the command.
func (d *driver) need(r res) {
	d.t.Helper()
	if r.errKind() == unsupported {
		d.t.Skipf("%s: %s", unsupported, r.str("message"))
	}
}

// open opens the client with opts and addrs; it skips the case when the
// driver lists a behaviour the case needs among open's "unsupported".
func (d *driver) open(addrs []string, opts map[string]any, needs ...string) res {
	d.t.Helper()
	cmd := map[string]any{"cmd": "open", "addrs": addrs}
	for k, v := range opts {
		cmd[k] = v
	}
	r := d.must(cmd)
	if lst, ok := r["unsupported"].([]any); ok {
		for _, n := range needs {
			for _, u := range lst {
				if u == n {
					d.t.Skipf("%s: the %s client does not do %q yet", unsupported, d.name, n)
				}
			}
		}
	}
	d.opened = r
	return r
}

// waitEvent waits until an event satisfying f arrives, up to limit.
func (d *driver) waitEvent(limit time.Duration, f func(res) bool) res {
	d.t.Helper()
	return d.waitEventFrom(0, limit, f)
}

// waitEventFrom is waitEvent among the events after the first seen.
func (d *driver) waitEventFrom(seen int, limit time.Duration, f func(res) bool) res {
	d.t.Helper()
	deadline := time.After(limit)
	for {
		d.mu.Lock()
		evs, ch := d.events, d.evCh
		d.mu.Unlock()
		for ; seen < len(evs); seen++ {
			if f(evs[seen]) {
				return evs[seen]
			}
		}
		select {
		case <-ch:
		case <-deadline:
			d.t.Fatalf("no such event from the %s driver within %s; events: %v", d.name, limit, evs)
		}
	}
}

// eventCount is how many events arrived so far.
func (d *driver) eventCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.events)
}

// sendSupported sends cmd and, when its result comes at once, skips the
// case if it says unsupported. For commands the case must answer on a
// scripted node before their results come.
func (d *driver) sendSupported(cmd map[string]any) <-chan res {
	d.t.Helper()
	ch := d.send(cmd)
	select {
	case r := <-ch:
		d.need(r)
		again := make(chan res, 1)
		again <- r
		return again
	case <-time.After(300 * time.Millisecond):
		return ch
	}
}
