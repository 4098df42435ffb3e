package core

import (
	"os"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The rules by which the simulator's checker exempts a history from
// mutual exclusion are losses docs/cluster.md promises users: the doc
// states each in the checker's words (a line break may fall anywhere,
// and a rule may open a sentence), in the section that makes the promise
// it limits, so that the code and the doc change together.
func TestClusterDocStatesTheCheckersRules(t *testing.T) {
	b, err := os.ReadFile("../../docs/cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, tc := range []struct{ rule, section string }{
		{ruleAsync, "Consistency"},
		{ruleDegraded, "Consistency"},
		{rulePartition, "Consistency"},
		{ruleMemoryStandby, "Consistency"},
		{ruleEmptyNode, "Consistency"},
		{ruleLeave, "Consistency"},
		{ruleUnsettled, "Consistency"},
		{ruleUnheard, "Consistency"},
		{ruleHoldersDown, "Durability"},
	} {
		text := strings.Join(strings.Fields(docSection(doc, tc.section)), " ")
		if text == "" {
			t.Fatalf("docs/cluster.md has no section %q", tc.section)
		}
		r, size := utf8.DecodeRuneInString(tc.rule)
		if !strings.Contains(text, tc.rule) && !strings.Contains(text, string(unicode.ToUpper(r))+tc.rule[size:]) {
			t.Errorf("docs/cluster.md, section %s, does not say %q in these words", tc.section, tc.rule)
		}
	}
}

// docSection is the text of the "## " section whose title begins with
// title, up to the next one.
func docSection(doc, title string) string {
	_, rest, ok := strings.Cut(doc, "\n## "+title)
	if !ok {
		return ""
	}
	text, _, _ := strings.Cut(rest, "\n## ")
	return text
}
