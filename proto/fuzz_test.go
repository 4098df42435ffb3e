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
	"A a 30 10 key=b key=c mode=shared id=x value=node%201%20(10.0.0.1) ref=r1\n",
	"A a 30 - key=b limit=3\n",
	"A a 30 10 value=\n",
	"A a 30 10 value=%e2%82%ac\n",
	"N a 7 30 value=x\n",
	"N a 7 30 value=\n",
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
	"C 127.0.0.1:7071 7360982537641984004\n",
	"C 0 0000", // found by FuzzParse: format did not know C
	"V 0 0",    // found by FuzzParse: format did not know V
	"I client s3cret\n",
	"I peer hello 0123abcd\n",
	"A deploy 30 - ref=1\n",
	"A deploy 30 10 limit=3 id=ci#1 ref=zZ09\n",
	"X deploy ci#1\n",
	"L deploy\n",
	"U deploy\n",
	// Refused.
	"A deploy 30 -- ref=1",
	"A deploy 30 10 ref=",
	"A deploy 30 10 ref=a-b",
	"A deploy 30 10 ref=12345678901234567",
	"A deploy 30 10 ref=1 ref=2",
	"X deploy a b",
	"L deploy x",
	"U deploy x",
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
		if (req.Op.Class() == ClassPeer) != (req.Peer != nil) || req.Peer != nil && req.Peer.From != req.Key {
			t.Fatalf("Parse(%q) = %+v: a peer message has its fields, from its key, and nothing else has", line, req)
		}
		if req.Peer != nil && (req.Peer.Age < 0 || req.Peer.Age%time.Millisecond != 0) {
			t.Fatalf("Parse(%q): age %v", line, req.Peer.Age)
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
		if req.Try {
			word("-")
		} else {
			word(FormatSeconds(req.Wait))
		}
		if req.Limit != 0 {
			word("limit=" + strconv.Itoa(req.Limit))
		}
		if req.ID != "" {
			word("id=" + req.ID)
		}
		for _, k := range req.Keys {
			word("key=" + k)
		}
		if req.Mode != 0 {
			word("mode=" + req.Mode.String())
		}
		if req.HasValue {
			word("value=" + EncodeValue(req.Value))
		}
		b = AppendRef(b, req.Ref)
	case OpWithdraw:
		word(req.ID)
	case OpWatch, OpUnwatch:
	case OpRelease:
		word(strconv.FormatUint(req.Token, 10))
	case OpRenew:
		word(strconv.FormatUint(req.Token, 10))
		word(FormatSeconds(req.Lease))
		if req.HasValue {
			word("value=" + EncodeValue(req.Value))
		}
	case OpQueue, OpKeys, OpStatus:
	case OpHandoff:
		if req.Addr != "" {
			word(req.Addr)
		}
	case OpAuth:
		for _, a := range req.Args {
			word(a)
		}
	case OpBeat:
		return AppendBeat(nil, req.Peer.Beat)
	case OpSync:
		return AppendSync(nil, req.Peer.From, req.Peer.Token)
	case OpTakeover:
		return AppendTakeover(nil, req.Peer.From, req.Peer.Token)
	case OpApplied:
		return AppendApplied(nil, req.Peer.From, req.Peer.Seq)
	case OpResolve:
		word(strconv.FormatUint(req.Peer.Token, 10))
		if req.Peer.Age != 0 {
			word(FormatSeconds(req.Peer.Age))
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
		"X k ok\n",
		"X k none\n",
		"L k - - 0\n",
		"L deploy 7360982537641984007 28.1 1 0,127.0.0.1:51300\n",
		"U k ok\n",
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

// FuzzParseStatus proves that ParseStatus never panics on any answer line
// and that a status it reads is written back to the same status.
func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{
		docStatus,
		"S - self=127.0.0.1:7070 role=active active=127.0.0.1:7070 token=0 seq=0 uptime=0.001 keys=0 waiters=0 sticky=true\n",
		"S - self=a role=joining active=- future=1 peer=b:2,unknown,down,0,0,0\n",
		"S label\n",
		"S - self=a=b role= active=\n",
		"S - keys=+5 waiters=-1 sticky=yes\n",
		"S - peer=a,b,c,d,e,f\n",
		"S - peer=,,,,,\n",
		"S - token=18446744073709551616\n",
		"S - uptime=1.2345\n",
		"S - self\n",
		"Q deploy - - 0\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := ParseAnswer(line)
		if err != nil {
			return
		}
		st, err := ParseStatus(a)
		if err != nil {
			if a.Kind == OpStatus && err.Error() == "" {
				t.Fatalf("ParseStatus(%q): error without words", line)
			}
			return
		}
		if a.Kind != OpStatus {
			t.Fatalf("ParseStatus(%q) read an answer of kind %s", line, a.Kind)
		}
		if strayEOL(line) {
			return
		}
		back := AppendStatus(nil, a.Key, st)
		a2, err := ParseAnswer(back)
		if err != nil {
			t.Fatalf("ParseStatus(%q) = %+v, written back as %q, unreadable: %v", line, st, back, err)
		}
		st2, err := ParseStatus(a2)
		if err != nil || !reflect.DeepEqual(st, st2) {
			t.Fatalf("ParseStatus(%q) = %+v\nwritten back as %q\nreads %+v, %v", line, st, back, st2, err)
		}
	})
}

