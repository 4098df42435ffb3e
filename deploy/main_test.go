package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// repoRoot is the repository's root: go test runs in deploy/.
var repoRoot, _ = filepath.Abs("..")

// binDir holds lockd and lockctl, built once by TestMain with the
// Makefile's tags.
var binDir string

const buildTags = "urfave_cli_no_docs,netgo,osusergo"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockd-deploy-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-tags", buildTags, "-o", dir, "./cmd/lockd", "./cmd/lockctl")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "deploy: building lockd and lockctl:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// need makes sure the programs are on PATH, installing the Debian
// package that carries them once (scripts/need.sh). A test that needs
// one and cannot have it fails: it does not skip.
func need(t *testing.T, tools ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "scripts", "need.sh"), tools...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("this test needs %s: %v\n%s", strings.Join(tools, ", "), err, out)
	}
}

// freeAddrs returns n loopback addresses whose ports were free a moment
// ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// proc is a process a test started; it is killed when the test ends,
// and its output kept in a file of the test's directory for the log of
// a failure.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func start(t *testing.T, name string, path string, args ...string) *proc {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			out, _ := os.ReadFile(log)
			t.Logf("%s's output:\n%s", name, lastLines(out, 30))
		}
	})
	return p
}

// kill ends the process at once (SIGKILL) and waits for it.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond every step until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(step)
	}
}

// httpGet returns the status and body of url, or an error.
func httpGet(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

// run runs a command and returns its combined output, failing the test
// when it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, lastLines(out, 40))
	}
	return string(out)
}
