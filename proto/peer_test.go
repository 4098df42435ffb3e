package proto

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	docTok3 = 7360982537641984003
	docTok4 = 7360982537641984004
	standby = "127.0.0.1:7071"
	active  = "127.0.0.1:7070"
)

// docPeerLines are the concrete peer lines of doc.go, each with the value
// it stands for. TestPeerDoc checks that the codec writes each one byte
// for byte and reads it back to that value, and that doc.go shows no
// other.
var docPeerLines = []struct {
	line string
	what string // beat, beat answer, sync, record, takeover, applied, handoff, handoff answer
	val  any
}{
	{"P 127.0.0.1:7071 standby 7360982537641984003 42 synced", "beat",
		Beat{From: standby, Role: "standby", Token: docTok3, Seq: 42, Flags: BeatFlags{Synced: true}}},
	{"P 127.0.0.1:7071 127.0.0.1:7070 active 7360982537641984003 42 127.0.0.1:7070 -", "beat answer",
		Beat{From: standby, Self: active, Role: "active", Token: docTok3, Seq: 42, Active: active}},
	{"H takeback 127.0.0.1:7070", "handoff", active},
	{"H takeback ok 127.0.0.1:7070", "handoff answer", active},
	{"Y 127.0.0.1:7071 7360982537641984001", "sync", uint64(tok)},
	{"G build 7360982537641984003 41.2", "record", Record{Kind: RecHeld, Key: "build", Token: docTok3, Lease: 41200 * time.Millisecond}},
	{"G deploy 7360982537641984002 12.75", "record", Record{Kind: RecHeld, Key: "deploy", Token: 7360982537641984002, Lease: 12750 * time.Millisecond}},
	{"Y 127.0.0.1:7071 synced 7360982537641984003 42 top=7360982537641984003", "record", Record{Kind: RecSynced, From: standby, Token: docTok3, Seq: 42, Top: docTok3}},
	{"F deploy 7360982537641984002", "record", Record{Kind: RecFree, Key: "deploy", Token: 7360982537641984002}},
	{"F build 7360982537641984003 expired", "record", Record{Kind: RecFree, Key: "build", Token: docTok3, Expired: true}},
	{"G deploy 7360982537641984004 30", "record", Record{Kind: RecHeld, Key: "deploy", Token: docTok4, Lease: 30 * time.Second}},
	{"J deploy bob#2 30 9.5", "record", Record{Kind: RecJoined, Key: "deploy", ID: "bob#2", Lease: 30 * time.Second, Wait: 9500 * time.Millisecond}},
	{"D deploy bob#2", "record", Record{Kind: RecLeft, Key: "deploy", ID: "bob#2"}},
	{"W - 7360982537641984004 45", "record", Record{Kind: RecMark, Token: docTok4, Seq: 45}},
	{"H 127.0.0.1:7071 7360982537641984004 45", "record", Record{Kind: RecHandoff, From: standby, Token: docTok4, Seq: 45}},
	{"O 127.0.0.1:7071 7360982537641984004", "takeover", uint64(docTok4)},
	{"V 127.0.0.1:7071 42", "applied", uint64(42)},
	{"V 127.0.0.1:7071 45", "applied", uint64(45)},
}

