package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// Hostile words: each could reorder a line, drive the terminal, or pass
// for another word if printed raw.
const (
	rlo       = "deploy\u202e"                        // right-to-left override
	isolate   = "\u2066yolped\u2069"                  // a bidi isolate
	marks     = "\u200ekey\u200f\u061c"               // direction marks
	sgr       = "\x1b[31mred"                         // an escape sequence
	c1        = "nel\u0085csi\u009b"                  // C1 controls
	invalid   = "inv\xffalid\xc3"                     // invalid UTF-8
	lineSep   = "one\u2028two\u2029"                  // line and paragraph separators
	zeroWidth = "zero\u200bwidth\ufeff"               // format characters that draw nothing
	tag       = "tag\U000e0041"                       // a format character above U+FFFF
	backslash = `back\slash`                          // the escape character itself
	looksLike = `deploy\u202e`                        // the six characters, not the rune
	cjk       = "配置/デプロイ-κλειδί-é"                    // printable as it is
	nbsp      = "no\u00a0break\u3000space"            // spaces that are not U+0020
	privUse   = "priv\ue000\U000f0000"                // private use
	delByte   = "del\x7f"                             // DEL
	surrogate = "sur\xed\xa0\x80rogate"               // an encoded surrogate: invalid UTF-8
	combining = "cafe\u0301-\U0001f512-\ufffd"        // marks, symbols and U+FFFD print
	filler    = "deploy\u3164\u115f\u1160\uffa0"      // Hangul fillers: letters that render blank
	blanks    = "b\u2800\u034f\u17b4\ufe0f\U000e0100" // braille blank, CGJ, Khmer vowel, variation selectors
)

// hostile lists the words above that printable must change.
var hostile = []string{rlo, isolate, marks, sgr, c1, invalid, lineSep, zeroWidth, tag, backslash, looksLike, nbsp, privUse, delByte, surrogate, filler, blanks}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"deploy", "deploy"},
		{"jobs/nightly-2024:a.b_c", "jobs/nightly-2024:a.b_c"},
		{cjk, cjk},
		{combining, combining},
		{"", ""},
		{rlo, `deploy\u202e`},
		{isolate, `\u2066yolped\u2069`},
		{marks, `\u200ekey\u200f\u061c`},
		{sgr, `\x1b[31mred`},
		{c1, `nel\u0085csi\u009b`},
		{invalid, `inv\xffalid\xc3`},
		{lineSep, `one\u2028two\u2029`},
		{zeroWidth, `zero\u200bwidth\ufeff`},
		{tag, `tag\U000e0041`},
		{backslash, `back\\slash`},
		{looksLike, `deploy\\u202e`},
		{nbsp, `no\u00a0break\u3000space`},
		{privUse, `priv\ue000\U000f0000`},
		{delByte, `del\x7f`},
		{surrogate, `sur\xed\xa0\x80rogate`},
		{filler, `deploy\u3164\u115f\u1160\uffa0`},
		{blanks, `b\u2800\u034f\u17b4\ufe0f\U000e0100`},
		{"tab\tnl\ncr\r", `tab\x09nl\x0acr\x0d`},
		{"\u202a\u202b\u202c\u202d\u2067\u2068", `\u202a\u202b\u202c\u202d\u2067\u2068`},
	} {
		if got := printable(tc.in); got != tc.want {
			t.Errorf("printable(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestPrintableLeavesSafeWordsAlone(t *testing.T) {
	for _, s := range []string{"deploy", cjk, combining, "10.0.0.1:7070", "[::1]:7070"} {
		if n := testing.AllocsPerRun(100, func() { _ = printable(s) }); n != 0 {
			t.Errorf("printable(%q) allocates %v times", s, n)
		}
		if n := testing.AllocsPerRun(100, func() { _ = printableText(s) }); n != 0 {
			t.Errorf("printableText(%q) allocates %v times", s, n)
		}
	}
}

// unprintable undoes printable, for the tests: it fails on a string
// printable cannot have written.
func unprintable(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			i++
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf("lone backslash at %d", i)
		}
		digits := map[byte]int{'\\': 0, 'x': 2, 'u': 4, 'U': 8}
		n, ok := digits[s[i+1]]
		if !ok || i+2+n > len(s) {
			return "", fmt.Errorf("bad escape at %d", i)
		}
		if n == 0 {
			b.WriteByte('\\')
			i += 2
			continue
		}
		v, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32)
		if err != nil || strings.ToLower(s[i+2:i+2+n]) != s[i+2:i+2+n] {
			return "", fmt.Errorf("bad hex at %d", i)
		}
		if n == 2 {
			b.WriteByte(byte(v))
		} else {
			b.WriteRune(rune(v))
		}
		i += 2 + n
	}
	return b.String(), nil
}

