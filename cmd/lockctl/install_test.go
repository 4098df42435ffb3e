package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// `make install` puts lockd and lockctl under PREFIX (so
// that the README's recipe can call them bare) and the completions where
// the shells look; make uninstall takes them away again.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	prefix, bin := filepath.Join(tmp, "prefix"), filepath.Join(tmp, "bin")
	make := func(target string) {
		t.Helper()
		cmd := exec.Command("make", "-C", root, target, "PREFIX="+prefix, "BIN="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}
	make("install")
	for _, f := range []string{
		"bin/lockd", "bin/lockctl",
		"share/bash-completion/completions/lockctl", "share/zsh/site-functions/_lockctl", "share/fish/vendor_completions.d/lockctl.fish",
		"share/bash-completion/completions/lockd", "share/zsh/site-functions/_lockd", "share/fish/vendor_completions.d/lockd.fish",
	} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("make install did not install %s: %v", f, err)
		}
	}
	// Release builds leave out urfave/cli's man-page generator
	// and need no cgo (static binaries start faster).
	for _, b := range []string{"lockd", "lockctl"} {
		info, err := buildinfo.ReadFile(filepath.Join(prefix, "bin", b))
		if err != nil {
			t.Fatal(err)
		}
		tags := ""
		for _, s := range info.Settings {
			if s.Key == "-tags" {
				tags = s.Value
			}
		}
		for _, want := range []string{"urfave_cli_no_docs", "netgo", "osusergo"} {
			if !slices.Contains(strings.Split(tags, ","), want) {
				t.Errorf("make install built %s with -tags %q, want %s among them", b, tags, want)
			}
		}
	}
	out, err := exec.Command(filepath.Join(prefix, "bin", "lockctl"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "lockctl ") {
		t.Errorf("installed lockctl --version: %q, %v", out, err)
	}
	make("uninstall")
	if _, err := os.Stat(filepath.Join(prefix, "bin", "lockctl")); err == nil {
		t.Error("make uninstall left bin/lockctl")
	}
}
