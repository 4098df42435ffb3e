package oneproc

import (
	"os"
	"runtime"
	"testing"
)

func TestOneProcessorUntilRestored(t *testing.T) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		if limited {
			t.Fatal("init limited the processors although GOMAXPROCS is set")
		}
		t.Skip("GOMAXPROCS is set: the user's value stands")
	}
	if got := runtime.GOMAXPROCS(0); got != 1 || !limited {
		t.Fatalf("after init: GOMAXPROCS %d, limited %v; want 1, true", got, limited)
	}
	Restore()
	runtime.SetDefaultGOMAXPROCS()
	want := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(1)
	limited = true
	Restore()
	if got := runtime.GOMAXPROCS(0); got != want || limited {
		t.Fatalf("after Restore: GOMAXPROCS %d, limited %v; want the default %d, false", got, limited, want)
	}
}
