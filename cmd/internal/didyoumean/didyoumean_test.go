package didyoumean

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"aquire", "acquire", 1}, {"kye", "key", 1}, {"stauts", "status", 1}, {"", "abc", 3}, {"hold", "hold", 0}, {"drill", "bench", 5}} {
		if d := distance(tc.a, tc.b); d != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"acquire", "release", "renew", "status", "queues"}
	for word, want := range map[string]string{
		"aquire":  "acquire", // a letter left out
		"relaese": "release", // two letters swapped
		"stat":    "status",  // the only name it starts
		"re":      "",        // too short to start just one
		"bogus":   "",        // nothing close
	} {
		if got := Suggest(word, names); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", word, got, want)
		}
	}
}