// TestPeerDoc keeps the "Peer messages" part of doc.go and the codec in
// step.
func TestPeerDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, peerPart, ok := strings.Cut(string(src), "\n// # Peer messages\n")
	if !ok {
		t.Fatal(`doc.go has no "# Peer messages" section`)
	}
	// The concrete lines of its code blocks: the ones with a number in
	// them (the grammar lines spell TOKEN and SEQ in words).
	shown := map[string]bool{}
	for line := range strings.Lines(peerPart) {
		code, ok := strings.CutPrefix(line, "//\t")
		code = strings.TrimSuffix(code, "\n")
		if ok && !strings.HasPrefix(code, "$ ") && !strings.HasPrefix(code, "#") && strings.ContainsAny(code, "0123456789") {
			shown[code] = true
		}
	}
	checked := map[string]bool{}
	for _, tt := range docPeerLines {
		checked[tt.line] = true
		if !shown[tt.line] {
			t.Errorf("%q is not a line of doc.go's peer sessions any more", tt.line)
		}
		var got []byte
		var back any
		switch tt.what {
		case "beat":
			req, err := Parse([]byte(tt.line))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.line, err)
			}
			back = req.Peer.Beat
			got = AppendBeat(nil, tt.val.(Beat))
		case "beat answer":
			if back, err = ParseBeatAnswer(mustAnswer(t, tt.line)); err != nil {
				t.Fatalf("ParseBeatAnswer(%q): %v", tt.line, err)
			}
			got = AppendBeatAnswer(nil, tt.val.(Beat))
		case "sync", "takeover":
			req, err := Parse([]byte(tt.line))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.line, err)
			}
			back = req.Peer.Token
			if tt.what == "sync" {
				got = AppendSync(nil, standby, tt.val.(uint64))
			} else {
				got = AppendTakeover(nil, standby, tt.val.(uint64))
			}
			if req.Key != standby || req.Peer.From != standby {
				t.Errorf("Parse(%q) = %+v from %+v, want it from %q", tt.line, req, req.Peer, standby)
			}
		case "applied":
			req, err := Parse([]byte(tt.line))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.line, err)
			}
			back = req.Peer.Seq
			got = AppendApplied(nil, standby, tt.val.(uint64))
		case "record":
			if back, err = ParseRecord(mustAnswer(t, tt.line)); err != nil {
				t.Fatalf("ParseRecord(%q): %v", tt.line, err)
			}
			got = AppendRecord(nil, tt.val.(Record))
		case "handoff":
			req, err := Parse([]byte(tt.line))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.line, err)
			}
			back = req.Addr
			got = AppendFields(nil, OpHandoff, req.Key, tt.val.(string))
		case "handoff answer":
			if back, err = ParseHandoffAnswer(mustAnswer(t, tt.line)); err != nil {
				t.Fatalf("ParseHandoffAnswer(%q): %v", tt.line, err)
			}
			got = AppendFields(nil, OpHandoff, "takeback", WordOK, tt.val.(string))
		default:
			t.Fatalf("unknown kind %q", tt.what)
		}
		if string(got) != tt.line+"\n" {
			t.Errorf("%s %+v is written\n %q\ndoc.go shows\n %q", tt.what, tt.val, got, tt.line)
		}
		if !reflect.DeepEqual(back, tt.val) {
			t.Errorf("%q reads as %+v, want %+v", tt.line, back, tt.val)
		}
	}
	for line := range shown {
		if !checked[line] {
			t.Errorf("doc.go shows the peer line %q, which no test checks: add it to docPeerLines", line)
		}
	}
}

func mustAnswer(t *testing.T, line string) Answer {
	t.Helper()
	a, err := ParseAnswer([]byte(line))
	if err != nil {
		t.Fatalf("ParseAnswer(%q): %v", line, err)
	}
	return a
}

// clusterFlags is how package cluster wrote the heartbeat flags before
// this codec (Node.flagsLocked): the codec must not change a byte.
func clusterFlags(f BeatFlags) string {
	var fs []string
	if f.Sticky {
		fs = append(fs, "sticky")
	}
	if f.Synced {
		fs = append(fs, "synced")
	}
	if f.Fresh {
		fs = append(fs, "fresh")
	}
	if f.Pinned {
		fs = append(fs, "pinned:"+strconv.FormatInt(f.PinnedAge.Milliseconds(), 10))
	}
	if len(fs) == 0 {
		return WordNone
	}
	return strings.Join(fs, ",")
}

// allFlags is every combination of flags, with a few pinned ages.
func allFlags() []BeatFlags {
	var out []BeatFlags
	for m := range 16 {
		f := BeatFlags{Sticky: m&1 != 0, Synced: m&2 != 0, Fresh: m&4 != 0, Pinned: m&8 != 0}
		if !f.Pinned {
			out = append(out, f)
			continue
		}
		for _, age := range []time.Duration{0, time.Millisecond, 1500 * time.Millisecond, 36 * time.Hour} {
			f.PinnedAge = age
			out = append(out, f)
		}
	}
	return out
}

