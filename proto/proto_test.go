package proto

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
)

const tok = 7360982537641984001 // epoch<<22 | counter, as lockd makes them

func TestParseAccepts(t *testing.T) {
	key255 := strings.Repeat("k", MaxKeyLen)
	p16 := "P 127.0.0.1:7071 standby 7 42 -" + strings.Repeat(" x", MaxArgs-4)
	tests := []struct {
		line string
		want Request
	}{
		{"A deploy 30 10", Request{Op: OpAcquire, Key: "deploy", Lease: 30 * time.Second, Wait: 10 * time.Second}},
		{"A deploy 0.5 0", Request{Op: OpAcquire, Key: "deploy", Lease: 500 * time.Millisecond}},
		{"A deploy 2.25 0.001", Request{Op: OpAcquire, Key: "deploy", Lease: 2250 * time.Millisecond, Wait: time.Millisecond}},
		{"A deploy 30 10\n", Request{Op: OpAcquire, Key: "deploy", Lease: 30 * time.Second, Wait: 10 * time.Second}},
		{"A deploy 30 10\r\n", Request{Op: OpAcquire, Key: "deploy", Lease: 30 * time.Second, Wait: 10 * time.Second}},
		{"  A   deploy  30    10  \r\n", Request{Op: OpAcquire, Key: "deploy", Lease: 30 * time.Second, Wait: 10 * time.Second}},
		{"A Deploy 30 10", Request{Op: OpAcquire, Key: "Deploy", Lease: 30 * time.Second, Wait: 10 * time.Second}},
		{"A 鍵 1 0", Request{Op: OpAcquire, Key: "鍵", Lease: time.Second}},
		{"A a\u00a0b 1 0", Request{Op: OpAcquire, Key: "a\u00a0b", Lease: time.Second}},
		{"A " + key255 + " 1 0", Request{Op: OpAcquire, Key: key255, Lease: time.Second}},
		{"R deploy 7360982537641984001", Request{Op: OpRelease, Key: "deploy", Token: tok}},
		{"R deploy 0", Request{Op: OpRelease, Key: "deploy"}},
		{"R deploy 18446744073709551615", Request{Op: OpRelease, Key: "deploy", Token: 1<<64 - 1}},
		{"R deploy 007", Request{Op: OpRelease, Key: "deploy", Token: 7}},
		{"N deploy 7360982537641984001 60", Request{Op: OpRenew, Key: "deploy", Token: tok, Lease: time.Minute}},
		{"Q deploy", Request{Op: OpQueue, Key: "deploy"}},
		{"A deploy 30 - ref=zZ09", Request{Op: OpAcquire, Key: "deploy", Lease: 30 * time.Second, Try: true, Ref: mustRef("zZ09")}},
		{"A deploy 30 2.5 limit=2 ref=0123456789abcdef id=a#1", Request{Op: OpAcquire, Key: "deploy", Lease: 30 * time.Second, Wait: 2500 * time.Millisecond,
			Limit: 2, ID: "a#1", Ref: mustRef("0123456789abcdef")}},
		{"X deploy a#1", Request{Op: OpWithdraw, Key: "deploy", ID: "a#1"}},
		{"L deploy", Request{Op: OpWatch, Key: "deploy"}},
		{"U deploy", Request{Op: OpUnwatch, Key: "deploy"}},
		{"K *", Request{Op: OpKeys, Key: "*"}},
		{"K dep*", Request{Op: OpKeys, Key: "dep*"}},
		{"S -", Request{Op: OpStatus, Key: "-"}},
		{"H -", Request{Op: OpHandoff, Key: "-"}},
		{"H - 127.0.0.1:7071", Request{Op: OpHandoff, Key: "-", Addr: "127.0.0.1:7071"}},
		{"P 127.0.0.1:7071 standby 7360982537641984001 42 -", Request{Op: OpBeat, Key: "127.0.0.1:7071",
			Peer: &PeerMessage{From: "127.0.0.1:7071", Beat: Beat{From: "127.0.0.1:7071", Role: "standby", Token: tok, Seq: 42}}}},
		{"P 127.0.0.1:7071 standby 7360982537641984001 42 sticky later", Request{Op: OpBeat, Key: "127.0.0.1:7071",
			Peer: &PeerMessage{From: "127.0.0.1:7071", Beat: Beat{From: "127.0.0.1:7071", Role: "standby", Token: tok, Seq: 42, Flags: BeatFlags{Sticky: true}}}}},
		{p16, Request{Op: OpBeat, Key: "127.0.0.1:7071",
			Peer: &PeerMessage{From: "127.0.0.1:7071", Beat: Beat{From: "127.0.0.1:7071", Role: "standby", Token: 7, Seq: 42}}}},
		{"Y 127.0.0.1:7071 7360982537641984001", Request{Op: OpSync, Key: "127.0.0.1:7071", Peer: &PeerMessage{From: "127.0.0.1:7071", Token: tok}}},
		{"O 127.0.0.1:7071 7360982537641984001", Request{Op: OpTakeover, Key: "127.0.0.1:7071", Peer: &PeerMessage{From: "127.0.0.1:7071", Token: tok}}},
		{"C 127.0.0.1:7071 7360982537641984001", Request{Op: OpResolve, Key: "127.0.0.1:7071", Peer: &PeerMessage{From: "127.0.0.1:7071", Token: tok}}},
		{"C 127.0.0.1:7071 7360982537641984001 2.5", Request{Op: OpResolve, Key: "127.0.0.1:7071", Peer: &PeerMessage{From: "127.0.0.1:7071", Token: tok, Age: 2500 * time.Millisecond}}},
		{"V 127.0.0.1:7071 42", Request{Op: OpApplied, Key: "127.0.0.1:7071", Peer: &PeerMessage{From: "127.0.0.1:7071", Seq: 42}}},
		{"H takeback 127.0.0.1:7070", Request{Op: OpHandoff, Key: "takeback", Addr: "127.0.0.1:7070"}},
		{"I client hello 0123abcd 127.0.0.1:7070", Request{Op: OpAuth, Key: "client", Args: []string{"hello", "0123abcd", "127.0.0.1:7070"}}},
	}
	for _, tt := range tests {
		got, err := Parse([]byte(tt.line))
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.line, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q)\n got %+v\nwant %+v", tt.line, got, tt.want)
		}
	}
}

