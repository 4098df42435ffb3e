package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestStampedVersionWins(t *testing.T) {
	if got := Version("v1.2.3"); got != "v1.2.3" {
		t.Fatalf("Version(v1.2.3) = %q", got)
	}
	line := Line("lockd", "v1.2.3")
	want := "lockd v1.2.3 (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if line != want {
		t.Fatalf("Line = %q, want %q", line, want)
	}
}

func TestDevBuildSaysDev(t *testing.T) {
	// A test binary has no module version, so an unstamped build is dev.
	if got := Version("dev"); got != "dev" && !strings.HasPrefix(got, "v") {
		t.Fatalf("Version(dev) = %q: want dev or a module version", got)
	}
}