func TestBeatRoundTrip(t *testing.T) {
	for _, fl := range allFlags() {
		for _, act := range []string{"", active} {
			bt := Beat{From: standby, Self: active, Role: "standby", Token: tok, Seq: 1<<64 - 1, Active: act, Flags: fl}

			// The request, byte for byte as cluster wrote it, and back.
			b := AppendBeat([]byte("x"), bt)
			want := "x" + string(AppendFields(nil, OpBeat, bt.From, bt.Role, strconv.FormatUint(bt.Token, 10), strconv.FormatUint(bt.Seq, 10), clusterFlags(fl)))
			if string(b) != want {
				t.Fatalf("AppendBeat(%+v) = %q, want %q", bt, b, want)
			}
			req, err := Parse(b[1:])
			if err != nil {
				t.Fatalf("Parse(%q): %v", b, err)
			}
			got := req.Peer.Beat
			wantReq := bt
			wantReq.Self, wantReq.Active = "", ""
			if !reflect.DeepEqual(got, wantReq) {
				t.Fatalf("Parse(%q) = %+v; want %+v", b, got, wantReq)
			}

			// The answer.
			b = AppendBeatAnswer(nil, bt)
			wantActive := act
			if wantActive == "" {
				wantActive = WordNone
			}
			want = string(AppendFields(nil, OpBeat, bt.From, bt.Self, bt.Role, strconv.FormatUint(bt.Token, 10), strconv.FormatUint(bt.Seq, 10), wantActive, clusterFlags(fl)))
			if string(b) != want {
				t.Fatalf("AppendBeatAnswer(%+v) = %q, want %q", bt, b, want)
			}
			got, err = ParseBeatAnswer(mustAnswer(t, string(b)))
			if err != nil || !reflect.DeepEqual(got, bt) {
				t.Fatalf("ParseBeatAnswer(%q) = %+v, %v; want %+v", b, got, err, bt)
			}
		}
	}
}

func TestBeatFlagsOnTheWire(t *testing.T) {
	// The age travels in whole milliseconds, cut as cluster cut it; a
	// clock stepping back writes 0 rather than a number no peer reads.
	for _, tt := range []struct {
		f    BeatFlags
		want string
	}{
		{BeatFlags{}, "-"},
		{BeatFlags{PinnedAge: time.Second}, "-"}, // an age without pinned is not written
		{BeatFlags{Sticky: true, Fresh: true}, "sticky,fresh"},
		{BeatFlags{Pinned: true, PinnedAge: 1999 * time.Microsecond}, "pinned:1"},
		{BeatFlags{Pinned: true, PinnedAge: -time.Second}, "pinned:0"},
		{BeatFlags{Synced: true, Pinned: true, PinnedAge: 42 * time.Millisecond}, "synced,pinned:42"},
		{BeatFlags{Synced: true, Paused: true, Base: 7, BaseSeq: 42, Top: 9, Prev: "127.0.0.1:7071"}, "synced,paused,base:7,bseq:42,top:9,prev:127.0.0.1:7071"},
	} {
		if got := string(appendFlags(nil, tt.f)); got != tt.want {
			t.Errorf("flags %+v written %q, want %q", tt.f, got, tt.want)
		}
	}

	// Reading: unknown flags are skipped, known ones are strict.
	for _, tt := range []struct {
		word string
		want BeatFlags
	}{
		{"-", BeatFlags{}},
		{"synced", BeatFlags{Synced: true}},
		{"fresh,sticky", BeatFlags{Sticky: true, Fresh: true}},
		{"sticky,sticky", BeatFlags{Sticky: true}},
		{"pinned:0", BeatFlags{Pinned: true}},
		{"pinned:007", BeatFlags{Pinned: true, PinnedAge: 7 * time.Millisecond}},
		{"later,synced,leader:3", BeatFlags{Synced: true}},
		{"sticky:1", BeatFlags{}}, // a later version's sticky with an argument is not this sticky
		{"pinned:9223372036854", BeatFlags{Pinned: true, PinnedAge: 9223372036854 * time.Millisecond}},
		{"paused,bseq:42,base:7,prev:[::1]:7070", BeatFlags{Paused: true, Base: 7, BaseSeq: 42, Prev: "[::1]:7070"}},
	} {
		got, msg := parseFlags(tt.word)
		if msg != "" || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseFlags(%q) = %+v, %q; want %+v", tt.word, got, msg, tt.want)
		}
	}
	for _, word := range []string{"bseq", "bseq:x", "prev", "prev:", "pinned", "pinned:", "pinned:x", "pinned:-1", "pinned:1.5", "pinned:1:2", "pinned:9223372036855", "pinned:18446744073709551616", "synced,", ",synced", "sticky,,synced", "", "syn\tced"} {
		if got, msg := parseFlags(word); msg == "" {
			t.Errorf("parseFlags(%q) = %+v, want a refusal", word, got)
		}
	}
}