// strayEOL reports whether line holds a CR or LF before its line ending:
// ParseAnswer keeps them inside words, and a word ending in one does not
// survive a rewrite that puts it last on a line.
func strayEOL(line []byte) bool {
	return bytes.ContainsAny(trimEOL(line), "\r\n")
}

// FuzzParseQueue proves that ParseQueue never panics on any answer line
// and that a queue it reads is written back to the same queue.
func FuzzParseQueue(f *testing.F) {
	for _, s := range []string{
		"Q deploy 7360982537641984001 29.5 2 3.2,127.0.0.1:51234 0.4,127.0.0.1:51240\n",
		"Q nothing - - 0\n",
		"Q k - - 1 1,-\n",
		"Q k 1 0 0\n",
		"Q k - x 0\n",
		"Q k - - 1 1\n",
		"Q k - - 1 1,a,b\n",
		"Q k - - 2 1,a\n",
		"Q k 18446744073709551616 1 0\n",
		"Q k 1 1.2345 0\n",
		"Q k - - -0\n",
		"Q k - - +1 0.5,-\n",
		"K k - - 0\n",
		"Q deploy 7 29.5 1 3.2,127.0.0.1:51234 id=7,alice@ci-1:4242#9f3c-1 wid=1,bob#2\n",
		"Q builds 7 30 1 1,- limit=3 holder=9,12.5 id=9,carol#1 id=7,a=b,c\n",
		"Q k 7 1 0 id=7,a id=7,b\n",
		"Q k - - 1 1,- wid=1,x later=1\n",
		"L deploy 7 29.5 1 3.2,127.0.0.1:51234 id=7,alice#1 wid=1,bob#2\n",
		"L k - - 0\n",
		"Q cfg 7 29.1 0 holder=9,29.8 mode=shared\n",
		"Q cfg 7 29.1 2 1,- 2,- holder=9,29.8 mode=shared wmode=2,shared set=7,7 wset=1,a+b%2Bc\n",
		"Q sem 7 1 0 limit=3 holder=9,2 place=7,1 place=9,2 value=9,node%201\n",
		"Q k 7 1 0 value=7,%FF\n",
		"Q k 7 1 0 mode=shared place=7,0\n",
		"Q k - - 1 1,- wset=1,a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := ParseAnswer(line)
		if err != nil {
			return
		}
		q, err := ParseQueue(a)
		if err != nil {
			return
		}
		if (a.Kind != OpQueue && a.Kind != OpWatch) || q.Key != a.Key {
			t.Fatalf("ParseQueue(%q) = %+v from an answer %+v", line, q, a)
		}
		if q.LeaseLeft < 0 || !q.Held && (q.Token != 0 || q.LeaseLeft != 0) {
			t.Fatalf("ParseQueue(%q) = %+v", line, q)
		}
		for _, w := range q.Waiters {
			if w.Waited < 0 || w.Waited%time.Millisecond != 0 {
				t.Fatalf("ParseQueue(%q) = %+v: waited", line, q)
			}
		}
		if strayEOL(line) {
			return
		}
		back := AppendQueue(nil, q)
		if a.Kind == OpWatch {
			back = AppendWatch(nil, q)
		}
		a2, err := ParseAnswer(back)
		if err != nil {
			t.Fatalf("ParseQueue(%q) = %+v, written back as %q, unreadable: %v", line, q, back, err)
		}
		q2, err := ParseQueue(a2)
		if err != nil || !reflect.DeepEqual(q, q2) {
			t.Fatalf("ParseQueue(%q) = %+v\nwritten back as %q\nreads %+v, %v", line, q, back, q2, err)
		}
	})
}

