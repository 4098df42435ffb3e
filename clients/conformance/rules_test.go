package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestRulesQuoted checks that every case's rule is a quote a reader can
// find: its source starts with a file of the repository, and the rule's
// words are in that file, in order, where " ... " leaves words out (line
// breaks, comment markers and runs of spaces aside; the first letter of
// each part may differ in case, for a quote that starts mid-sentence).
func TestRulesQuoted(t *testing.T) {
	texts := map[string]string{}
	for _, c := range cases {
		file, _, _ := strings.Cut(c.source, ",")
		text, ok := texts[file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(file)))
			if err != nil {
				t.Errorf("case %s: its source %q should start with a file of the repository: %v", c.name, c.source, err)
				continue
			}
			text = flatten(string(b))
			texts[file] = text
		}
		rest := text
		for _, part := range strings.Split(c.rule, " ... ") {
			i := indexQuote(rest, flatten(part))
			if i < 0 {
				t.Errorf("case %s quotes %q, which %s does not say (after the part before it)", c.name, part, file)
				break
			}
			rest = rest[i+len(flatten(part)):]
		}
	}
}

// flatten is text as one line: Go comment markers at the start of lines
// dropped, and every run of white space one space.
func flatten(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(l, "//"); ok {
			l = rest
		}
		lines[i] = l
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}

// indexQuote is the index of part in text, its first letter in either case.
func indexQuote(text, part string) int {
	if i := strings.Index(text, part); i >= 0 || part == "" {
		return i
	}
	r, n := utf8.DecodeRuneInString(part)
	swapped := string(unicode.ToUpper(r))
	if unicode.IsUpper(r) {
		swapped = string(unicode.ToLower(r))
	}
	return strings.Index(text, swapped+part[n:])
}
