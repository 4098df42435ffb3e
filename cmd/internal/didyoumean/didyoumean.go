// Package didyoumean owns the rule both commands use to turn a mistyped
// command or flag name into a suggestion: the closest known name within
// a typo or two, or the only one the word starts.
package didyoumean

import "strings"

// Suggest is the candidate closest to word, if it is close enough to be
// what was meant: a typo or two (an edit distance of at most 2, or 1 for
// short words), or the start of a single candidate. It is "" otherwise.
func Suggest(word string, candidates []string) string {
	best, bestDist := "", 1<<30
	limit := 2
	if len(word) <= 3 {
		limit = 1
	}
	var prefixed []string
	for _, c := range candidates {
		if d := distance(word, c); d < bestDist {
			best, bestDist = c, d
		}
		if len(word) >= 3 && strings.HasPrefix(c, word) {
			prefixed = append(prefixed, c)
		}
	}
	if bestDist <= limit && bestDist < len(word) {
		return best
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// distance is the Damerau-Levenshtein distance (optimal string
// alignment) between a and b: insertions, deletions, substitutions and
// swaps of two neighbours each count one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