// unsafeRuneIn returns the first rune of s that may not reach a terminal
// raw, other than the line feeds between lines. It is the rule as the
// task states it, written apart from printable's code.
func unsafeRuneIn(s string) (string, bool) {
	for i, r := range s {
		if r == '\n' {
			continue
		}
		if _, n := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && n == 1 {
			return s[i : i+1], true
		}
		bidi := (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
		if !unicode.IsPrint(r) || unicode.Is(unicode.Cf, r) || bidi || r == 0x2028 || r == 0x2029 || (r >= 0x80 && r <= 0x9f) {
			return string(r), true
		}
	}
	return "", false
}

// sgrCodes matches the colour codes lockctl's palette writes.
var sgrCodes = regexp.MustCompile("\x1b\\[[0-9;]*m")

// assertNoHostileBytes fails when out carries a raw unsafe rune, or any
// of words that holds one. With colour on, the palette's codes are let
// through, but not a word that holds one of its own.
func assertNoHostileBytes(t *testing.T, what, out string, color bool, words ...string) {
	t.Helper()
	plain := out
	if color {
		plain = sgrCodes.ReplaceAllString(out, "")
	}
	if r, ok := unsafeRuneIn(plain); ok {
		t.Errorf("%s carries the raw rune %q:\n%s", what, r, out)
	}
	for _, w := range words {
		if _, hostile := unsafeRuneIn(w); hostile && strings.Contains(out, w) {
			t.Errorf("%s carries %q raw:\n%s", what, w, out)
		}
	}
}

func FuzzPrintable(f *testing.F) {
	for _, s := range append(hostile, cjk, combining, "", `\`, `\\`, `\x41`, "\\\u202e") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := printable(s)
		if !utf8.ValidString(p) {
			t.Fatalf("printable(%q) = %q is not UTF-8", s, p)
		}
		if r, ok := unsafeRuneIn(p); ok || strings.Contains(p, "\n") {
			t.Fatalf("printable(%q) = %q carries %q", s, p, r)
		}
		// Unambiguous: the value can be read back from what is printed.
		back, err := unprintable(p)
		if err != nil || back != s {
			t.Fatalf("printable(%q) = %s reads back as %q (%v)", s, p, back, err)
		}
		// A line is made safe once and stays as it is after that.
		line := printableText(s)
		if r, ok := unsafeRuneIn(line); ok || strings.Contains(line, "\n") {
			t.Fatalf("printableText(%q) = %q carries %q", s, line, r)
		}
		if again := printableText(line); again != line {
			t.Fatalf("printableText is not idempotent on %q: %q then %q", s, line, again)
		}
		if printableText(p) != p {
			t.Fatalf("printableText changes the escaped value %s", p)
		}
		if !strings.Contains(s, `\`) && strings.Contains(line, `\\`) {
			t.Fatalf("printableText(%q) = %s escapes a backslash", s, line)
		}
	})
}

// Two different values never print the same: the words that could pass
// for one another (the rune and its escape, one backslash or two) print
// apart.
func TestPrintableIsUnambiguous(t *testing.T) {
	words := append([]string{"deploy", "\\u202e", "\u202e", `\\u202e`, "\\\u202e", `\`, `\\`, `\x1b`, "\x1b", `\xff`, "\xff", "\u00ff", `\u00ff`}, hostile...)
	seen := map[string]string{}
	for _, w := range words {
		p := printable(w)
		if other, dup := seen[p]; dup && other != w {
			t.Errorf("%q and %q both print as %s", other, w, p)
		}
		seen[p] = w
	}
}

// An error message holds values escaped where it was built (with %q or
// printable); reportError makes the whole line safe without escaping them
// a second time, and escapes the raw words of a server it carries.
func TestReportErrorEscapesOnce(t *testing.T) {
	server := "lease \u202e01 too long\x1b[2J\u0085"
	err := &exitError{code: exitFailed,
		what: fmt.Sprintf("lost %q at %s: lockd said %s", rlo, printable(isolate+":1"), server),
		try:  "check " + printable(backslash)}
	var b bytes.Buffer
	if code := reportError(&b, err); code != exitFailed {
		t.Errorf("exit %d", code)
	}
	want := `lockctl: lost "deploy\u202e" at \u2066yolped\u2069:1: lockd said lease \u202e01 too long\x1b[2J\u0085; check back\\slash` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
	assertNoHostileBytes(t, "reportError", b.String(), false)

	// A message with nothing to escape is printed as it is, %q and all.
	b.Reset()
	reportError(&b, fail(exitFailed, fmt.Sprintf("%q and %s", `a"b\c`, printable(`d\e`)), ""))
	if want := `lockctl: "a\"b\\c" and d\\e` + "\n"; b.String() != want {
		t.Errorf("got %s, want %s", b.String(), want)
	}

	// A refusal of lockd, through clientFailure, as every command maps it.
	b.Reset()
	g := &globals{AddrList: "127.0.0.1:7070"}
	reportError(&b, clientFailure(t.Context(), g, fmt.Sprintf("acquiring %q", sgr),
		&client.ServerError{Key: sgr, Msg: server}))
	if !strings.Contains(b.String(), `acquiring "\x1b[31mred": lease \u202e01 too long\x1b[2J\u0085;`) {
		t.Errorf("refusal: %s", b.String())
	}
	assertNoHostileBytes(t, "refusal", b.String(), false, sgr, server)

	b.Reset()
	warn(&b, "could not release "+strconv.Quote(c1)+": "+server, "lockd frees it")
	assertNoHostileBytes(t, "warn", b.String(), false, c1, server)
	if !strings.Contains(b.String(), `"nel\u0085csi\u009b": lease \u202e01`) {
		t.Errorf("warn: %s", b.String())
	}
}

func TestPrintJSONKeepsDataExactAndTerminalSafe(t *testing.T) {
	words := append([]string{cjk, combining, "plain", `"quoted"`, "<html>&"}, hostile...)
	var b bytes.Buffer
	if err := printJSON(&b, words); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("not one line: %q", out)
	}
	assertNoHostileBytes(t, "JSON", out, false)
	if !strings.Contains(out, `deploy\u202e`) || !strings.Contains(out, `tag\udb40\udc41`) || !strings.Contains(out, `del\u007f`) {
		t.Errorf("escapes: %s", out)
	}
	var got []string
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// What encoding/json itself reads back: the words exactly, invalid
	// UTF-8 aside, which it has always turned into U+FFFD.
	plain, _ := json.Marshal(words)
	var want []string
	json.Unmarshal(plain, &want)
	for i := range words {
		if got[i] != want[i] {
			t.Errorf("%q reads back as %q, want %q", words[i], got[i], want[i])
		}
		if utf8.ValidString(words[i]) && got[i] != words[i] {
			t.Errorf("%q reads back as %q", words[i], got[i])
		}
	}

	// Output without anything to escape is encoding/json's, byte for byte.
	b.Reset()
	printJSON(&b, map[string]any{"key": cjk + combining, "n": 1.5, "s": []string{`a\b`, "<>"}})
	if want := `{"key":"` + cjk + combining + `","n":1.5,"s":["a\\b","<>"]}` + "\n"; b.String() != want {
		t.Errorf("got %s, want %s", b.String(), want)
	}
}

func FuzzJSONPrintable(f *testing.F) {
	for _, s := range append(hostile, cjk, combining, "\u2028", "\x00\x1f") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		if err := printJSON(&b, map[string]string{s: s}); err != nil {
			t.Fatal(err)
		}
		if r, ok := unsafeRuneIn(strings.TrimSuffix(b.String(), "\n")); ok {
			t.Fatalf("JSON of %q carries %q: %s", s, r, b.String())
		}
		var got, want map[string]string
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v", b.String(), err)
		}
		plain, _ := json.Marshal(map[string]string{s: s})
		json.Unmarshal(plain, &want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q reads back as %q, want %q", s, got, want)
		}
	})
}

