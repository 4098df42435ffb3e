package main

// What lockctl prints that it did not write: keys (any byte above 0x20
// but DEL, so any UTF-8 and invalid UTF-8), the addresses and roles nodes
// report, the error words of a server. Printed raw, they could reorder a
// line on a terminal (a key that reads "deploy" but is not), send escape
// sequences, or forge a line of output. Nothing of theirs reaches the
// terminal raw:
//
//   - a value (a key, an address, a role) goes through printable where it
//     is put into a line or a cell, before the cell is measured or coloured;
//   - a finished line that may carry words lockctl could not escape one by
//     one (a client error, urfave/cli's, a server's error text) goes through
//     printableText as it is printed: reportError and warn do that;
//   - JSON goes through jsonPrintable, which keeps the data exact.

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// printable is the value s as lockctl shows it: s itself when every rune
// of s is safe and s holds no backslash, else a copy in which
//
//   - a backslash is written \\;
//   - a byte of invalid UTF-8, and a byte below 0x20 or DEL (0x7F), is
//     written \xHH;
//   - any other unsafe rune is written \uHHHH, or \UHHHHHHHH above U+FFFF;
//
// with lower-case hex digits. A rune is safe when unicode.IsPrint says so:
// letters, marks, numbers, punctuation, symbols and the ASCII space. That
// leaves out the C0 and C1 controls and DEL, every format character (Cf),
// among them the bidi controls U+202A–U+202E, U+2066–U+2069, U+200E,
// U+200F and U+061C and the zero-width characters, the line and paragraph
// separators U+2028 and U+2029, every space but U+0020, private-use and
// unassigned code points, and the letters and symbols that render blank
// (see safeRune). CJK and other scripts print as they are.
//
// A backslash is escaped, even when nothing else is, so that two values
// never print the same: the key made of the six characters `\u202e` prints
// as `\\u202e`, the key made of U+202E as `\u202e`. The price is that
// printable is not idempotent, so a value is escaped once, where it is put
// into a line, and never a line that holds escaped values: printableText
// is for lines.
func printable(s string) string { return escape(s, true) }

// printableText is a line of text made safe to print: the unsafe runes are
// escaped as printable escapes them, but backslashes are left alone, so a
// value the line holds already escaped (with printable, or %q) is not
// escaped again; printableText(printableText(s)) == printableText(s). It
// makes a line safe, not unambiguous: the words it escapes are free text
// (a server's reason), where that does not matter.
func printableText(s string) string { return escape(s, false) }

// escape is printable, or printableText when backslash is false.
func escape(s string, backslash bool) string {
	i := 0
	for i < len(s) {
		n := safeAt(s, i, backslash)
		if n == 0 {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		if n := safeAt(s, i, backslash); n > 0 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		c := s[i]
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c < utf8.RuneSelf, r == utf8.RuneError && n == 1:
			writeHex(&b, `\x`, rune(c), 2)
		case r <= 0xFFFF:
			writeHex(&b, `\u`, r, 4)
		default:
			writeHex(&b, `\U`, r, 8)
		}
		i += n
	}
	return b.String()
}

// safeAt is the length in bytes of the rune at s[i] when it may be printed
// as it is, 0 when it must be escaped.
func safeAt(s string, i int, backslash bool) int {
	if c := s[i]; c < utf8.RuneSelf {
		if c < 0x20 || c == 0x7F || (backslash && c == '\\') {
			return 0
		}
		return 1
	}
	if r, n := utf8.DecodeRuneInString(s[i:]); safeRune(r, n) {
		return n
	}
	return 0
}

// safeRune is the rule of printable for a rune from U+0080 up, decoded
// from n bytes: valid UTF-8 that unicode.IsPrint accepts and that draws
// something. unicode.IsPrint passes letters and symbols that render as
// nothing or as a blank (the Hangul fillers U+115F, U+1160, U+3164 and
// U+FFA0, the Khmer inherent vowels, the combining grapheme joiner, the
// variation selectors, the blank Braille pattern U+2800): printed raw,
// "deploy\u3164" would pass for "deploy".
func safeRune(r rune, n int) bool {
	return !(r == utf8.RuneError && n == 1) && unicode.IsPrint(r) && !blank(r)
}

// blank reports whether r is printable by unicode.IsPrint's rule yet
// shows no ink: the default-ignorable code points that are not format
// characters (those IsPrint already refuses), and U+2800.
func blank(r rune) bool {
	return r == '\u2800' ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}

const hexDigits = "0123456789abcdef"

func writeHex(b *strings.Builder, prefix string, v rune, digits int) {
	b.WriteString(prefix)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[v>>shift&0xF])
	}
}

// jsonPrintable rewrites the output of encoding/json so that it carries no
// unsafe rune (as printable sees them) raw: each becomes a JSON \uHHHH
// escape, a surrogate pair above U+FFFF, which any JSON parser reads back
// as the same rune, so the data stays exact. encoding/json has already
// escaped the bytes below 0x20 inside strings, and U+2028 and U+2029, and
// replaced invalid UTF-8 with U+FFFD: a byte below 0x20 left in its output
// is whitespace between tokens (the newline Encode ends with) and stays,
// and a rune from DEL up can only stand inside a string, where an escape
// means the rune itself.
func jsonPrintable(js []byte) []byte {
	i := 0
	for i < len(js) {
		n := jsonSafeAt(js, i)
		if n == 0 {
			break
		}
		i += n
	}
	if i == len(js) {
		return js
	}
	out := make([]byte, 0, len(js)+32)
	out = append(out, js[:i]...)
	for i < len(js) {
		if n := jsonSafeAt(js, i); n > 0 {
			out = append(out, js[i:i+n]...)
			i += n
			continue
		}
		r, n := utf8.DecodeRune(js[i:])
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = appendJSONEscape(out, r1)
			out = appendJSONEscape(out, r2)
		} else {
			// DEL, a rune of the BMP, or (never from encoding/json)
			// invalid UTF-8, which reads back as U+FFFD as json would
			// have it.
			out = appendJSONEscape(out, r)
		}
		i += n
	}
	return out
}

// jsonSafeAt is the length of the rune at js[i] when jsonPrintable keeps
// it, 0 when it must be escaped.
func jsonSafeAt(js []byte, i int) int {
	if c := js[i]; c < utf8.RuneSelf {
		if c == 0x7F {
			return 0
		}
		return 1
	}
	if r, n := utf8.DecodeRune(js[i:]); safeRune(r, n) {
		return n
	}
	return 0
}

func appendJSONEscape(out []byte, r rune) []byte {
	out = append(out, '\\', 'u')
	for shift := 12; shift >= 0; shift -= 4 {
		out = append(out, hexDigits[r>>shift&0xF])
	}
	return out
}
