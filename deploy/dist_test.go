package deploy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// make dist on a clean checkout (the repository's files, without what
// git ignores: no bin/, no node_modules, no built client) makes every
// release file, and each installs and works where nothing else is:
//
//   - SHA256SUMS matches every file;
//   - the linux-amd64 archive, unpacked into an empty prefix, holds
//     lockd, lockctl, the completions, the systemd unit, the rules and
//     the dashboard; its lockd serves, its lockctl runs a command under a
//     lock, and both say the version they were made as;
//   - the Python wheel installs with pip, offline, into an empty virtual
//     environment, and holds a lock; the sdist holds the sources;
//   - the npm tarball installs with npm, offline, into an empty project,
//     and holds a lock.
//
// It makes the amd64 archive alone (DIST_ARCHES): the arm64 one comes from
// the same lines of scripts/dist.sh with GOARCH=arm64, a cold cross-build
// of the standard library that would cost make test more than a minute.
func TestDistInstallsAndRuns(t *testing.T) {
	for _, tool := range []string{"make", "git", "npm", "node", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("make dist needs %s: %v", tool, err)
		}
	}
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	const version = "v9.8.7"
	clone := cleanCheckout(t)
	out := filepath.Join(t.TempDir(), "dist")
	began := time.Now()
	run(t, clone, nil, "make", "dist", "VERSION="+version, "DIST="+out, "PYTHON="+python, "DIST_ARCHES=amd64")
	t.Logf("make dist: %s", time.Since(began).Round(time.Second))

	files := checkSums(t, out)
	for _, want := range []string{
		"lockd-" + version + "-linux-amd64.tar.gz",
		"lockd-9.8.7-py3-none-any.whl", "lockd-9.8.7.tar.gz", "lockd-io-client-9.8.7.tgz",
	} {
		if !files[want] {
			t.Errorf("make dist made no %s (made %v)", want, files)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	prefix := filepath.Join(t.TempDir(), "prefix")
	if err := os.Mkdir(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "tar", "-C", prefix, "--strip-components=1", "-xzf", filepath.Join(out, "lockd-"+version+"-linux-amd64.tar.gz"))
	for _, f := range []string{
		"bin/lockd", "bin/lockctl", "lib/systemd/system/lockd.service",
		"share/bash-completion/completions/lockctl", "share/bash-completion/completions/lockd",
		"share/zsh/site-functions/_lockctl", "share/fish/vendor_completions.d/lockctl.fish",
		"share/lockd/prometheus/lockd.rules.yml", "share/lockd/grafana/lockd.json", "README.md",
	} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("the archive has no %s: %v", f, err)
		}
	}
	lockd, lockctl := filepath.Join(prefix, "bin", "lockd"), filepath.Join(prefix, "bin", "lockctl")
	if v := run(t, "", nil, lockd, "--version"); !strings.HasPrefix(v, "lockd "+version+" (") {
		t.Errorf("lockd --version: %q, want lockd %s", v, version)
	}
	if v := run(t, "", nil, lockctl, "version"); !strings.HasPrefix(v, "lockctl "+version+" (") {
		t.Errorf("lockctl version: %q, want lockctl %s", v, version)
	}
	addr := freeAddrs(t, 1)[0]
	start(t, "lockd", lockd, "--listen", addr)
	waitFor(t, "lockd from the archive serving", 10*time.Second, 50*time.Millisecond, func() bool {
		return exec.Command(lockctl, "--addr", addr, "status").Run() == nil
	})
	got := run(t, "", nil, lockctl, "--addr", addr, "exec", "--key", "dist", "--", "sh", "-c", `echo "held $LOCKD_KEY $LOCKD_TOKEN"`)
	if !regexp.MustCompile(`(?m)^held dist [0-9]+$`).MatchString(got) {
		t.Errorf("lockctl exec from the archive printed %q", got)
	}

	t.Run("python wheel", func(t *testing.T) {
		venv := filepath.Join(t.TempDir(), "venv")
		run(t, "", nil, python, "-m", "venv", venv)
		pip, py := filepath.Join(venv, "bin", "pip"), filepath.Join(venv, "bin", "python")
		run(t, "", nil, pip, "install", "--no-index", "--disable-pip-version-check", "-q", filepath.Join(out, "lockd-9.8.7-py3-none-any.whl"))
		got := run(t, "", nil, py, "-c", fmt.Sprintf(`
import lockd
print("version", lockd.__version__)
with lockd.Client(%q) as client:
    with client.hold("wheel", lease=5) as lock:
        print("held", lock.token)
    print("ended", lock.reason)
`, addr))
		if !regexp.MustCompile(`\Aversion 9\.8\.7\nheld [0-9]+\nended released\n\z`).MatchString(got) {
			t.Errorf("the wheel's client printed %q", got)
		}
		sdist := run(t, "", nil, "tar", "-tzf", filepath.Join(out, "lockd-9.8.7.tar.gz"))
		for _, f := range []string{"lockd-9.8.7/PKG-INFO", "lockd-9.8.7/pyproject.toml", "lockd-9.8.7/lockd/__init__.py", "lockd-9.8.7/lockd/py.typed"} {
			if !strings.Contains(sdist, f+"\n") {
				t.Errorf("the sdist has no %s:\n%s", f, sdist)
			}
		}
	})

	t.Run("npm tarball", func(t *testing.T) {
		project := t.TempDir()
		run(t, project, nil, "npm", "init", "-y")
		run(t, project, nil, "npm", "install", "--offline", "--no-audit", "--no-fund", filepath.Join(out, "lockd-io-client-9.8.7.tgz"))
		script := filepath.Join(project, "hold.mjs")
		os.WriteFile(script, []byte(fmt.Sprintf(`import { Client } from "@lockd-io/client";
const client = new Client(%q);
const lock = await client.hold("npm", { lease: 5000 });
console.log("held", lock.token.toString());
await lock.release();
await client.close();
`, addr)), 0o644)
		got := run(t, project, nil, "node", script)
		if !regexp.MustCompile(`\Aheld [0-9]+\n\z`).MatchString(got) {
			t.Errorf("the npm package's client printed %q", got)
		}
	})
}