// startHostile starts a node that answers each request with what answer
// returns for it, words chosen to harm a terminal; self is its address.
func startHostile(t *testing.T, answer func(self string, req proto.Request) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := ln.Addr().String()
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					req, err := proto.Parse(line)
					if err != nil {
						return
					}
					if _, err := c.Write(answer(self, req)); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return self
}

// serverWords is an error text a hostile node sends: on the wire a word
// may hold any byte but space and line breaks.
const serverWords = "lease\u202e too long\x1b]0;owned\x07 \u0085 \xff"

// An error a node sends reaches the terminal escaped, whichever command
// prints it.
func TestServerErrorTextIsEscaped(t *testing.T) {
	addr := startHostile(t, func(self string, req proto.Request) []byte {
		if req.Op == proto.OpStatus {
			return proto.AppendStatus(nil, req.Key, proto.Status{Self: self, Role: roleActive, Active: self,
				Peers: []proto.PeerStatus{{Addr: self, Role: roleActive, Reachable: true}}})
		}
		return proto.AppendError(nil, req.Key, req.Op, serverWords)
	})
	for _, args := range [][]string{
		{"acquire", "--key", rlo},
		{"renew", "--key", c1, "--token", "1"},
		{"release", "--key", invalid, "--token", "1"},
		{"hold", "--key", backslash},
		{"exec", "--key", marks, "--", "true"},
		{"queues"},
		{"handoff"},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, out, errOut := lockctl(t, append([]string{"--addr", addr}, args...)...)
			if code != exitFailed || out != "" {
				t.Errorf("exit %d, stdout %q", code, out)
			}
			assertNoHostileBytes(t, "stderr", errOut, false, serverWords, args[len(args)-1])
			if !strings.Contains(errOut, `lease\u202e too long\x1b]0;owned\x07 \u0085 \xff`) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr %q lacks the escaped server words", errOut)
			}
		})
	}
}