func TestParseBeatRefuses(t *testing.T) {
	for _, tt := range []struct {
		line, key, msg string
	}{
		{"P f standby 1 -1 -", "f", `seq "-1" is not an unsigned 64-bit integer`},
		{"P f standby 1 18446744073709551616 -", "f", `seq "18446744073709551616" is larger than 2^64-1`},
		{"P f stand=by 1 1 -", "f", `role "stand=by" is not one word`},
		{"P f a,b 1 1 -", "f", `role "a,b" is not one word`},
		{"P f " + strings.Repeat("r", MaxKeyLen+1) + " 1 1 -", "f", "role"},
		{"P f standby\r 1 1 -", "f", `role "standby\r" is not one word without '=', ',' or control characters`},
		{"P f standby 1 1 - lat\x7fer", "f", `"lat\x7fer" has a tab or control character`},
		{"P f standby x 1 -", "f", `token "x" is not an unsigned 64-bit integer`},
		{"P f standby 1 1 pinned:x", "f", `flags "pinned:x": the MS of pinned:MS "x" is not an unsigned 64-bit integer`},
		{"P f standby 1 1 synced,pinned", "f", `flags "synced,pinned": pinned wants its age`},
		{"P f standby 1 1 synced,", "f", `flags "synced," has an empty flag`},
	} {
		_, err := Parse([]byte(tt.line))
		checkRefusal(t, tt.line, err, OpBeat, tt.key, tt.msg)
	}
	// Words after FLAGS are a later version's: tolerated.
	req, err := Parse([]byte("P f standby 1 2 synced more words\n"))
	if err != nil || !reflect.DeepEqual(req.Peer.Beat, Beat{From: "f", Role: "standby", Token: 1, Seq: 2, Flags: BeatFlags{Synced: true}}) {
		t.Errorf("a heartbeat with words after FLAGS reads as %+v, %v", req.Peer, err)
	}
}

func TestParseBeatAnswerRefuses(t *testing.T) {
	for _, tt := range []struct {
		line, msg string
	}{
		{"P f self active 1 2 -", "wants P FROM SELF ROLE TOKEN SEQ ACTIVE FLAGS, got 5 field(s)"},
		{"P f s\tlf active 1 2 - -", `self "s\tlf" has a space, tab or control character`},
		{"P f self act=ive 1 2 - -", `role "act=ive"`},
		{"P f self active 1x 2 - -", `token "1x" is not an unsigned 64-bit integer`},
		{"P f self active 1 two - -", `seq "two"`},
		{"P f self active 1 2 a\x7f -", `active "a\x7f" has a space, tab or control character`},
		{"P f self active 1 2 - pinned:soon", `flags "pinned:soon"`},
		{"P f\x01 self active 1 2 - -", "from"},
		{"E f P: f is not a peer of this node", "refused: f is not a peer of this node"},
		{"M f 127.0.0.1:7070", "of kind M, want P"},
	} {
		_, err := ParseBeatAnswer(mustAnswer(t, tt.line))
		if err == nil || !strings.HasPrefix(err.Error(), "heartbeat answer ") || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseBeatAnswer(%q) = %v, want an error containing %q", tt.line, err, tt.msg)
		}
	}
	// Fields after FLAGS are a later version's: tolerated.
	bt, err := ParseBeatAnswer(mustAnswer(t, "P f s active 1 2 - synced,future later\n"))
	if err != nil || !reflect.DeepEqual(bt, Beat{From: "f", Self: "s", Role: "active", Token: 1, Seq: 2, Flags: BeatFlags{Synced: true}}) {
		t.Errorf("ParseBeatAnswer with fields after FLAGS = %+v, %v", bt, err)
	}
}

// clusterHeld is how package cluster wrote a G record before this codec
// (appendHeld in cluster/dispatch.go): the baseline of the bytes and of
// the speed of AppendRecord.
func clusterHeld(b []byte, key string, token uint64, lease time.Duration) []byte {
	b = append(b, byte(RecHeld), ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, token, 10)
	b = append(b, ' ')
	b = AppendSeconds(b, lease)
	return append(b, '\n')
}