func TestParseLineLength(t *testing.T) {
	// H takes one free-form word, so it can fill a line exactly.
	line := "H - " + strings.Repeat("a", MaxLineLen-4)
	if _, err := Parse([]byte(line + "\r\n")); err != nil {
		t.Errorf("line of MaxLineLen bytes refused: %v", err)
	}
	_, err := Parse([]byte(line + "a\n"))
	checkRefusal(t, line+"a", err, 0, WordNone, "longer than 4096 bytes")
}

func TestParseRefuses(t *testing.T) {
	key256 := strings.Repeat("k", MaxKeyLen+1)
	tooMany := "P f standby 1 1 -" + strings.Repeat(" x", MaxArgs-3)
	tests := []struct {
		line string
		op   Op
		key  string
		msg  string // the message names the field: it must contain this
	}{
		// The line and its op.
		{"", 0, "-", "empty line"},
		{"\n", 0, "-", "empty line"},
		{"\r\n", 0, "-", "empty line"},
		{"    \r\n", 0, "-", "blank line"},
		{"a deploy 30 10", 0, "deploy", `op "a"`},
		{"AB deploy", 0, "deploy", `op "AB"`},
		{"7 deploy", 0, "deploy", `op "7"`},
		{"\x00 deploy", 0, "deploy", `op "\x00"`},
		{"A\tdeploy 30 10", 0, "30", "op"},
		{"Z deploy", 'Z', "deploy", "unknown op Z"},
		{"X deploy", 'X', "deploy", "want X KEY ID"},
		{"X deploy a b", 'X', "deploy", "got 2 argument(s)"},
		{"L deploy x", 'L', "deploy", "want L KEY with nothing after it"},
		{"U deploy x", 'U', "deploy", "want U KEY with nothing after it"},
		{"A deploy 30 -- ref=1", 'A', "deploy", `wait "--" is not a number`},
		{"A deploy 30 10 ref=a-b", 'A', "deploy", `ref "a-b": want 1 to 16 letters or digits`},
		{"A deploy 30 10 ref=", 'A', "deploy", `"ref=": want limit=N, id=ID, key=KEY, mode=M, value=V or ref=R`},
		{"A deploy 30 10 ref=12345678901234567", 'A', "deploy", `want 1 to 16 letters or digits`},
		{"A deploy 30 10 ref=1 ref=2", 'A', "deploy", "ref given twice"},
		{"T deploy", 'T', "deploy", "unknown op T"},
		{"M deploy", 'M', "deploy", "unknown op M"},
		{"E deploy", 'E', "deploy", "unknown op E"},
		{"G deploy 1 1", 'G', "deploy", "unknown op G"},
		{tooMany, 'P', "f", "too many words"},
		// The key.
		{"A", 'A', "-", "missing key"},
		{"A " + key256 + " 30 10", 'A', "-", "key is 256 bytes"},
		{"A dep\tloy 30 10", 'A', "-", "key has a space, tab or control character"},
		{"A dep\x01loy 30 10", 'A', "-", "key has"},
		{"A dep\x7floy 30 10", 'A', "-", "key has"},
		{"A dep\rloy 30 10", 'A', "-", "key has"},
		{"A dep\x00loy 30 10", 'A', "-", "key has"},
		{"A deploy\n 30 10", 'A', "-", "key has"},
		// A: argument count, lease, wait.
		{"A deploy", 'A', "deploy", "want A KEY LEASE WAIT [key=KEY]... [mode=shared] [limit=N] [id=ID] [value=V] [ref=R] (seconds; wait 0 = forever, - = never queue), got 0 argument(s)"},
		{"A deploy 30", 'A', "deploy", "got 1 argument(s)"},
		{"A deploy 30 10 5", 'A', "deploy", `"5": want limit=N, id=ID, key=KEY, mode=M, value=V or ref=R after the wait`},
		{"A deploy 30 10 limit=0", 'A', "deploy", `limit "0": want a whole number from 1 to 65535`},
		{"A deploy 30 10 limit=3 limit=3", 'A', "deploy", "limit given twice"},
		{"A deploy 30 10 id=a id=b", 'A', "deploy", "id given twice"},
		{"A deploy 30 10 color=red", 'A', "deploy", `"color=red": want limit=N, id=ID, key=KEY, mode=M, value=V or ref=R`},
		{"A deploy 30 10 limit=2 id=x ref=1 5", 'A', "deploy", `"5": want limit=N`},
		{"A deploy 30 10 key=a key=b key=c key=d key=e key=f key=g key=h key=i key=j key=k key=l key=m key=n key=o key=p", 'A', "deploy", "more than 16 keys"},
		{"A deploy 30 10 key=a key=a", 'A', "deploy", "named twice"},
		{"A deploy 30 10 key=deploy", 'A', "deploy", "named twice"},
		{"A deploy 30 10 mode=shared mode=shared", 'A', "deploy", "mode given twice"},
		{"A deploy 30 10 mode=read", 'A', "deploy", "want shared or exclusive"},
		{"A deploy 30 10 value=a%2", 'A', "deploy", "two hex digits"},
		{"A deploy 30 10 value=a,b", 'A', "deploy", "must be percent-encoded"},
		{"A deploy 30 10 value=%FF", 'A', "deploy", "not UTF-8"},
		{"N deploy 7 30 color=red", 'N', "deploy", "want value=V"},
		{"N deploy 7 30 value=a value=b", 'N', "deploy", "got 4 argument(s)"},
		{"A deploy 0 10", 'A', "deploy", "lease must be greater than 0"},
		{"A deploy 0.000 10", 'A', "deploy", "lease must be greater than 0"},
		{"A deploy abc 10", 'A', "deploy", `lease "abc" is not a number of seconds`},
		{"A deploy 30 abc", 'A', "deploy", `wait "abc" is not a number of seconds`},
		{"A deploy 30 -1", 'A', "deploy", `wait "-1"`},
		{"A deploy 1.2345 10", 'A', "deploy", `lease "1.2345" has more than millisecond precision`},
		{"A deploy 30 315360001", 'A', "deploy", `wait "315360001" is more than 315360000 seconds`},
		// R: argument count, token.
		{"R deploy", 'R', "deploy", "want R KEY TOKEN, got 0 argument(s)"},
		{"R deploy 1 2", 'R', "deploy", "got 2 argument(s)"},
		{"R deploy 12x", 'R', "deploy", `token "12x" is not an unsigned 64-bit integer`},
		{"R deploy -1", 'R', "deploy", `token "-1"`},
		{"R deploy +1", 'R', "deploy", `token "+1"`},
		{"R deploy 0x10", 'R', "deploy", `token "0x10"`},
		{"R deploy 18446744073709551616", 'R', "deploy", `token "18446744073709551616" is larger than 2^64-1`},
		{"R deploy 99999999999999999999", 'R', "deploy", "token"},
		{"R deploy 123456789012345678901", 'R', "deploy", "token"},
		// N: argument count, token, lease.
		{"N deploy 7", 'N', "deploy", "want N KEY TOKEN LEASE [value=V], got 1 argument(s)"},
		{"N deploy x 30", 'N', "deploy", `token "x"`},
		{"N deploy 7 0", 'N', "deploy", "lease must be greater than 0"},
		{"N deploy 7 5.", 'N', "deploy", `lease "5."`},
		// Q, K, S, H: argument count.
		{"Q deploy extra", 'Q', "deploy", "want Q KEY with nothing after it"},
		{"K * extra", 'K', "*", "want K KEY with nothing after it"},
		{"S - extra", 'S', "-", "want S KEY with nothing after it"},
		{"H - a b", 'H', "-", "want H LABEL [ADDR]"},
		{"H - a\tb", 'H', "-", `addr "a\tb" has a tab or control character`},
		{"H - a\r", 'H', "-", "addr"},
		// Peer requests.
		{"P f standby 1", 'P', "f", "want P FROM ROLE TOKEN SEQ FLAGS"},
		{"P f standby x 1 -", 'P', "f", `token "x"`},
		{"P 0 0 0 0 \r", 'P', "0", `"\r" has a tab or control character`}, // found by FuzzParse
		{"P f stand\x1bby 1 1 -", 'P', "f", "control character"},
		{"P f standby 1 1 - \x7f", 'P', "f", "control character"},
		{"Y f", 'Y', "f", "want Y FROM TOKEN"},
		{"Y f 1 2", 'Y', "f", "want Y FROM TOKEN"},
		{"Y f x", 'Y', "f", `token "x"`},
		{"O f", 'O', "f", "want O FROM TOKEN"},
		{"O f x", 'O', "f", `token "x"`},
		{"C f", 'C', "f", "want C FROM TOKEN [AGE]"},
		{"C f 1 2 3", 'C', "f", "want C FROM TOKEN [AGE], got 3 argument(s)"},
		{"C f x", 'C', "f", `token "x"`},
		{"C f 1 -2", 'C', "f", `age "-2"`},
		{"V f", 'V', "f", "want V FROM SEQ"},
		{"V f 1x", 'V', "f", `seq "1x"`},
		{"I client", 'I', "client", "want I ROLE SECRET, I ROLE hello NONCE [ADDR] or I ROLE proof PROOF, got 0 argument(s)"},
		{"I client s\x01cret", 'I', "client", "a word after the role has a tab or control character"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.line))
		checkRefusal(t, tt.line, err, tt.op, tt.key, tt.msg)
	}
}