// The systemd unit keeps the locks under its StateDirectory and runs
// with the usual hardening.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("systemd", "lockd.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"\nStateDirectory=lockd\n", "\nExecStart=/usr/local/bin/lockd --data-dir /var/lib/lockd\n",
		"\nDynamicUser=yes\n", "\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n", "\nProtectHome=yes\n",
		"\nPrivateTmp=yes\n", "\nPrivateDevices=yes\n", "\nCapabilityBoundingSet=\n", "\nRestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n",
		"\nSystemCallFilter=@system-service\n", "\nMemoryDenyWriteExecute=yes\n", "\nEnvironmentFile=-/etc/lockd/lockd.env\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("lockd.service has no %q", strings.TrimSpace(want))
		}
	}
}

// cleanCheckout copies the repository's files as a fresh clone would
// have them (tracked and new files, nothing git ignores) into a new
// directory.
func cleanCheckout(t *testing.T) string {
	t.Helper()
	list := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	list.Dir = repoRoot
	names, err := list.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "lockd")
	for _, name := range strings.Split(strings.TrimRight(string(names), "\x00"), "\x00") {
		src := filepath.Join(repoRoot, name)
		info, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if info.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(src)
			os.Symlink(target, to)
			continue
		}
		if err := copyFile(src, to, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkSums checks SHA256SUMS in dir against the files, as sha256sum -c
// does, and returns the names it lists.
func checkSums(t *testing.T, dir string) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := make(map[string]bool)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: bad line %q", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("SHA256SUMS lists %s: %v", name, err)
		}
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
		names[name] = true
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "SHA256SUMS" && !names[e.Name()] {
			t.Errorf("SHA256SUMS does not list %s", e.Name())
		}
	}
	return names
}