func TestRecordRoundTrip(t *testing.T) {
	u := strconv.FormatUint
	for _, tt := range []struct {
		r    Record
		want string // as package cluster wrote it
	}{
		{Record{Kind: RecHeld, Key: "deploy", Token: tok, Lease: 12750 * time.Millisecond}, string(clusterHeld(nil, "deploy", tok, 12750*time.Millisecond))},
		{Record{Kind: RecHeld, Key: "鍵", Token: 0, Lease: 0}, string(clusterHeld(nil, "鍵", 0, 0))},
		{Record{Kind: RecHeld, Key: strings.Repeat("k", MaxKeyLen), Token: 1<<64 - 1, Lease: MaxSeconds * time.Second}, string(clusterHeld(nil, strings.Repeat("k", MaxKeyLen), 1<<64-1, MaxSeconds*time.Second))},
		{Record{Kind: RecFree, Key: "deploy", Token: tok}, "F deploy " + u(tok, 10) + "\n"},
		{Record{Kind: RecFree, Key: "deploy", Token: tok, Expired: true}, "F deploy " + u(tok, 10) + " expired\n"},
		{Record{Kind: RecMark, Token: docTok4, Seq: 44}, string(AppendFields(nil, Op(RecMark), WordNone, u(docTok4, 10), "44"))},
		{Record{Kind: RecSynced, From: standby, Token: docTok3, Seq: 0}, string(AppendFields(nil, Op(RecSynced), standby, "synced", u(docTok3, 10), "0"))},
		{Record{Kind: RecHandoff, From: standby, Token: docTok4, Seq: 44}, string(AppendFields(nil, Op(RecHandoff), standby, u(docTok4, 10), "44"))},
		{Record{Kind: RecHandoff, From: standby, Token: docTok4, Seq: 44, Pinned: true}, string(AppendFields(nil, Op(RecHandoff), standby, u(docTok4, 10), "44", "pinned"))},
		{Record{Kind: RecMoved, Addr: standby}, string(AppendMoved(nil, WordNone, standby))},
		{Record{Kind: RecMoved, From: standby, Addr: active}, string(AppendMoved(nil, standby, active))},
		{Record{Kind: RecHeld, Key: "builds", Token: tok, Lease: time.Second, Limit: 3, ID: "a#1"}, "G builds " + u(tok, 10) + " 1 limit=3 id=a#1\n"},
		{Record{Kind: RecJoined, Key: "builds", ID: "b#2", Lease: time.Second, Wait: 2 * time.Second, Limit: 3}, "J builds b#2 1 2 limit=3\n"},
	} {
		b := AppendRecord([]byte("x"), tt.r)
		if string(b[1:]) != tt.want {
			t.Errorf("AppendRecord(%+v) = %q, want %q", tt.r, b[1:], tt.want)
		}
		got, err := ParseRecord(mustAnswer(t, string(b[1:])))
		if err != nil || !reflect.DeepEqual(got, tt.r) {
			t.Errorf("ParseRecord(%q) = %+v, %v; want %+v", b[1:], got, err, tt.r)
		}
	}
	// limit=1 is a lock, read as no limit: what the active writes of it.
	for _, line := range []string{"G k 1 1 limit=1", "J k a#1 1 0 limit=1"} {
		if r, err := ParseRecord(mustAnswer(t, line)); err != nil || r.Limit != 0 {
			t.Errorf("ParseRecord(%q) = %+v, %v; want limit 0", line, r, err)
		}
	}
	// A lease is rounded up to the millisecond: a standby never ends it
	// before the active would.
	for lease, want := range map[time.Duration]string{
		1500*time.Millisecond + 999*time.Microsecond: "G k 1 1.501\n",
		1500*time.Millisecond + 1*time.Nanosecond:    "G k 1 1.501\n",
		1500 * time.Millisecond:                      "G k 1 1.5\n",
	} {
		if b := AppendRecord(nil, Record{Kind: RecHeld, Key: "k", Token: 1, Lease: lease}); string(b) != want {
			t.Errorf("AppendRecord with lease %s = %q, want %q", lease, b, want)
		}
	}
}

