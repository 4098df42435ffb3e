package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README lists the signals exec forwards to its command; exec
// --help, written next to the code that forwards them, says which. The
// two lists must be the same.
func TestReadmeForwardedSignalsMatchExec(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`forwards\s+((?:SIG[A-Z]+/?)+)\s+to it`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README does not say which signals exec forwards (\"forwards SIGINT/... to it\")")
	}
	inReadme := strings.Split(string(m[1]), "/")
	code, help, _ := lockctl(t, "exec", "--help")
	if code != 0 {
		t.Fatalf("exec --help: exit %d", code)
	}
	h := regexp.MustCompile(`((?:SIG[A-Z]+(?:,\s+|\s+and\s+))+SIG[A-Z]+)\s+are\s+passed\s+on`).FindStringSubmatch(help)
	if h == nil {
		t.Fatalf("exec --help does not say which signals it passes on:\n%s", help)
	}
	inHelp := regexp.MustCompile(`SIG[A-Z]+`).FindAllString(h[1], -1)
	slices.Sort(inReadme)
	slices.Sort(inHelp)
	if !slices.Equal(inReadme, inHelp) {
		t.Errorf("the README says exec forwards %v, exec --help %v", inReadme, inHelp)
	}
}
