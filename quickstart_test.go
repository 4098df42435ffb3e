package lockd_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The quick start a newcomer follows: make run on another port passes it
// to lockd as --listen and says how lockctl reaches it, whether the port
// comes as LISTEN, as a port alone, or as LOCKD_LISTEN in the
// environment; and the README says where the binaries are and which
// variable points lockctl there.
func TestQuickStartRunsOnAnotherPort(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("needs make")
	}
	for _, tc := range []struct {
		args, env string
		want      []string
	}{
		{"LISTEN=127.0.0.1:7171", "", []string{"./bin/lockd --listen 127.0.0.1:7171", "LOCKD_ADDR=127.0.0.1:7171 ./bin/lockctl status", "make run LISTEN="}},
		{"LISTEN=7171", "", []string{"./bin/lockd --listen 7171", "lockd on 127.0.0.1:7171;", "LOCKD_ADDR=127.0.0.1:7171 ./bin/lockctl status"}},
		{"", "LOCKD_LISTEN=127.0.0.1:7272", []string{"lockd on 127.0.0.1:7272;", "LOCKD_ADDR=127.0.0.1:7272 ./bin/lockctl status"}},
		{"LISTEN=7171", "LOCKD_LISTEN=127.0.0.1:7272", []string{"./bin/lockd --listen 7171", "LOCKD_ADDR=127.0.0.1:7171 ./bin/lockctl status"}},
		{"", "", []string{"lockd on 127.0.0.1:7070;", "terminal: ./bin/lockctl status"}},
	} {
		cmd := exec.Command("make", "-n", "run")
		if tc.args != "" {
			cmd.Args = append(cmd.Args, tc.args)
		}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LOCKD_LISTEN=") && !strings.HasPrefix(kv, "LISTEN=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s make -n run %s: %v\n%s", tc.env, tc.args, err, out)
		}
		for _, want := range tc.want {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s make -n run %s does not say %q:\n%s", tc.env, tc.args, want, out)
			}
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	quick, _, _ := strings.Cut(string(readme), "## Talk to it by hand")
	for _, want := range []string{"./bin/lockctl status", "make run LISTEN=127.0.0.1:7171", "LOCKD_ADDR"} {
		if !strings.Contains(quick, want) {
			t.Errorf("the README's quick start does not say %q", want)
		}
	}
}

// The README's failover drill for CI is what a scenario runs: every
// lockctl drill line of its block (continuation lines joined) is a line of
// testdata/lockctl_drill_readme_recipe.txtar that must succeed, as
// written but for the quotes around $P, which testscript does not take
// (it splits on spaces, and $P holds none).
func TestReadmeDrillRecipeIsTheScenario(t *testing.T) {
	drills := drillRecipe(t, "README.md", "\n### A failover drill in CI\n")
	const file = "testdata/lockctl_drill_readme_recipe.txtar"
	script, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	run := make(map[string]bool)
	for _, line := range strings.Split(string(script), "\n") {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "exec "); ok {
			run[strings.Join(strings.Fields(cmd), " ")] = true
		}
	}
	for _, d := range drills {
		if !run[d] {
			t.Errorf("the README's CI drill says\n\t%s\nand %s has no exec of that line", d, file)
		}
	}
}

// The recipe promises that a crash of the active keeps every lock held:
// a drill that kills the active must fail when a grant or a release was
// lost, so each one, in the README and in docs/cluster.md, bounds the
// loss with --max-lost 0 (without it, losses are reported and pass).
func TestCrashDrillsBoundTheLoss(t *testing.T) {
	for _, doc := range []struct{ file, section string }{
		{"README.md", "\n### A failover drill in CI\n"},
		{"docs/cluster.md", "\n## A failover drill in CI\n"},
	} {
		crashes := 0
		for _, d := range drillRecipe(t, doc.file, doc.section) {
			if !strings.Contains(d, "kill -9") && !strings.Contains(d, "kill -KILL") {
				continue
			}
			crashes++
			if !strings.Contains(d, " --max-lost 0") {
				t.Errorf("%s's CI drill kills the active without --max-lost 0, so lost locks would pass:\n\t%s", doc.file, d)
			}
		}
		if crashes == 0 {
			t.Errorf("%s's CI drill has no drill that kills the active (kill -9)", doc.file)
		}
	}
}

// drillRecipe returns the lockctl drill lines of the code block under
// section in file, continuation lines joined, spaces collapsed, and the
// quotes around $P dropped.
func drillRecipe(t *testing.T, file, section string) []string {
	t.Helper()
	readme, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), section)
	if !ok {
		t.Fatalf("%s has no %q section", file, strings.TrimSpace(section))
	}
	block, _, _ = strings.Cut(block, "\n#")
	var drills []string
	joined := ""
	for _, line := range strings.Split(block, "\n") {
		code, ok := strings.CutPrefix(line, "    ")
		if !ok {
			continue
		}
		code = joined + strings.TrimSpace(code)
		if more, ok := strings.CutSuffix(code, `\`); ok {
			joined = more
			continue
		}
		joined = ""
		if strings.HasPrefix(code, "lockctl ") && strings.Contains(code, " drill ") {
			drills = append(drills, strings.Join(strings.Fields(strings.ReplaceAll(code, `"$P"`, "$P")), " "))
		}
	}
	if len(drills) < 3 {
		t.Fatalf("found %d lockctl drill lines in %s's CI drill, want the handoff, kill -9 and kill -STOP drills:\n%s", len(drills), file, strings.Join(drills, "\n"))
	}
	return drills
}