func TestParseRecordRefuses(t *testing.T) {
	for _, tt := range []struct {
		line, msg string
	}{
		{"G deploy 1", `G record wants G KEY TOKEN LEASELEFT [limit=N] [id=ID] [mode=shared] [set=SET[,N]] [place=P] [value=V], got 1 field(s) after "deploy"`},
		{"G deploy 1 2 3", `G record "3": want limit=N, id=ID, mode=shared`},
		{"G deploy x 2", `G record token "x" is not an unsigned 64-bit integer`},
		{"G deploy 1 2.5000", `G record lease "2.5000" has more than millisecond precision`},
		{"G deploy 1 -2", `G record lease "-2"`},
		{"G dep\tloy 1 2", "G record key has a space, tab or control character"},
		{"G " + strings.Repeat("k", MaxKeyLen+1) + " 1 2", "G record key is 256 bytes"},
		{"F deploy", "F record wants F KEY TOKEN [expired], got 0"},
		{"F deploy 1 2", "F record wants F KEY TOKEN [expired], got 2"},
		{"F deploy 1 expired 2", "F record wants F KEY TOKEN [expired], got 3"},
		{"F deploy 18446744073709551616", `F record token "18446744073709551616" is larger than 2^64-1`},
		{"W - 1", "W record wants W - TOKEN SEQ"},
		{"W x 1 2", `W record key "x": want -`},
		{"W - 1 y", `W record seq "y"`},
		{"W - z 1", `W record token "z"`},
		{"Y a:1 synced 1", "Y record wants Y FROM synced TOKEN SEQ [top=T], got 2"},
		{"Y a:1 done 1 2", `Y record word "done": want Y FROM synced TOKEN SEQ`},
		{"Y a:1 synced 1 q", `Y record seq "q"`},
		{"Y a:1 synced q 1", `Y record token "q"`},
		{"Y a:1 synced 1 2 3", `Y record word "3": want top=T or nothing after SEQ`},
		{"Y a:1 synced 1 2 top=x", `Y record top "x"`},
		{"Y a:1 synced 1 2 top=1 x", "Y record wants Y FROM synced TOKEN SEQ [top=T], got 5"},
		{"Y a\x01 synced 1 1", `Y record from "a\x01" has a space, tab or control character`},
		{"Y a:1 123", "Y record wants Y FROM synced TOKEN SEQ [top=T], got 1"}, // the request, not the record
		{"H a:1 1", "H record wants H FROM TOKEN SEQ [pinned], got 1"},
		{"H a:1 1 2 pinned x", "H record wants H FROM TOKEN SEQ [pinned], got 4"},
		{"H a:1 1 2 sticky", `H record word "sticky": want pinned or nothing after SEQ`},
		{"H a:1 1 s", `H record seq "s"`},
		{"H a:1 t 1", `H record token "t"`},
		{"H a\x7f 1 2", `H record from`},
		{"H - ok 127.0.0.1:7071", `H record token "ok"`}, // a handoff answer is no record
		{"M -", "M record wants M - ADDR, got 0"},
		{"M - a b", "M record wants M - ADDR, got 2"},
		{"M - a\rb", `M record addr "a\rb" has a space, tab or control character`},
		{"M a\x1b b", `M record from "a\x1b"`},
		{"E a:1 Y: a:1 is not a peer of this node", "stream refused: a:1 is not a peer of this node"},
		{"A deploy 1", `unknown record kind "A"`},
		{"O a:1 1", `unknown record kind "O"`},
	} {
		_, err := ParseRecord(mustAnswer(t, tt.line))
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseRecord(%q) = %v, want an error containing %q", tt.line, err, tt.msg)
		}
	}
}

func TestAppendRecordPanicsOnAnotherKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("AppendRecord of kind A did not panic")
		}
	}()
	AppendRecord(nil, Record{Kind: RecordKind(OpAcquire), Key: "k"})
}

func TestSyncAndTakeover(t *testing.T) {
	for _, tt := range []struct {
		b    []byte
		want string
		op   Op
	}{
		{AppendSync([]byte("x"), standby, 0), "Y 127.0.0.1:7071 0\n", OpSync},
		{AppendSync(nil, standby, 1<<64-1), "Y 127.0.0.1:7071 18446744073709551615\n", OpSync},
		{AppendTakeover([]byte("x"), standby, docTok4), "O 127.0.0.1:7071 7360982537641984004\n", OpTakeover},
	} {
		line := strings.TrimPrefix(string(tt.b), "x")
		if line != tt.want {
			t.Errorf("got %q, want %q", tt.b, tt.want)
		}
		// As package cluster wrote it, and as the receiving node reads it.
		parts := strings.Fields(tt.want)
		if want := string(AppendFields(nil, tt.op, parts[1], parts[2])); line != want {
			t.Errorf("got %q, cluster wrote %q", line, want)
		}
		req, err := Parse([]byte(line))
		if err != nil || req.Op != tt.op || req.Key != standby || req.Peer.From != standby || strconv.FormatUint(req.Peer.Token, 10) != parts[2] {
			t.Errorf("Parse(%q) = %+v, %v", line, req, err)
		}
	}
}

