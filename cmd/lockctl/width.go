package main

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// How many columns text takes on a terminal, and how to cut and wrap it
// there. lockctl measures its own text (keys and names already escaped
// by printable, its own words, its own ANSI colours), so a small table
// does: no grapheme segmentation, and ambiguous-width symbols (●, ·, …)
// count one column, as terminals outside CJK locales draw them. A
// general-purpose width library costs every run its tables' init, a
// millisecond and more, before lockctl has printed a thing.

// textWidth is the number of terminal columns s takes: escape sequences
// (CSI, as lockctl's colours) none, East Asian wide and fullwidth runes
// two, combining marks and format characters none, every other rune one.
func textWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if e := escapeLen(s[i:]); e > 0 {
			i += e
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += runeWidth(r)
		i += size
	}
	return n
}

// truncateWidth cuts s to at most width columns, keeping its escape
// sequences; when colour was on at the cut, it is reset.
func truncateWidth(s string, width int) string {
	if textWidth(s) <= width {
		return s
	}
	var b strings.Builder
	n, styled := 0, false
	for i := 0; i < len(s); {
		if e := escapeLen(s[i:]); e > 0 {
			b.WriteString(s[i : i+e])
			styled = s[i:i+e] != sgrReset
			i += e
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		w := runeWidth(r)
		if n+w > width {
			break
		}
		b.WriteString(s[i : i+size])
		n += w
		i += size
	}
	if styled {
		b.WriteString(sgrReset)
	}
	return b.String()
}

// cutMiddle cuts s to at most width columns by taking out its middle and
// putting el there: both ends stay, as they tell apart what shares a
// prefix (hosts of one domain, one user's processes) or a suffix. The end
// gets two thirds of the room, since a port or a pid is at the end. s is
// plain text, without escape sequences.
func cutMiddle(s string, width int, el string) string {
	room := width - textWidth(el)
	if textWidth(s) <= width || room < 2 {
		return s
	}
	head := truncateWidth(s, max(room/3, 1))
	// The tail: the longest suffix that fits what the head left.
	tailRoom := room - textWidth(head)
	start, w := len(s), 0
	for start > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:start])
		if w+runeWidth(r) > tailRoom {
			break
		}
		w += runeWidth(r)
		start -= size
	}
	return head + el + s[start:]
}

// wrapText breaks s into lines of at most width columns at spaces, each
// line after the first starting with indent. s[:keep] (an indent, or a
// list item's name and the spaces that align its text) is kept as it
// is; after it, runs of spaces become one. A word longer than a line
// stays whole, on a line of its own: a path or an address cut in two is
// worse than a long line.
func wrapText(s string, keep, width int, indent string) string {
	if width <= 0 || textWidth(s) <= width {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:keep])
	col := textWidth(s[:keep])
	first := true
	for _, word := range strings.Fields(s[keep:]) {
		w := textWidth(word)
		switch {
		case first:
			first = false
		case col+1+w > width && col > textWidth(indent):
			b.WriteString("\n" + indent)
			col = textWidth(indent)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += w
	}
	return b.String()
}

// sgrReset ends every colour and attribute.
const sgrReset = "\x1b[0m"

// escapeLen is the length of the CSI escape sequence s starts with
// (ESC [ parameters final), or 0.
func escapeLen(s string) int {
	if len(s) < 2 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s); i++ {
		if c := s[i]; c >= 0x40 && c <= 0x7e {
			return i + 1
		}
	}
	return len(s)
}

// runeWidth is the number of columns r takes.
func runeWidth(r rune) int {
	switch {
	case r < 0x300:
		return 1
	case r == 0x200d || unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	}
	for _, rg := range wideRunes {
		if r < rg[0] {
			return 1
		}
		if r <= rg[1] {
			return 2
		}
	}
	return 1
}

