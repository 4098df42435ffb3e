package proto

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var fuzzRequests = []string{
	"A deploy 30 10\n",
	"A deploy 0.5 0\r\n",
	"  A   deploy  2.25    0.001  \n",
	"A 鍵 1 0",
	"R deploy 7360982537641984001\n",
	"R deploy 18446744073709551615",
	"N deploy 7360982537641984001 60\n",
	"Q deploy\n",
	"K *\n",
	"K dep*",
	"S -\n",
	"H -\n",
	"H - 127.0.0.1:7071\n",
	"P 127.0.0.1:7071 standby 7360982537641984003 42 -\n",
	"P 127.0.0.1:7071 active 7360982537641984003 42 sticky more words\n",
	"Y 127.0.0.1:7071 7360982537641984001\n",
	"O 127.0.0.1:7071 7360982537641984004\n",
	// Refused.
	"",
	"\n",
	"\r\n",
	"   ",
	"a deploy 30 10",
	"X deploy",
	"A",
	"A deploy",
	"A deploy 0 10",
	"A deploy 1.2345 10",
	"A deploy 30 -1",
	"A deploy 1e3 1",
	"A deploy .5 5.",
	"A dep\tloy 30 10",
	"A dep\x00loy 30 10",
	"A deploy 315360000.5 1",
	"R deploy 18446744073709551616",
	"R deploy abc",
	"N deploy 1 0",
	"Q deploy x",
	"H - a b",
	"P f r",
	"Y f",
	"A deploy 30 10\r",
	"A deploy\n30 10\n",
	"A " + strings.Repeat("k", 256) + " 1 1",
	"P f standby 1 1 -" + strings.Repeat(" x", 20),
	"H - " + strings.Repeat("a", MaxLineLen),
	"\xff\xfe deploy",
	"P 0 0 0 0 \r", // a free-form word ending in CR did not survive a rewrite
	"H - a\r",
}

// FuzzParse proves that Parse never panics, that every refusal can be
// answered with one well-formed E line, and that every accepted request
// written back from its fields parses to the same request.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzRequests {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := Parse(line)
		if err != nil {
			pe, ok := err.(*ParseError)
			if !ok {
				t.Fatalf("Parse(%q) error %T, want *ParseError", line, err)
			}
			checkErrorAnswer(t, line, pe)
			return
		}
		if msg := CheckKey([]byte(req.Key)); msg != "" {
			t.Fatalf("Parse(%q) accepted key %q: %s", line, req.Key, msg)
		}
		if len(trimEOL(line)) > MaxLineLen {
			t.Fatalf("Parse accepted a line of %d bytes", len(line))
		}
		if req.Lease < 0 || req.Wait < 0 || req.Lease%time.Millisecond != 0 || req.Wait%time.Millisecond != 0 {
			t.Fatalf("Parse(%q): lease %v, wait %v: want whole milliseconds, not negative", line, req.Lease, req.Wait)
		}
		if (req.Op == OpAcquire || req.Op == OpRenew) && req.Lease <= 0 {
			t.Fatalf("Parse(%q) accepted lease %v", line, req.Lease)
		}
		again := format(t, req)
		req2, err := Parse(again)
		if err != nil {
			t.Fatalf("Parse(%q) = %+v, written back as %q, refused: %v", line, req, again, err)
		}
		if !reflect.DeepEqual(req, req2) {
			t.Fatalf("Parse(%q) = %+v\nwritten back as %q\nparses to %+v", line, req, again, req2)
		}
	})
}

// checkErrorAnswer checks the E answer a server writes for a refusal.
func checkErrorAnswer(t *testing.T, line []byte, pe *ParseError) {
	t.Helper()
	if pe.Msg == "" {
		t.Fatalf("Parse(%q): refusal without words", line)
	}
	out := AppendError(nil, pe.Key, pe.Op, pe.Msg)
	if !bytes.HasPrefix(out, []byte("E ")) || !bytes.HasSuffix(out, []byte("\n")) || bytes.Count(out, []byte("\n")) != 1 {
		t.Fatalf("Parse(%q): E answer %q is not one line", line, out)
	}
	if bytes.IndexByte(out, '\r') >= 0 {
		t.Fatalf("Parse(%q): E answer %q holds a CR", line, out)
	}
	a, err := ParseAnswer(out)
	if err != nil {
		t.Fatalf("Parse(%q): E answer %q unreadable: %v", line, out, err)
	}
	wantKey, wantOp := pe.Key, pe.Op
	if wantKey == "" {
		wantKey = WordNone
	}
	if wantOp == 0 {
		wantOp = '?'
	}
	if a.Kind != KindError || a.Key != wantKey || a.ReqOp() != wantOp {
		t.Fatalf("Parse(%q): E answer %q reads as %+v (op %q), want key %q op %q", line, out, a, a.ReqOp(), wantKey, wantOp)
	}
	if wantKey != WordNone {
		if msg := CheckKey([]byte(wantKey)); msg != "" {
			t.Fatalf("Parse(%q): E answer echoes an invalid key %q", line, wantKey)
		}
	}
}