func TestParseHandoffAnswer(t *testing.T) {
	for _, tt := range []struct {
		line, addr, msg string
	}{
		{"H - ok 127.0.0.1:7071", "127.0.0.1:7071", ""},
		{"H takeback ok 127.0.0.1:7070\n", "127.0.0.1:7070", ""},
		{"E - H: no standby is caught up to take the role", "", "handoff refused: no standby is caught up to take the role"},
		{"E - H:", "", "handoff refused: "},
		{"M - 127.0.0.1:7070", "", "not active: the active is at 127.0.0.1:7070"},
		{"M -", "", "handoff answered M without one address"},
		{"M - a b", "", "handoff answered M without one address"},
		{"H - ok", "", `handoff answer wants H LABEL ok NEWACTIVE, got "ok"`},
		{"H - ok a b", "", "handoff answer wants H LABEL ok NEWACTIVE"},
		{"H - done a", "", `got "done a"`},
		{"H - ok a\tb", "", `handoff answer new active "a\tb" has a space, tab or control character`},
		{"S - self=a", "", "handoff answered with kind S, want H, M or E"},
	} {
		addr, err := ParseHandoffAnswer(mustAnswer(t, tt.line))
		if tt.msg == "" {
			if err != nil || addr != tt.addr {
				t.Errorf("ParseHandoffAnswer(%q) = %q, %v; want %q", tt.line, addr, err, tt.addr)
			}
			continue
		}
		if err == nil || addr != "" || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseHandoffAnswer(%q) = %q, %v; want an error containing %q", tt.line, addr, err, tt.msg)
		}
	}
}

// The replication hot path: a G or F record per grant, renewal and
// release, written under the node's lock.
func TestAppendRecordAllocs(t *testing.T) {
	buf := make([]byte, 0, 128)
	for _, r := range []Record{
		{Kind: RecHeld, Key: "deploy", Token: tok, Lease: 12750 * time.Millisecond},
		{Kind: RecFree, Key: "deploy", Token: tok},
		{Kind: RecMark, Token: tok, Seq: 44},
	} {
		if n := testing.AllocsPerRun(100, func() { buf = AppendRecord(buf[:0], r) }); n != 0 {
			t.Errorf("AppendRecord(%c) allocates %v times, want 0", r.Kind, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		buf = AppendBeat(buf[:0], Beat{From: standby, Role: "active", Token: tok, Seq: 44, Flags: BeatFlags{Synced: true, Pinned: true, PinnedAge: time.Hour}})
	}); n != 0 {
		t.Errorf("AppendBeat allocates %v times, want 0", n)
	}
}

// A heartbeat's refusals are answerable with E like any other.
func TestParseBeatErrorIsParseError(t *testing.T) {
	_, err := Parse([]byte("P f standby 1 1 pinned:x"))
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("Parse error %T, want *ParseError", err)
	}
	if got := string(AppendError(nil, pe.Key, pe.Op, pe.Msg)); !strings.HasPrefix(got, "E f P: flags ") {
		t.Errorf("E answer %q", got)
	}
}

func BenchmarkAppendRecordHeld(b *testing.B) {
	buf := make([]byte, 0, 64)
	r := Record{Kind: RecHeld, Key: "deploy", Token: tok, Lease: 12750 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendRecord(buf[:0], r)
	}
}

// BenchmarkAppendHeldBaseline is cluster's appendHeld, for comparison
// with BenchmarkAppendRecordHeld.
func BenchmarkAppendHeldBaseline(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = clusterHeld(buf[:0], "deploy", tok, 12750*time.Millisecond)
	}
}

func BenchmarkAppendRecordFree(b *testing.B) {
	buf := make([]byte, 0, 64)
	r := Record{Kind: RecFree, Key: "deploy", Token: tok}
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendRecord(buf[:0], r)
	}
}

func BenchmarkParseRecordHeld(b *testing.B) {
	a, err := ParseAnswer([]byte("G deploy 7360982537641984002 12.75\n"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRecord(a); err != nil {
			b.Fatal(err)
		}
	}
}