// wideRunes are the East Asian wide and fullwidth blocks (Unicode's
// EastAsianWidth W and F), in order: Hangul Jamo, CJK, Hangul syllables,
// the fullwidth forms, and the emoji and symbols terminals draw two
// columns wide.
var wideRunes = [...][2]rune{
	{0x1100, 0x115f},
	{0x231a, 0x231b},
	{0x2329, 0x232a},
	{0x23e9, 0x23ec},
	{0x23f0, 0x23f0},
	{0x23f3, 0x23f3},
	{0x25fd, 0x25fe},
	{0x2614, 0x2615},
	{0x2648, 0x2653},
	{0x267f, 0x267f},
	{0x2693, 0x2693},
	{0x26a1, 0x26a1},
	{0x26aa, 0x26ab},
	{0x26bd, 0x26be},
	{0x26c4, 0x26c5},
	{0x26ce, 0x26ce},
	{0x26d4, 0x26d4},
	{0x26ea, 0x26ea},
	{0x26f2, 0x26f3},
	{0x26f5, 0x26f5},
	{0x26fa, 0x26fa},
	{0x26fd, 0x26fd},
	{0x2705, 0x2705},
	{0x270a, 0x270b},
	{0x2728, 0x2728},
	{0x274c, 0x274c},
	{0x274e, 0x274e},
	{0x2753, 0x2755},
	{0x2757, 0x2757},
	{0x2795, 0x2797},
	{0x27b0, 0x27b0},
	{0x27bf, 0x27bf},
	{0x2b1b, 0x2b1c},
	{0x2b50, 0x2b50},
	{0x2b55, 0x2b55},
	{0x2e80, 0x303e},
	{0x3041, 0x33ff},
	{0x3400, 0x4dbf},
	{0x4e00, 0x9fff},
	{0xa000, 0xa4cf},
	{0xa960, 0xa97f},
	{0xac00, 0xd7a3},
	{0xf900, 0xfaff},
	{0xfe10, 0xfe19},
	{0xfe30, 0xfe6f},
	{0xff00, 0xff60},
	{0xffe0, 0xffe6},
	{0x16fe0, 0x16fe4},
	{0x17000, 0x18cff},
	{0x1b000, 0x1b2ff},
	{0x1f004, 0x1f004},
	{0x1f0cf, 0x1f0cf},
	{0x1f18e, 0x1f18e},
	{0x1f191, 0x1f19a},
	{0x1f200, 0x1f251},
	{0x1f300, 0x1f320},
	{0x1f32d, 0x1f335},
	{0x1f337, 0x1f37c},
	{0x1f37e, 0x1f393},
	{0x1f3a0, 0x1f3ca},
	{0x1f3cf, 0x1f3d3},
	{0x1f3e0, 0x1f3f0},
	{0x1f3f4, 0x1f3f4},
	{0x1f3f8, 0x1f43e},
	{0x1f440, 0x1f440},
	{0x1f442, 0x1f4fc},
	{0x1f4ff, 0x1f53d},
	{0x1f54b, 0x1f54e},
	{0x1f550, 0x1f567},
	{0x1f57a, 0x1f57a},
	{0x1f595, 0x1f596},
	{0x1f5a4, 0x1f5a4},
	{0x1f5fb, 0x1f64f},
	{0x1f680, 0x1f6c5},
	{0x1f6cc, 0x1f6cc},
	{0x1f6d0, 0x1f6d2},
	{0x1f6d5, 0x1f6d7},
	{0x1f6dc, 0x1f6df},
	{0x1f6eb, 0x1f6ec},
	{0x1f6f4, 0x1f6fc},
	{0x1f7e0, 0x1f7eb},
	{0x1f7f0, 0x1f7f0},
	{0x1f90c, 0x1f93a},
	{0x1f93c, 0x1f945},
	{0x1f947, 0x1f9ff},
	{0x1fa70, 0x1faff},
	{0x20000, 0x2fffd},
	{0x30000, 0x3fffd},
}
