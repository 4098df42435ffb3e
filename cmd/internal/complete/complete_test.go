package complete

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// testApp is a small application with every shape the generator handles.
func testApp() *cli.App {
	return &cli.App{
		Name:        "tool",
		HideVersion: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "server", Usage: "the `HOST:PORT` to talk to (default: local)"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"V"}, Usage: "say more; much more"},
		},
		Commands: []*cli.Command{
			{Name: "get", Aliases: []string{"g"}, Usage: "fetch a thing", Flags: []cli.Flag{
				&cli.StringFlag{Name: "name", Usage: "which `NAME` to fetch"},
				&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Usage: "output `FORMAT`"},
				&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "every thing"},
				&cli.BoolFlag{Name: "secret", Hidden: true},
			}},
			{Name: "cluster", Usage: "manage the cluster", Subcommands: []*cli.Command{
				{Name: "add", Usage: "add a node", Flags: []cli.Flag{&cli.StringFlag{Name: "addr"}}},
				{Name: "rm", Usage: "remove a node"},
			}},
			{Name: "run", Usage: "run a command's line", ArgsUsage: "-- CMD"},
			{Name: "shell", Usage: "print a script", ArgsUsage: "bash|zsh"},
			{Name: "internal", Hidden: true},
		},
	}
}

func testOptions() []Option {
	return []Option{
		FlagValues("format", "json", "text"),
		FlagValues("cluster add addr", "node-a", "node-b"),
		ArgValues("shell", "bash", "zsh"),
		CommandArgs("run"),
	}
}

func generate(t *testing.T, shell string) string {
	t.Helper()
	var b bytes.Buffer
	if err := Generate(&b, shell, testApp(), "tool", testOptions()...); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGenerateRefusals(t *testing.T) {
	var b bytes.Buffer
	if err := Generate(&b, "powershell", testApp(), "tool"); err == nil || !strings.Contains(err.Error(), "bash, zsh, fish") {
		t.Errorf("unknown shell: %v", err)
	}
	if err := Generate(&b, "bash", testApp(), "my tool"); err == nil {
		t.Errorf("a program name with a space was accepted")
	}
	if err := Generate(&b, "bash", testApp(), "tool", FlagValues("format", "it's")); err == nil || !strings.Contains(err.Error(), `"it's"`) {
		t.Errorf("a value with a quote: %v", err)
	}
	if b.Len() != 0 {
		t.Errorf("wrote %q before failing", b.String())
	}
}

func TestGenerateLeavesTheAppAlone(t *testing.T) {
	app := testApp()
	before := len(app.Commands[0].Flags)
	for _, sh := range Shells() {
		var b1, b2 bytes.Buffer
		if err := Generate(&b1, sh, app, "tool", testOptions()...); err != nil {
			t.Fatal(err)
		}
		if err := Generate(&b2, sh, app, "tool", testOptions()...); err != nil {
			t.Fatal(err)
		}
		if b1.String() != b2.String() {
			t.Errorf("%s: two runs differ", sh)
		}
		if strings.Contains(b1.String(), "internal") || strings.Contains(b1.String(), "secret") {
			t.Errorf("%s: hidden command or flag completed", sh)
		}
	}
	if len(app.Commands) != 5 || len(app.Commands[0].Flags) != before {
		t.Errorf("the app was changed")
	}
}

func TestFirstClause(t *testing.T) {
	for in, want := range map[string]string{
		"the `HOST:PORT` to talk to (default: local)": "the HOST:PORT to talk to",
		"say more; much more":                         "say more",
		"short (x)":                                   "short",
		"a fine sentence. Then more":                  "a fine sentence",
	} {
		if _, got := placeholder(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	if hint, _ := placeholder("which `NAME` to fetch"); hint != "NAME" {
		t.Errorf("placeholder %q", hint)
	}
}

// bashComplete sources script in bash, completes words (the last one is
// the word under the cursor) and returns the candidates.
func bashComplete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	path := filepath.Join(t.TempDir(), "completion.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
	}
	fn := strings.Fields(script[strings.Index(script, "complete -F "):])[2]
	prog := `source "$1"
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
` + fn + `
printf '%s\n' "${COMPREPLY[@]}"`
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog, "bash", path).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v: %s", err, out)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	slices.Sort(got)
	return slices.Compact(got)
}

func TestBash(t *testing.T) {
	script := generate(t, "bash")
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"tool", ""}, "cluster get help run shell"},
		{[]string{"tool", "g"}, "get"},
		{[]string{"tool", "-"}, "--help --server --verbose -V -h"},
		{[]string{"tool", "--server", "x:1", "cl"}, "cluster"},
		{[]string{"tool", "--server", ""}, ""},
		{[]string{"tool", "get", "--format", ""}, "json text"},
		{[]string{"tool", "g", "-f", "j"}, "json"},
		{[]string{"tool", "get", "--format", "=", "t"}, "text"},
		{[]string{"tool", "get", "--format", "="}, "json text"},
		{[]string{"tool", "get", "--name", ""}, ""},
		{[]string{"tool", "get", "--a"}, "--all"},
		{[]string{"tool", "cluster", ""}, "add help rm"},
		{[]string{"tool", "cluster", "add", "--addr", ""}, "node-a node-b"},
		{[]string{"tool", "shell", ""}, "bash zsh"},
		{[]string{"tool", "help", ""}, "cluster get run shell"},
		{[]string{"tool", "run", "--", "ech"}, "echo"},
	} {
		got := strings.Join(bashComplete(t, script, tc.words...), " ")
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.words, got, tc.want)
		}
	}
}

func TestZshSyntax(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("no zsh")
	}
	path := filepath.Join(t.TempDir(), "_tool")
	os.WriteFile(path, []byte(generate(t, "zsh")), 0o644)
	if out, err := exec.Command(zsh, "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v: %s", err, out)
	}
}

// fishComplete asks fish for the completions of line, without their
// descriptions.
func fishComplete(t *testing.T, script, line string) []string {
	t.Helper()
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("no fish")
	}
	path := filepath.Join(t.TempDir(), "tool.fish")
	os.WriteFile(path, []byte(script), 0o644)
	out, err := exec.Command(fish, "--no-config", "-c", "source $argv[1]; complete -C $argv[2]", path, line).CombinedOutput()
	if err != nil {
		t.Fatalf("fish: %v: %s", err, out)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if w, _, _ := strings.Cut(l, "\t"); w != "" {
			got = append(got, w)
		}
	}
	slices.Sort(got)
	return got
}

func TestFish(t *testing.T) {
	script := generate(t, "fish")
	for line, want := range map[string]string{
		"tool ":                    "cluster get help run shell",
		"tool g":                   "get",
		"tool get --format ":       "json text",
		"tool --server x:1 cl":     "cluster",
		"tool cluster ":            "add help rm",
		"tool cluster add --addr ": "node-a node-b",
		"tool shell ":              "bash zsh",
		"tool get --a":             "--all",
	} {
		if got := strings.Join(fishComplete(t, script, line), " "); got != want {
			t.Errorf("%q: got %q, want %q", line, got, want)
		}
	}
}
