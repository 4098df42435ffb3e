package engine

import (
	"math/rand/v2"
	"testing"
)

// The releases' index finds every release the ring still holds, and no
// other, through growth, drops of the oldest and tokens released twice,
// against a plain map as the model.
func TestReleasedIndexMatchesAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r releasedSet
	model := map[uint64]uint64{} // token -> its latest release's number
	for step := range 300_000 {
		// Few distinct tokens, so homes collide and tokens repeat.
		token := uint64(rng.IntN(100_000)) + 1
		r.add(0, token, "k")
		model[token] = r.next - 1
		if step%997 != 0 {
			continue
		}
		for tok, n := range model {
			want := n >= r.first
			if got := r.has(0, tok, "k"); got != want {
				t.Fatalf("step %d: token %d (release %d, ring from %d): has %v, want %v", step, tok, n, r.first, got, want)
			}
		}
	}
	if r.next-r.first != ReleasedMax {
		t.Fatalf("the ring holds %d releases, want %d", r.next-r.first, ReleasedMax)
	}
}