// format writes req back as a line, from its fields.
func format(t *testing.T, req Request) []byte {
	b := []byte{byte(req.Op), ' '}
	b = append(b, req.Key...)
	word := func(s string) { b = append(b, ' '); b = append(b, s...) }
	switch req.Op {
	case OpAcquire:
		word(FormatSeconds(req.Lease))
		word(FormatSeconds(req.Wait))
	case OpRelease:
		word(strconv.FormatUint(req.Token, 10))
	case OpRenew:
		word(strconv.FormatUint(req.Token, 10))
		word(FormatSeconds(req.Lease))
	case OpQueue, OpKeys, OpStatus:
	case OpHandoff:
		if req.Addr != "" {
			word(req.Addr)
		}
	case OpBeat, OpSync, RecTakeover:
		for _, a := range req.Args {
			word(a)
		}
	default:
		t.Fatalf("Parse accepted op %q", req.Op)
	}
	return append(b, '\n')
}

// FuzzParseAnswer proves that ParseAnswer and the readers of S and Q
// answers never panic, and that what they accept is written back the same.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		"A deploy 7360982537641984001\n",
		"T deploy\n",
		"M deploy 127.0.0.1:7070\n",
		"R deploy ok\n",
		"N deploy notheld\r\n",
		"E deploy A: lease must be greater than 0 seconds\n",
		"E - ?: empty line\n",
		"K * 3 build deploy deploy-db\n",
		"K * 1 a\u00a0b\n",
		"H - ok 127.0.0.1:7071\n",
		"Q deploy 7360982537641984001 29.5 2 3.2,127.0.0.1:51234 0.4,127.0.0.1:51240\n",
		"Q nothing - - 0\n",
		"Q k - - 1 1,-\n",
		docStatus,
		"S - self=a role=active active=- future=1\n",
		"P 127.0.0.1:7071 127.0.0.1:7070 active 7360982537641984003 42 127.0.0.1:7070 -\n",
		"G deploy 7360982537641984002 12.75\n",
		"W - 7360982537641984004 44\n",
		"", "A", "A ", "a b", "AB c", "A  b",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := ParseAnswer(line)
		if err != nil {
			return
		}
		a.ReqOp()
		a.ErrorText()
		if a.Kind < 'A' || a.Kind > 'Z' || a.Key == "" || strings.Contains(a.Key, " ") {
			t.Fatalf("ParseAnswer(%q) = %+v", line, a)
		}
		for _, f := range a.Fields {
			if f == "" || strings.Contains(f, " ") {
				t.Fatalf("ParseAnswer(%q) = %+v: empty field or field with a space", line, a)
			}
		}
		st, stErr := ParseStatus(a)
		q, qErr := ParseQueue(a)
		if bytes.ContainsAny(line, "\r\n") {
			return // a stray CR or LF inside the line does not survive a rewrite
		}
		a2, err := ParseAnswer(AppendFields(nil, a.Kind, a.Key, a.Fields...))
		if err != nil || a2.Kind != a.Kind || a2.Key != a.Key || !slices.Equal(a2.Fields, a.Fields) {
			t.Fatalf("ParseAnswer(%q) = %+v, written back reads %+v, %v", line, a, a2, err)
		}
		if stErr == nil {
			a2, _ := ParseAnswer(AppendStatus(nil, a.Key, st))
			if st2, err := ParseStatus(a2); err != nil || !reflect.DeepEqual(st, st2) {
				t.Fatalf("ParseStatus(%q) = %+v, written back reads %+v, %v", line, st, st2, err)
			}
		}
		if qErr == nil {
			a2, _ := ParseAnswer(AppendQueue(nil, q))
			if q2, err := ParseQueue(a2); err != nil || !reflect.DeepEqual(q, q2) {
				t.Fatalf("ParseQueue(%q) = %+v, written back reads %+v, %v", line, q, q2, err)
			}
		}
	})
}
