package lockd_test

import (
	"os"
	"regexp"
	"testing"
)

// The Makefile and CI build with one Go release, the one the README
// names: a toolchain set in one place only would leave the others on the
// machine's own Go, without its security fixes.
func TestOneToolchainEverywhere(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	m := regexp.MustCompile(`(?m)^GOTOOLCHAIN := (go[0-9.]+)$`).FindStringSubmatch(read("Makefile"))
	if m == nil {
		t.Fatal("the Makefile sets no GOTOOLCHAIN := goX.Y.Z")
	}
	want := m[1]
	if !regexp.MustCompile(`(?m)^export GOTOOLCHAIN=` + regexp.QuoteMeta(want) + `$`).MatchString(read(".ci/run")) {
		t.Errorf(".ci/run does not export GOTOOLCHAIN=%s, as the Makefile builds with", want)
	}
	if !regexp.MustCompile("`GOTOOLCHAIN=" + regexp.QuoteMeta(want) + "`").MatchString(read("README.md")) {
		t.Errorf("the README does not name GOTOOLCHAIN=%s, as the Makefile builds with", want)
	}
}
