package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every lockctl run pays for the package initialisation of everything
// linked into it before main runs: a width table or a terminal probe
// built at init is paid by `lockctl exec -- true` too. The built binary
// (with the Makefile's tags) allocates little before main, and no package
// much: GODEBUG=inittrace=1 says what each package's init allocated.
func TestStartupInitIsCheap(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "lockctl")
	build := exec.Command("go", "build", "-tags", "urfave_cli_no_docs,netgo,osusergo", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lockctl version: %v\n%s", err, out)
	}
	// init github.com/x/y @0.1 ms, 0.02 ms clock, 3584 bytes, 33 allocs
	line := regexp.MustCompile(`(?m)^init (\S+) @.*, (\d+) bytes, \d+ allocs$`)
	const perPackage, total = 16 << 10, 96 << 10
	sum := 0
	for _, m := range line.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[2])
		sum += n
		if n > perPackage {
			t.Errorf("package %s allocates %d bytes at init, more than %d: every lockctl run pays for it", m[1], n, perPackage)
		}
	}
	if sum == 0 || sum > total {
		t.Errorf("package init allocates %d bytes in all, want 1 to %d:\n%s", sum, total, strings.TrimSpace(string(out)))
	}
	t.Logf("package init: %d bytes", sum)
}
