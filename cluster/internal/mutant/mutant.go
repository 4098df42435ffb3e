// Package mutant builds a package's tests from mutated sources, so that
// the faults and bugs a test plants live in the test, not as hooks in the
// code that ships. A Mutation rewrites one exact text of a source file;
// Build compiles the package's tests with the mutated files in place of
// the originals (go test -c -overlay), and Run runs chosen tests in that
// build. Only tests import it.
package mutant

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// Mutation plants something in one file of the package under test: the
// text Clean, which must occur in File exactly once, becomes Planted.
type Mutation struct {
	File, Clean, Planted string
}

// Sources returns the package's files with every mutation applied, by
// file name, read from the test's working directory (the package's). A
// mutation whose text is not in its file exactly once fails t: the
// source changed under it.
func Sources(t testing.TB, ms []Mutation) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range ms {
		src, ok := out[m.File]
		if !ok {
			b, err := os.ReadFile(m.File)
			if err != nil {
				t.Fatal(err)
			}
			src = string(b)
		}
		if n := strings.Count(src, m.Clean); n != 1 {
			t.Fatalf("the mutation of %s that plants %q finds its text %d times, not once: the file changed; update the test's mutations",
				m.File, m.Planted, n)
		}
		out[m.File] = strings.Replace(src, m.Clean, m.Planted, 1)
	}
	return out
}

// Build compiles the tests of the package in the working directory with
// sources (file name to text: mutated files, or test files of its own) in
// place of the files of those names, and returns the test binary, built
// with the build tags and race detector of the running test.
func Build(t testing.TB, sources map[string]string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	dir := t.TempDir()
	replace := map[string]string{}
	for name, src := range sources {
		abs, err := filepath.Abs(name)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name)
		if err := os.WriteFile(out, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[abs] = out
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "mutant.test")
	args := append([]string{"test", "-c", "-vet=off", "-o", bin, "-overlay", ov}, buildFlags()...)
	if out, err := exec.Command(goCmd, append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("building the mutated package: %v\n%s", err, out)
	}
	return bin
}

// buildFlags are the -tags and -race the running binary was built with.
func buildFlags() []string {
	var flags []string
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch {
			case s.Key == "-tags" && s.Value != "":
				flags = append(flags, "-tags", s.Value)
			case s.Key == "-race" && s.Value == "true":
				flags = append(flags, "-race")
			}
		}
	}
	return flags
}

// Run runs the tests of bin whose names are given, verbosely, and fails t
// unless each of them passed without a skip. It returns their output.
func Run(t testing.TB, bin string, names ...string) string {
	t.Helper()
	out, err := exec.Command(bin, "-test.run", "^("+strings.Join(names, "|")+")$", "-test.count=1", "-test.v").CombinedOutput()
	if err != nil {
		t.Fatalf("the tests failed in the mutated build: %v\n%s", err, out)
	}
	for _, name := range names {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Fatalf("%s did not pass in the mutated build:\n%s", name, out)
		}
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("a test skipped in the mutated build:\n%s", out)
	}
	return string(out)
}

// Planted is what a test planted in which value (a node, a core), as
// bits of B, for the mutated code to ask with Has. Safe for concurrent
// use.
type Planted[K comparable, B ~uint8] struct{ m sync.Map }

// Add plants b in k, beside what k has.
func (p *Planted[K, B]) Add(k K, b B) {
	old, _ := p.m.Load(k)
	v, _ := old.(B)
	p.m.Store(k, v|b)
}

// Set plants b in k in place of what k had.
func (p *Planted[K, B]) Set(k K, b B) { p.m.Store(k, b) }

// Has reports whether b is planted in k.
func (p *Planted[K, B]) Has(k K, b B) bool {
	v, ok := p.m.Load(k)
	return ok && v.(B)&b != 0
}

// Forget removes what is planted in k.
func (p *Planted[K, B]) Forget(k K) { p.m.Delete(k) }
