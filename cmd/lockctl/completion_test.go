package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The committed scripts in completions/ are what `make completions`
// writes; they must match the commands as defined now.
func TestCompletionsUpToDate(t *testing.T) {
	for shell, file := range map[string]string{
		"bash": "lockctl.bash",
		"zsh":  "_lockctl",
		"fish": "lockctl.fish",
	} {
		var b bytes.Buffer
		if err := writeCompletion(&b, shell); err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("..", "..", "completions", file))
		if err != nil || !bytes.Equal(committed, b.Bytes()) {
			t.Errorf("completions are out of date: run make completions (completions/%s differs from `lockctl completion %s`)", file, shell)
		}
	}
}

func TestCompletionCommand(t *testing.T) {
	code, out, errOut := lockctl(t, "completion", "bash")
	var want bytes.Buffer
	writeCompletion(&want, "bash")
	if code != 0 || out != want.String() || errOut != "" {
		t.Errorf("completion bash: exit %d, %d bytes, stderr %q", code, len(out), errOut)
	}
	for _, args := range [][]string{{"completion"}, {"completion", "powershell"}, {"completion", "bash", "zsh"}} {
		if code, _, errOut := lockctl(t, args...); code != exitUsage || !strings.Contains(errOut, "bash, zsh, fish") {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
}

// The bash script completes lockctl's own commands and values.
func TestCompletionBashBehaviour(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var script bytes.Buffer
	writeCompletion(&script, "bash")
	path := filepath.Join(t.TempDir(), "lockctl.bash")
	os.WriteFile(path, script.Bytes(), 0o644)
	complete := func(words ...string) string {
		prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _lockctl_complete; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command(bash, append([]string{"--norc", "--noprofile", "-c", prog, "bash", path}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", words, err, out)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		return strings.Join(slices.Compact(got), " ")
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"lockctl", "st"}, "status"},
		{[]string{"lockctl", "--addr", "127.0.0.1:7070", "qu"}, "queues"},
		{[]string{"lockctl", "--color", ""}, "always auto never"},
		{[]string{"lockctl", "status", "--wa"}, "--wait-active --watch"},
		{[]string{"lockctl", "drill", "--action", ""}, "handoff none"},
		{[]string{"lockctl", "completion", ""}, "bash fish zsh"},
		{[]string{"lockctl", "acquire", "--key", ""}, ""},
		{[]string{"lockctl", "exec", "--key", "k", "--", "ech"}, "echo"},
	} {
		if got := complete(tc.words...); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.words, got, tc.want)
		}
	}
}