func checkRefusal(t *testing.T, line string, err error, op Op, key, msg string) {
	t.Helper()
	if len(line) > 40 {
		line = line[:40] + "..."
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Errorf("Parse(%q) = %v, want a *ParseError", line, err)
		return
	}
	if pe.Op != op || pe.Key != key || !strings.Contains(pe.Msg, msg) {
		t.Errorf("Parse(%q) = {Op: %q, Key: %q, Msg: %q}\nwant {Op: %q, Key: %q, Msg containing %q}", line, pe.Op, pe.Key, pe.Msg, op, key, msg)
	}
	if pe.Error() != pe.Msg {
		t.Errorf("Error() = %q, want %q", pe.Error(), pe.Msg)
	}
}

func TestParseSeconds(t *testing.T) {
	ok := map[string]time.Duration{
		"30":            30 * time.Second,
		"0.5":           500 * time.Millisecond,
		"2.25":          2250 * time.Millisecond,
		"0.001":         time.Millisecond,
		"0":             0,
		"0.0":           0,
		"1.000":         time.Second,
		"007":           7 * time.Second,
		"315360000":     MaxSeconds * time.Second,
		"315359999.999": MaxSeconds*time.Second - time.Millisecond,
		"315360000.000": MaxSeconds * time.Second,
	}
	for s, want := range ok {
		got, msg := ParseSeconds([]byte(s))
		if msg != "" || got != want {
			t.Errorf("ParseSeconds(%q) = %v, %q; want %v", s, got, msg, want)
		}
		// The same through Parse, as the wait of an acquire.
		req, err := Parse([]byte("A k 1 " + s))
		if err != nil || req.Wait != want {
			t.Errorf("Parse(A k 1 %s) = %+v, %v; want wait %v", s, req, err, want)
		}
	}
	bad := []string{"1.2345", "-1", "1e3", "abc", "", ".5", "5.", "+1", "1.2.3", "1,5", " 1", "1 ", "0x10", "1.a",
		"315360001", "315360000.001", "99999999999999999999999999", "١"}
	for _, s := range bad {
		if got, msg := ParseSeconds([]byte(s)); msg == "" {
			t.Errorf("ParseSeconds(%q) = %v, want a refusal", s, got)
		}
	}
}

func TestFormatSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{30 * time.Second, "30"},
		{500 * time.Millisecond, "0.5"},
		{2250 * time.Millisecond, "2.25"},
		{time.Millisecond, "0.001"},
		{10 * time.Millisecond, "0.01"},
		{100 * time.Millisecond, "0.1"},
		{90*time.Second + 120*time.Millisecond, "90.12"},
		{1999 * time.Microsecond, "0.001"}, // cut, not rounded
		{time.Microsecond, "0"},
		{-time.Second, "0"},
		{MaxSeconds * time.Second, "315360000"},
	}
	for _, tt := range tests {
		if got := FormatSeconds(tt.d); got != tt.want {
			t.Errorf("FormatSeconds(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := string(AppendSeconds([]byte("wait="), 2500*time.Millisecond)); got != "wait=2.5" {
		t.Errorf("AppendSeconds appended %q, want wait=2.5", got)
	}
}

func TestSecondsRoundTrip(t *testing.T) {
	check := func(d time.Duration) {
		s := FormatSeconds(d)
		got, msg := ParseSeconds([]byte(s))
		if msg != "" || got != d {
			t.Fatalf("ParseSeconds(FormatSeconds(%v) = %q) = %v, %q", d, s, got, msg)
		}
		if again := FormatSeconds(got); again != s {
			t.Fatalf("FormatSeconds is not canonical: %q then %q", s, again)
		}
	}
	for ms := range 5000 {
		check(time.Duration(ms) * time.Millisecond)
	}
	for _, d := range []time.Duration{time.Hour, 24*time.Hour + time.Millisecond, MaxSeconds*time.Second - time.Millisecond, MaxSeconds * time.Second} {
		check(d)
	}
}

func TestParseToken(t *testing.T) {
	if v, err := ParseToken("7360982537641984001"); err != nil || v != tok {
		t.Errorf("ParseToken = %d, %v", v, err)
	}
	if v, err := ParseToken("18446744073709551615"); err != nil || v != 1<<64-1 {
		t.Errorf("ParseToken(max) = %d, %v", v, err)
	}
	for _, s := range []string{"", "-1", "x", "18446744073709551616", "1 "} {
		if _, err := ParseToken(s); err == nil || !strings.HasPrefix(err.Error(), "token ") {
			t.Errorf("ParseToken(%q) = %v, want an error naming the token", s, err)
		}
	}
}

func TestCheckKey(t *testing.T) {
	for _, k := range []string{"a", "deploy", "*", "-", "a.b/c:d", "鍵", strings.Repeat("x", MaxKeyLen), "\x80\xff"} {
		if msg := CheckKey([]byte(k)); msg != "" {
			t.Errorf("CheckKey(%q) = %q, want valid", k, msg)
		}
	}
	for _, k := range []string{"", " ", "a b", "a\tb", "a\nb", "a\x00", "\x1f", "\x7f", strings.Repeat("x", MaxKeyLen+1)} {
		if CheckKey([]byte(k)) == "" {
			t.Errorf("CheckKey(%q) valid, want a refusal", k)
		}
	}
}

func TestOpString(t *testing.T) {
	if OpAcquire.String() != "A" || KindError.String() != "E" || Op(0).String() != "?" || Op('a').String() != "?" {
		t.Error("Op.String: want the letter for A..Z and ? otherwise")
	}
}

// TestDocErrors keeps the protocol document honest: every E line of an nc
// session in doc.go is what Parse says about the request line before it.
// A session whose "$ nc" line carries a comment ("# a node started with
// ...") shows a node's own refusals instead, which Parse does not know.
func TestDocErrors(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var prev string
	session := false // inside a code block that starts with "$ nc"
	n := 0
	for line := range strings.Lines(string(src)) {
		code, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			prev, session = "", false
			continue
		}
		code = strings.TrimSuffix(code, "\n")
		if strings.HasPrefix(code, "$ nc ") {
			session = !strings.Contains(code, "#")
			continue
		}
		if !session || strings.HasPrefix(code, "#") {
			continue
		}
		if strings.HasPrefix(code, "E ") && prev != "" {
			_, err := Parse([]byte(prev))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("doc.go shows %q answered with %q, but Parse accepts it", prev, code)
			} else if got := string(AppendError(nil, pe.Key, pe.Op, pe.Msg)); got != code+"\n" {
				t.Errorf("doc.go shows %q answered with\n %q\nParse says\n %q", prev, code, got)
			}
			n++
		}
		prev = code
	}
	if n < 5 {
		t.Errorf("found %d E examples in doc.go, want at least 5", n)
	}
}

