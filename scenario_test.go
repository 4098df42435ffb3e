package lockd_test

// The scenario suite: end-to-end scripts in testdata/*.txtar that start real
// lockd processes, drive them with lockctl and with raw protocol lines, and
// assert on what a user would see. Each script is one behaviour of the
// product, written to be read as documentation; see
// github.com/rogpeppe/go-internal/testscript for the script language and
// scenario_cmds_test.go for the commands this suite adds to it.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// binDir holds the lockd and lockctl binaries built once by TestMain. It
// is put first on every script's PATH, so scripts run `exec lockd` and
// `exec lockctl` as a user would.
var binDir string

// repoRoot is the module root: go test runs a package's tests in its
// directory, and this package is the root.
var repoRoot, _ = os.Getwd()

// suiteBudget bounds the whole suite. When it runs out, testscript sends
// SIGQUIT to every process a script started (a Go process then prints its
// goroutines, which is what a hang needs) and the script fails, instead of
// a stuck lockd holding the run until go test's own timeout. Sixty
// scenarios on a busy 2-core machine take about three minutes.
const suiteBudget = 4 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lockd-scenario-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "scenario:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	// The scenarios run the binaries make build ships, with its build
	// tags. lockd is race-enabled in a race-enabled test run, so that the
	// scenarios also hunt for data races in the server. lockctl is not:
	// the scenarios start it hundreds of times, and the detector's start
	// costs a race-built lockctl five times the CPU of a plain one (160
	// ms against 30 for an exec); its goroutines, and the client's, are
	// race-tested in process by the tests of cmd/lockctl and proto/client.
	for _, cmd := range []string{"./cmd/lockd", "./cmd/lockctl"} {
		args := []string{"build", "-tags", buildTags, "-o", dir}
		if raceEnabled() && cmd == "./cmd/lockd" {
			args = append(args, "-race")
		}
		args = append(args, cmd)
		build := exec.Command("go", args...)
		build.Stdout = os.Stderr
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "scenario: go %v: %v\n", args, err)
			return 1
		}
	}
	binDir = dir
	return m.Run()
}

// buildTags are the Makefile's TAGS (see there why);
// TestBuildTagsMatchMakefile keeps the two the same.
const buildTags = "urfave_cli_no_docs,netgo,osusergo"

func TestBuildTagsMatchMakefile(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mk), "\n") {
		name, value, ok := strings.Cut(line, "?=")
		if ok && strings.TrimSpace(name) == "TAGS" {
			if got := strings.TrimSpace(value); got != buildTags {
				t.Errorf("the Makefile builds with TAGS %q, the scenarios with %q: make them the same", got, buildTags)
			}
			return
		}
	}
	t.Error("the Makefile sets no TAGS")
}

func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

func TestScenarios(t *testing.T) {
	deadline := time.Now().Add(suiteBudget)
	if d, ok := t.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	testscript.Run(t, testscript.Params{
		Dir:                "testdata",
		Setup:              setupScenario,
		Cmds:               scenarioCmds,
		Deadline:           deadline,
		RequireUniqueNames: true,
	})
}

// TestSecureClusterScenarios runs every cluster scenario again on a secure
// cluster: TLS on every link with certificates made by lockd tls, a client
// secret and a peer secret. Every lockd and lockctl of the scripts, and
// the raw connections of wire, waitanswer and burst, take them from the
// environment (LOCKD_TLS_*, LOCKD_SECRET_FILE, LOCKD_PEER_SECRET_FILE),
// so the same scripts prove the same behaviour with security on.
func TestSecureClusterScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "cluster_*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cluster scenarios: %v", err)
	}
	dir := t.TempDir()
	lockd := filepath.Join(binDir, "lockd")
	for _, args := range [][]string{
		{"tls", "ca", "--dir", dir},
		{"tls", "cert", "--host", "127.0.0.1", "--dir", dir},
	} {
		if out, err := exec.Command(lockd, args...).CombinedOutput(); err != nil {
			t.Fatalf("lockd %v: %v\n%s", args, err, out)
		}
	}
	secrets := map[string]string{"LOCKD_SECRET_FILE": "client.secret", "LOCKD_PEER_SECRET_FILE": "peer.secret"}
	env := map[string]string{
		"LOCKD_TLS_CERT": filepath.Join(dir, "lockd-127.0.0.1.pem"),
		"LOCKD_TLS_KEY":  filepath.Join(dir, "lockd-127.0.0.1-key.pem"),
		"LOCKD_TLS_CA":   filepath.Join(dir, "lockd-ca.pem"),
	}
	for name, file := range secrets {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, []byte(file+"-0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env[name] = path
	}
	deadline := time.Now().Add(suiteBudget)
	if d, ok := t.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	testscript.Run(t, testscript.Params{
		Files: files,
		Setup: func(e *testscript.Env) error {
			for k, v := range env {
				e.Setenv(k, v)
			}
			return setupScenario(e)
		},
		Cmds:     scenarioCmds,
		Deadline: deadline,
	})
}

// setupScenario prepares one script's environment: the freshly built
// binaries first on PATH, the state of the wire command, and, under the
// race detector, a lockd that stops at the first race so that the script
// fails where the race happened (and that exits without the detector's
// default one-second pause).
func setupScenario(env *testscript.Env) error {
	env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
	// REPO is the repository root, for scripts that compare against
	// committed files (completions/).
	env.Setenv("REPO", repoRoot)
	if raceEnabled() && os.Getenv("GORACE") == "" {
		env.Setenv("GORACE", "halt_on_error=1 atexit_sleep_ms=10")
	}
	st := &scriptState{conns: make(map[string]*wireConn)}
	env.Values[stateKey{}] = st
	env.Defer(st.closeAll)
	// Scripts that freeze a node (kill -STOP) write its pid to a *.pid
	// file in their work directory. Whatever the script's outcome, those
	// nodes run again before testscript stops its background processes:
	// a stopped process never acts on the signal, and the script would
	// wait for it forever.
	work := env.WorkDir
	env.Defer(func() { resumeFrozen(work) })
	return nil
}

// resumeFrozen sends SIGCONT to every process named by a *.pid file in
// dir.
func resumeFrozen(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}
