package lockd_test

import (
	"go/version"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// go.mod's go line names the oldest Go that builds the module: the
// newest that its dependencies require (the go command refuses to build
// with less), not a newer one, which would turn away a Go that builds it
// (the compiler keeps the code to the language of that line, and a
// patch release adds no API). The README's quick start names the same.
func TestGoLineIsTheOldestGoThatBuilds(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	goLine := "go" + string(m[1])
	out, err := exec.Command("go", "list", "-m", "-f", "{{if not .Main}}{{.Path}} {{.GoVersion}}{{end}}", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	need, by := "go1", ""
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, v, ok := strings.Cut(line, " ")
		if !ok || v == "" {
			continue
		}
		if version.Compare("go"+v, need) > 0 {
			need, by = "go"+v, path
		}
	}
	if version.Compare(goLine, need) != 0 {
		t.Errorf("go.mod says %s; the oldest Go that builds it is %s (required by %s): write go %s", goLine, need, by, strings.TrimPrefix(need, "go"))
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Go " + strings.TrimPrefix(version.Lang(goLine), "go") + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("the README does not say %q, as go.mod's %s does", want, goLine)
	}
}