func TestAcquireOptions(t *testing.T) {
	req, err := Parse([]byte("A builds 60 0 limit=3 id=ci-7f3a"))
	if err != nil || req.Limit != 3 || req.ID != "ci-7f3a" {
		t.Fatalf("%+v %v", req, err)
	}
	req, err = Parse([]byte("A builds 60 0 id=x"))
	if err != nil || req.Limit != 0 || req.ID != "x" {
		t.Fatalf("%+v %v", req, err)
	}
	if got := string(AppendAcquire(nil, "builds", 60*time.Second, 0, 3, "ci-7f3a")); got != "A builds 60 0 limit=3 id=ci-7f3a\n" {
		t.Fatalf("AppendAcquire: %q", got)
	}
	if got := string(AppendAcquire(nil, "deploy", 30*time.Second, 10*time.Second, 1, "")); got != "A deploy 30 10\n" {
		t.Fatalf("AppendAcquire of a lock: %q", got)
	}
}

func mustRef(s string) Ref {
	r, ok := MakeRef(s)
	if !ok {
		panic("bad ref " + s)
	}
	return r
}

func TestAnswersWithRef(t *testing.T) {
	r := mustRef("k7")
	for _, tt := range []struct{ got, want string }{
		{string(AppendGrantedRef(nil, "deploy", 7, r)), "A deploy 7 ref=k7\n"},
		{string(AppendTimeoutRef(nil, "deploy", r)), "T deploy ref=k7\n"},
		{string(AppendMovedRef(nil, "deploy", "127.0.0.1:7071", r)), "M deploy 127.0.0.1:7071 ref=k7\n"},
		{string(AppendErrorRef(nil, "deploy", OpAcquire, r, "queue\nfull")), "E deploy A: ref=k7 queue full\n"},
		{string(AppendErrorRef(nil, "deploy", OpAcquire, Ref{}, "queue full")), "E deploy A: queue full\n"},
		{string(AppendGrantedRef(nil, "deploy", 7, Ref{})), "A deploy 7\n"},
		{string(AppendWatch(nil, Queue{Key: "deploy", Held: true, Token: 7, LeaseLeft: time.Second, Waiting: 1,
			Waiters: []QueueWaiter{{Waited: 0, Addr: "127.0.0.1:1", ID: "b#1"}}})), "L deploy 7 1 1 0,127.0.0.1:1 wid=1,b#1\n"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	a, _ := ParseAnswer([]byte("E deploy A: ref=k7 queue full"))
	if a.Ref() != "k7" || a.ErrorText() != "queue full" || a.ReqOp() != OpAcquire {
		t.Errorf("E with ref reads as ref %q text %q op %v", a.Ref(), a.ErrorText(), a.ReqOp())
	}
	q, err := ParseQueue(mustAnswer(t, "L deploy 7 1 1 0,127.0.0.1:1 wid=1,b#1"))
	if err != nil || !q.Held || q.Token != 7 || len(q.Waiters) != 1 || q.Waiters[0].ID != "b#1" {
		t.Errorf("L answer reads as %+v, %v", q, err)
	}
}

func TestParseRefAllocatesNothing(t *testing.T) {
	line := []byte("A deploy 30 10 ref=0123456789abcdef")
	base := []byte("A deploy 30 10")
	with := testing.AllocsPerRun(100, func() { Parse(line) })
	without := testing.AllocsPerRun(100, func() { Parse(base) })
	if with != without {
		t.Errorf("Parse allocates %v times with a ref, %v without", with, without)
	}
}

func TestOpNames(t *testing.T) {
	seen := map[string]Op{}
	clients := 0
	for _, op := range Ops() {
		n := op.Name()
		if n == "" {
			t.Errorf("%s: no name", op)
		}
		if o, dup := seen[n]; dup {
			t.Errorf("%s and %s are both named %q", o, op, n)
		}
		seen[n] = op
		if op.Class() == ClassClient {
			clients++
		}
	}
	if clients != 11 || len(seen) != 16 {
		t.Errorf("%d ops, %d of them clients', want 16 and 11", len(seen), clients)
	}
	for _, op := range []Op{KindMoved, KindTimeout, KindError, Op(RecHeld), 0, 'a'} {
		if n := op.Name(); n != "" || op.Class() != ClassNone || op.ActiveOnly() || op.Redirected() {
			t.Errorf("%s is no request, yet named %q, of class %d", op, n, op.Class())
		}
	}
}

// TestOpFacts pins what the table says of each op, where a row changed
// by mistake would let a client send what it may not, or have a standby
// serve what only the active may.
func TestOpFacts(t *testing.T) {
	for _, tt := range []struct {
		line             string
		class            Class
		needs            auth.Role
		active, redirect bool
	}{
		{"A k 1 0", ClassClient, auth.Client, true, true},
		{"R k 1", ClassClient, auth.Client, true, true},
		{"N k 1 1", ClassClient, auth.Client, true, true},
		{"X k a", ClassClient, auth.Client, true, true},
		{"Q k", ClassClient, auth.Client, true, true},
		{"L k", ClassClient, auth.Client, true, true},
		{"U k", ClassClient, auth.Client, false, true},
		{"K *", ClassClient, auth.Client, true, true},
		{"S -", ClassClient, auth.Client, false, false},
		{"H -", ClassClient, auth.Admin, false, true},
		{"H takeback a:1", ClassClient, auth.Peer, false, true},
		{"I client s", ClassClient, auth.None, false, false},
		{"P a:1 standby 1 1 -", ClassPeer, auth.Peer, false, false},
		{"Y a:1 1", ClassPeer, auth.Peer, false, false},
		{"C a:1 1", ClassPeer, auth.Peer, false, false},
		{"O a:1 1", ClassPeer, auth.Peer, false, false},
		{"V a:1 1", ClassPeer, auth.Peer, false, false},
	} {
		req, err := Parse([]byte(tt.line))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.line, err)
		}
		if req.Op.Class() != tt.class || req.Needs() != tt.needs || req.Op.ActiveOnly() != tt.active || req.Op.Redirected() != tt.redirect {
			t.Errorf("%q: class %d, needs %s, active only %v, redirected %v; want %d, %s, %v, %v", tt.line,
				req.Op.Class(), req.Needs(), req.Op.ActiveOnly(), req.Op.Redirected(), tt.class, tt.needs, tt.active, tt.redirect)
		}
		if (req.Peer != nil) != (tt.class == ClassPeer) || req.Peer != nil && req.Peer.From != req.Key {
			t.Errorf("%q: Peer %+v", tt.line, req.Peer)
		}
	}
}