// peerSeeds are the peer lines of doc.go, and near misses of them.
var peerSeeds = []string{
	"P 127.0.0.1:7071 standby 7360982537641984003 42 synced\n",
	"P 127.0.0.1:7071 127.0.0.1:7070 active 7360982537641984003 42 127.0.0.1:7070 -\n",
	"P 127.0.0.1:7070 active 7360982537641984003 42 sticky,synced,fresh,pinned:1500\n",
	"P a:1 b:2 active 1 2 - synced,pinned:0 later words\n",
	"P a:1 standby 1 2 later,synced,leader:3 more\n",
	"P a:1 standby 1 2 synced,\n",
	"P a:1 standby 1 2 pinned\n",
	"P a:1 standby 1 2 pinned:-1\n",
	"P a:1 standby 1 2 pinned:9223372036855\n",
	"P a:1 stand=by 1 2 -\n",
	"P a:1 a,b 1 2 -\n",
	"P a:1 b:2 active 1 2 a\x7f -\n",
	"Y 127.0.0.1:7071 7360982537641984001\n",
	"G build 7360982537641984003 41.2\n",
	"G deploy 7360982537641984002 12.75\n",
	"Y 127.0.0.1:7071 synced 7360982537641984003 42\n",
	"F deploy 7360982537641984002\n",
	"J deploy bob#2 30 9.5\n",
	"J builds carol#1 60 0 limit=3\n",
	"D deploy bob#2\n",
	"G cfg 7360982537641984004 30 mode=shared\n",
	"G a 7360982537641984004 30 id=x set=7360982537641984004,3\n",
	"G sem 7360982537641984004 30 limit=3 place=2 value=node%201\n",
	"G a 7 30 set=7\n",
	"G a 7 30 set=7,1\n",
	"G a 7 30 value=x mode=shared\n",
	"J a bob#2 30 0 mode=shared keys=b+c%20d\n",
	"J a bob#2 30 0 keys=b+b\n",
	"J deploy bob#2 0 1\n",
	"J deploy bob#2 30 1 id=x\n",
	"D deploy\n",
	"G deploy 7360982537641984004 30\n",
	"W - 7360982537641984004 44\n",
	"H 127.0.0.1:7071 7360982537641984004 44\n",
	"H 127.0.0.1:7071 7360982537641984004 44 pinned\n",
	"O 127.0.0.1:7071 7360982537641984004\n",
	"M - 127.0.0.1:7071\n",
	"M 127.0.0.1:7071 127.0.0.1:7070\n",
	"E 127.0.0.1:7071 Y: 127.0.0.1:7071 is not a peer of this node\n",
	"H takeback 127.0.0.1:7070\n",
	"H takeback ok 127.0.0.1:7070\n",
	"H - ok 127.0.0.1:7071\n",
	"E - H: no standby is caught up to take the role; start one or check lockctl status\n",
	"G deploy 1 2.5000\n",
	"G dep\tloy 1 2\n",
	"W x 1 2\n",
	"Y a:1 done 1 2\n",
	"H a:1 1 2 sticky\n",
	"M -\n",
	"H - ok\n",
	"", "P", "P a:1", "G", "W -",
}

// FuzzParseBeat proves that a heartbeat Parse reads holds only words
// the grammar allows, that its refusals name P and the sender, and that
// it is written back to the same heartbeat, in the canonical form.
func FuzzParseBeat(f *testing.F) {
	for _, s := range peerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := Parse(line)
		if err != nil {
			pe := err.(*ParseError)
			if pe.Op == OpBeat && pe.Key != WordNone {
				if w := strings.Fields(string(trimEOL(line))); len(w) < 2 || pe.Key != w[1] {
					t.Fatalf("Parse(%q) = %+v: want the sender as its key", line, pe)
				}
			}
			return
		}
		if req.Op != OpBeat {
			return
		}
		bt := req.Peer.Beat
		if bt.From != req.Key || bt.Self != "" || bt.Active != "" {
			t.Fatalf("Parse(%q) = %+v from %+v", line, bt, req)
		}
		checkBeatWords(t, line, bt)
		back := AppendBeat(nil, bt)
		req2, err := Parse(back)
		if err != nil {
			t.Fatalf("Parse(%q) = %+v, written back as %q, refused: %v", line, bt, back, err)
		}
		if !reflect.DeepEqual(req2.Peer.Beat, bt) {
			t.Fatalf("Parse(%q) = %+v\nwritten back as %q\nreads %+v", line, bt, back, req2.Peer.Beat)
		}
		if again := AppendBeat(nil, req2.Peer.Beat); string(again) != string(back) {
			t.Fatalf("AppendBeat is not canonical: %q then %q", back, again)
		}
	})
}

