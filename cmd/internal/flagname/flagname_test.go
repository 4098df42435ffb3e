package flagname

import "testing"

func TestDashed(t *testing.T) {
	for name, want := range map[string]string{"k": "-k", "V": "-V", "key": "--key", "max-lag": "--max-lag"} {
		if got := Dashed(name); got != want {
			t.Errorf("Dashed(%q) = %q, want %q", name, got, want)
		}
	}
}