// TestDocRoles keeps doc.go's list of what each role may send in step
// with the table of ops.
func TestDocRoles(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(strings.ReplaceAll(string(src), "\n//", " ")), " ")
	var client, admin []string
	for _, op := range Ops() {
		req := Request{Op: op}
		switch req.Needs() {
		case auth.Client:
			client = append(client, op.String())
		case auth.Admin:
			admin = append(admin, op.String())
		}
	}
	for _, want := range []string{
		"client (" + strings.Join(client, ", ") + ")",
		"admin (a client that may also send " + strings.Join(admin, ", ") + ")",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("doc.go does not say %q, which the table of ops does", want)
		}
	}
}

// TestOpTable checks what Parse relies on of every row.
func TestOpTable(t *testing.T) {
	for i := range opTable {
		r := &opTable[i]
		if rowOf(r.op) != r {
			t.Errorf("%s: another row has the letter", r.op)
		}
		if r.min < 0 || r.max < r.min || r.max > MaxArgs || r.max > 0 && len(r.takes) == 0 || !strings.HasPrefix(r.form, r.op.String()+" ") {
			t.Errorf("%s: form %q takes %d to %d words of kinds %v", r.op, r.form, r.min, r.max, r.takes)
		}
		if (r.class == ClassPeer) != (r.needs == auth.Peer) || r.class == ClassNone {
			t.Errorf("%s: class %d needs %s", r.op, r.class, r.needs)
		}
	}
}