// FuzzParseBeatAnswer proves that ParseBeatAnswer never panics on any
// answer line and that a heartbeat answer it reads is written back to the
// same heartbeat, in the canonical form.
func FuzzParseBeatAnswer(f *testing.F) {
	for _, s := range peerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := ParseAnswer(line)
		if err != nil {
			return
		}
		bt, err := ParseBeatAnswer(a)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "heartbeat answer ") {
				t.Fatalf("ParseBeatAnswer(%q) = %v: want an error that says what it read", line, err)
			}
			return
		}
		if a.Kind != OpBeat || bt.From != a.Key || bt.Active == WordNone {
			t.Fatalf("ParseBeatAnswer(%q) = %+v", line, bt)
		}
		checkBeatWords(t, line, bt)
		back := AppendBeatAnswer(nil, bt)
		a2, err := ParseAnswer(back)
		if err != nil {
			t.Fatalf("ParseBeatAnswer(%q) = %+v, written back as %q, unreadable: %v", line, bt, back, err)
		}
		bt2, err := ParseBeatAnswer(a2)
		if err != nil || !reflect.DeepEqual(bt2, bt) {
			t.Fatalf("ParseBeatAnswer(%q) = %+v\nwritten back as %q\nreads %+v, %v", line, bt, back, bt2, err)
		}
		if again := AppendBeatAnswer(nil, bt2); string(again) != string(back) {
			t.Fatalf("AppendBeatAnswer is not canonical: %q then %q", back, again)
		}
	})
}

// checkBeatWords checks that every word of an accepted heartbeat is one
// the grammar allows, so that a node passes on nothing it could not write.
func checkBeatWords(t *testing.T, line []byte, bt Beat) {
	t.Helper()
	for _, w := range []string{bt.From, bt.Self, bt.Active} {
		if w != "" && CheckKey([]byte(w)) != "" {
			t.Fatalf("heartbeat %q accepted with address %q", line, w)
		}
	}
	if _, msg := checkRole(bt.Role); msg != "" {
		t.Fatalf("heartbeat %q accepted with role %q: %s", line, bt.Role, msg)
	}
	if bt.Flags.PinnedAge < 0 || bt.Flags.PinnedAge%time.Millisecond != 0 || !bt.Flags.Pinned && bt.Flags.PinnedAge != 0 {
		t.Fatalf("heartbeat %q accepted with flags %+v", line, bt.Flags)
	}
}

// FuzzParseRecord proves that ParseRecord never panics on any line and
// that a record it reads is written back to the same record, in the
// canonical form.
func FuzzParseRecord(f *testing.F) {
	for _, s := range peerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := ParseAnswer(line)
		if err != nil {
			return
		}
		r, err := ParseRecord(a)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseRecord(%q): error without words", line)
			}
			return
		}
		if r.Kind != RecordKind(a.Kind) {
			t.Fatalf("ParseRecord(%q) = %+v from kind %s", line, r, a.Kind)
		}
		for _, w := range []string{r.Key, r.From, r.Addr} {
			if w != "" && CheckKey([]byte(w)) != "" {
				t.Fatalf("ParseRecord(%q) = %+v: %q is not a word of the grammar", line, r, w)
			}
		}
		if r.Lease < 0 || r.Lease%time.Millisecond != 0 {
			t.Fatalf("ParseRecord(%q) = %+v: lease", line, r)
		}
		back := AppendRecord(nil, r)
		a2, err := ParseAnswer(back)
		if err != nil {
			t.Fatalf("ParseRecord(%q) = %+v, written back as %q, unreadable: %v", line, r, back, err)
		}
		r2, err := ParseRecord(a2)
		if err != nil || r2 != r {
			t.Fatalf("ParseRecord(%q) = %+v\nwritten back as %q\nreads %+v, %v", line, r, back, r2, err)
		}
		if again := AppendRecord(nil, r2); string(again) != string(back) {
			t.Fatalf("AppendRecord is not canonical: %q then %q", back, again)
		}
	})
}

