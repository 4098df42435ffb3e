package main

import (
	"strings"
	"testing"

	"github.com/olekukonko/tablewriter/pkg/twwidth"
)

// lockctl's own measure of text agrees with a full Unicode width library
// on what lockctl draws: ASCII, its glyphs, CJK, Hangul, fullwidth forms,
// emoji, combining marks, and its colours.
func TestTextWidthAgreesWithUnicode(t *testing.T) {
	twwidth.SetEastAsian(false)
	for _, s := range []string{
		"", "deploy", "127.0.0.1:7070", "● · …", "⠋ waiting",
		"日本語のキー", "한국어", "ＡＢＣ", "ｱｲｳ", "🚀 launch", "⌚", "✅ ok",
		"e\u0301te\u0301", "a\u200bb", "\x1b[1;32mactive\x1b[0m", "\x1b[2m10.0.0.9\x1b[0m",
	} {
		if got, want := textWidth(s), twwidth.Width(s); got != want {
			t.Errorf("textWidth(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestTruncateAndCut(t *testing.T) {
	for _, tc := range []struct {
		s     string
		width int
		want  string
	}{
		{"deploy", 10, "deploy"},
		{"deploy-nightly", 6, "deploy"},
		{"日本語のキー", 5, "日本"},
		{"\x1b[1mbold text\x1b[0m", 4, "\x1b[1mbold\x1b[0m"},
	} {
		if got := truncateWidth(tc.s, tc.width); got != tc.want {
			t.Errorf("truncateWidth(%q, %d) = %q, want %q", tc.s, tc.width, got, tc.want)
		}
	}
	for _, tc := range []struct {
		s     string
		width int
		want  string
	}{
		{"root@build-vm:31234", 30, "root@build-vm:31234"},
		{"root@build-vm:31234", 10, "roo…:31234"},
		{"127.0.0.1:17071", 12, "127….1:17071"},
		{"日本語のキーです", 9, "日…ーです"},
	} {
		got := cutMiddle(tc.s, tc.width, "…")
		if got != tc.want || textWidth(got) > tc.width {
			t.Errorf("cutMiddle(%q, %d) = %q (%d wide), want %q", tc.s, tc.width, got, textWidth(got), tc.want)
		}
	}
}

func TestWrapTextBreaksAtSpaces(t *testing.T) {
	s := "   --addr NODES  lockd NODES to talk to: HOST:PORT, or several separated by commas; a bare PORT means 127.0.0.1:PORT"
	got := wrapText(s, 17, 50, strings.Repeat(" ", 17))
	for _, l := range strings.Split(got, "\n") {
		if textWidth(l) > 50 {
			t.Errorf("line %d wide: %q", textWidth(l), l)
		}
	}
	if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(s), " ") {
		t.Errorf("words changed:\n%s", got)
	}
	if want := "\n                 "; !strings.Contains(got, want) {
		t.Errorf("no hanging indent:\n%s", got)
	}
}
