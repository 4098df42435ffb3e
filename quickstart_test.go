package lockd_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The quick start a newcomer follows: make run on another port passes it
// to lockd as --listen and says how lockctl reaches it, and the README
// says where the binaries are and which variable points lockctl there.
func TestQuickStartRunsOnAnotherPort(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("needs make")
	}
	out, err := exec.Command("make", "-n", "run", "LISTEN=127.0.0.1:7171").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	for _, want := range []string{"./bin/lockd --listen 127.0.0.1:7171", "LOCKD_ADDR=127.0.0.1:7171 ./bin/lockctl status", "make run LISTEN="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make -n run LISTEN=127.0.0.1:7171 does not say %q:\n%s", want, out)
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