// FuzzParseHandoffAnswer proves that ParseHandoffAnswer never panics on
// any line, and that it accepts only "H label ok NEWACTIVE" with a
// NEWACTIVE the grammar allows.
func FuzzParseHandoffAnswer(f *testing.F) {
	for _, s := range peerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := ParseAnswer(line)
		if err != nil {
			return
		}
		addr, err := ParseHandoffAnswer(a)
		if err != nil {
			if addr != "" || err.Error() == "" {
				t.Fatalf("ParseHandoffAnswer(%q) = %q, %v", line, addr, err)
			}
			if a.Kind == KindMoved && len(a.Fields) == 1 && !strings.Contains(err.Error(), a.Fields[0]) {
				t.Fatalf("ParseHandoffAnswer(%q) = %v: want the error to name the active", line, err)
			}
			if a.Kind == KindError && !strings.Contains(err.Error(), a.ErrorText()) {
				t.Fatalf("ParseHandoffAnswer(%q) = %v: want the node's words", line, err)
			}
			return
		}
		if a.Kind != OpHandoff || len(a.Fields) != 2 || a.Fields[0] != WordOK || addr != a.Fields[1] || CheckKey([]byte(addr)) != "" {
			t.Fatalf("ParseHandoffAnswer(%q) accepted %+v as %q", line, a, addr)
		}
		back := AppendFields(nil, OpHandoff, a.Key, WordOK, addr)
		a2, err := ParseAnswer(back)
		if err != nil {
			t.Fatalf("handoff answer %q written back as %q, unreadable: %v", line, back, err)
		}
		if addr2, err := ParseHandoffAnswer(a2); err != nil || addr2 != addr {
			t.Fatalf("handoff answer %q written back as %q reads %q, %v", line, back, addr2, err)
		}
	})
}

// FuzzAnswerRef proves that the ref of an acquire's answer is read back
// from every answer form that carries it, that taking it out leaves the
// answer an acquire without ref= gets, and that Answer.Ref never panics.
func FuzzAnswerRef(f *testing.F) {
	for _, s := range []string{"1", "zZ09", "0123456789abcdef", "", "a-b", "12345678901234567"} {
		f.Add("deploy", s, "queue full: 50 clients wait", uint64(7))
	}
	f.Fuzz(func(t *testing.T, key, ref, msg string, token uint64) {
		if CheckKey([]byte(key)) != "" {
			return
		}
		r, ok := MakeRef(ref)
		if !ok {
			if _, err := Parse([]byte("A k 1 1 ref=" + ref)); err == nil && !strings.ContainsAny(ref, " \r\n") {
				t.Fatalf("MakeRef(%q) refused what Parse accepts", ref)
			}
			return
		}
		if r.String() != ref {
			t.Fatalf("MakeRef(%q).String() = %q", ref, r.String())
		}
		for _, c := range []struct{ with, without []byte }{
			{AppendGrantedRef(nil, key, token, r), AppendGranted(nil, key, token)},
			{AppendTimeoutRef(nil, key, r), AppendTimeout(nil, key)},
			{AppendMovedRef(nil, key, "127.0.0.1:7071", r), AppendMoved(nil, key, "127.0.0.1:7071")},
			{AppendErrorRef(nil, key, OpAcquire, r, msg), AppendError(nil, key, OpAcquire, msg)},
		} {
			a, err := ParseAnswer(c.with)
			if err != nil {
				t.Fatalf("%q unreadable: %v", c.with, err)
			}
			if a.Ref() != ref {
				t.Fatalf("%q: Ref() = %q, want %q", c.with, a.Ref(), ref)
			}
			b, _ := ParseAnswer(c.without)
			if got := a.WithoutRef(); !reflect.DeepEqual(got, b) || got.ErrorText() != b.ErrorText() || (a.Kind == KindError && a.ErrorText() != b.ErrorText()) {
				t.Fatalf("%q without its ref is %+v (%q, %q), want %+v (%q)", c.with, got, got.ErrorText(), a.ErrorText(), b, b.ErrorText())
			}
		}
	})
}
