package proto

import (
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAppendLines(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{string(AppendGranted(nil, "deploy", tok)), "A deploy 7360982537641984001\n"},
		{string(AppendGranted(nil, "deploy", 1<<64-1)), "A deploy 18446744073709551615\n"},
		{string(AppendTimeout(nil, "deploy")), "T deploy\n"},
		{string(AppendMoved(nil, "deploy", "127.0.0.1:7070")), "M deploy 127.0.0.1:7070\n"},
		{string(AppendWord(nil, OpRelease, "deploy", WordOK)), "R deploy ok\n"},
		{string(AppendWord(nil, OpRelease, "deploy", WordNotHeld)), "R deploy notheld\n"},
		{string(AppendWord(nil, OpRenew, "build", WordOK)), "N build ok\n"},
		{string(AppendWord(nil, OpRenew, "build", WordNotHeld)), "N build notheld\n"},
		{string(AppendError(nil, "deploy", OpAcquire, "lease must be greater than 0 seconds")), "E deploy A: lease must be greater than 0 seconds\n"},
		{string(AppendError(nil, "", 0, "empty line")), "E - ?: empty line\n"},
		{string(AppendError(nil, "-", OpHandoff, "no live successor")), "E - H: no live successor\n"},
		{string(AppendError(nil, "k", OpRelease, "two\nlines\r\nhere")), "E k R: two lines  here\n"},
		{string(AppendFields(nil, OpKeys, "*", "3", "build", "deploy", "deploy-db")), "K * 3 build deploy deploy-db\n"},
		{string(AppendFields(nil, OpKeys, "nothing", "0")), "K nothing 0\n"},
		{string(AppendFields(nil, OpHandoff, "-", WordOK, "127.0.0.1:7071")), "H - ok 127.0.0.1:7071\n"},
		{string(AppendFields(nil, Op(RecHeld), "deploy", "7360982537641984002", "12.75")), "G deploy 7360982537641984002 12.75\n"},
		{string(AppendFields(nil, Op(RecFree), "deploy", "7360982537641984002")), "F deploy 7360982537641984002\n"},
		{string(AppendFields(nil, Op(RecMark), WordNone, "7360982537641984004", "44")), "W - 7360982537641984004 44\n"},
		{string(AppendFields(nil, Op(RecSynced), "127.0.0.1:7071", "synced", "7360982537641984003", "42")), "Y 127.0.0.1:7071 synced 7360982537641984003 42\n"},
		{string(AppendFields(nil, Op(RecHandoff), "127.0.0.1:7071", "7360982537641984004", "44")), "H 127.0.0.1:7071 7360982537641984004 44\n"},
		{string(AppendFields(nil, OpTakeover, "127.0.0.1:7071", "7360982537641984004")), "O 127.0.0.1:7071 7360982537641984004\n"},
		{string(AppendFields(nil, OpStatus, "-")), "S -\n"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q\nwant %q", tt.got, tt.want)
		}
	}

	// A server batches answers into one buffer: appending keeps what is there.
	b := AppendGranted(nil, "a", 1)
	b = AppendTimeout(b, "b")
	b = AppendMoved(b, "c", "127.0.0.1:7070")
	if got, want := string(b), "A a 1\nT b\nM c 127.0.0.1:7070\n"; got != want {
		t.Errorf("batched answers = %q, want %q", got, want)
	}
}

// An answer to an accepted request never needs more than the key's own
// allocation, and a granted answer into a buffer with room needs none.
func TestAllocs(t *testing.T) {
	line := []byte("A deploy 30 10\n")
	if n := testing.AllocsPerRun(100, func() { Parse(line) }); n > 1 {
		t.Errorf("Parse(acquire) allocates %v times, want at most 1 (the key)", n)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendGranted(buf[:0], "deploy", tok) }); n != 0 {
		t.Errorf("AppendGranted allocates %v times, want 0", n)
	}
}

func TestParseAnswer(t *testing.T) {
	tests := []struct {
		line string
		want Answer
	}{
		{"A deploy 7360982537641984001\n", Answer{Kind: 'A', Key: "deploy", Fields: []string{"7360982537641984001"}}},
		{"A deploy 7360982537641984001\r\n", Answer{Kind: 'A', Key: "deploy", Fields: []string{"7360982537641984001"}}},
		{"T deploy\n", Answer{Kind: 'T', Key: "deploy"}},
		{"T deploy", Answer{Kind: 'T', Key: "deploy"}},
		{"M deploy 127.0.0.1:7070", Answer{Kind: 'M', Key: "deploy", Fields: []string{"127.0.0.1:7070"}}},
		{"R deploy notheld", Answer{Kind: 'R', Key: "deploy", Fields: []string{"notheld"}}},
		{"E - ?: empty line", Answer{Kind: 'E', Key: "-", Fields: []string{"?:", "empty", "line"}}},
		{"Q nothing - - 0", Answer{Kind: 'Q', Key: "nothing", Fields: []string{"-", "-", "0"}}},
		{"K *  2  a  b ", Answer{Kind: 'K', Key: "*", Fields: []string{"2", "a", "b"}}},
		// Only spaces separate words: keys may hold Unicode white space.
		{"K * 2 a\u00a0b c\u3000d", Answer{Kind: 'K', Key: "*", Fields: []string{"2", "a\u00a0b", "c\u3000d"}}},
		{"K * 1 a\u0085b", Answer{Kind: 'K', Key: "*", Fields: []string{"1", "a\u0085b"}}},
		{"A k\u00a0ey 1", Answer{Kind: 'A', Key: "k\u00a0ey", Fields: []string{"1"}}},
		{"W - 7360982537641984004 44", Answer{Kind: 'W', Key: "-", Fields: []string{"7360982537641984004", "44"}}},
	}
	for _, tt := range tests {
		got, err := ParseAnswer([]byte(tt.line))
		if err != nil {
			t.Errorf("ParseAnswer(%q): %v", tt.line, err)
			continue
		}
		if got.Kind != tt.want.Kind || got.Key != tt.want.Key || !slices.Equal(got.Fields, tt.want.Fields) {
			t.Errorf("ParseAnswer(%q)\n got %+v\nwant %+v", tt.line, got, tt.want)
		}
	}
	for _, line := range []string{"", "\n", "A", "A\n", "A ", "A \n", "AB deploy 1", "a deploy 1", "1 deploy", " A deploy", "A  deploy", "Adeploy"} {
		if a, err := ParseAnswer([]byte(line)); err == nil {
			t.Errorf("ParseAnswer(%q) = %+v, want an error", line, a)
		}
	}
}

func TestReqOp(t *testing.T) {
	tests := []struct {
		line string
		want Op
	}{
		{"A deploy 1", OpAcquire},
		{"R deploy ok", OpRelease},
		{"N deploy notheld", OpRenew},
		{"Q deploy - - 0", OpQueue},
		{"K * 0", OpKeys},
		{"S - self=a", OpStatus},
		{"H - ok b", OpHandoff},
		{"T deploy", OpAcquire},
		{"M deploy 127.0.0.1:7070", 0},
		{"E deploy R: token \"x\" is not an unsigned 64-bit integer", OpRelease},
		{"E deploy A: lease must be greater than 0 seconds", OpAcquire},
		{"E - ?: empty line", '?'},
		{"E deploy", 0},
		{"E deploy oops", 0},
	}
	for _, tt := range tests {
		a, err := ParseAnswer([]byte(tt.line))
		if err != nil {
			t.Fatalf("ParseAnswer(%q): %v", tt.line, err)
		}
		if got := a.ReqOp(); got != tt.want {
			t.Errorf("ReqOp(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	a, _ := ParseAnswer(AppendError(nil, "deploy", OpAcquire, "lease must be greater than 0 seconds"))
	if got := a.ErrorText(); got != "lease must be greater than 0 seconds" {
		t.Errorf("ErrorText = %q", got)
	}
	a, _ = ParseAnswer([]byte("E deploy no op here"))
	if got := a.ErrorText(); got != "no op here" {
		t.Errorf("ErrorText without an op = %q", got)
	}
}

// The S answer of doc.go's session, field for field.
const docStatus = "S - self=127.0.0.1:7071 role=standby active=127.0.0.1:7070 token=7360982537641984003 seq=42 uptime=3605.2 keys=2 waiters=1 sticky=false peer=127.0.0.1:7070,active,up,42,0,7360982537641984003 peer=127.0.0.1:7071,standby,up,42,0,7360982537641984003\n"

func TestStatus(t *testing.T) {
	st := Status{
		Self: "127.0.0.1:7071", Role: "standby", Active: "127.0.0.1:7070",
		Token: 7360982537641984003, Seq: 42, Uptime: 3605200 * time.Millisecond,
		Keys: 2, Waiters: 1,
		Peers: []PeerStatus{
			{Addr: "127.0.0.1:7070", Role: "active", Reachable: true, Seq: 42, Token: 7360982537641984003},
			{Addr: "127.0.0.1:7071", Role: "standby", Reachable: true, Seq: 42, Token: 7360982537641984003},
		},
	}
	if got := string(AppendStatus(nil, "-", st)); got != docStatus {
		t.Errorf("AppendStatus\n got %q\nwant %q", got, docStatus)
	}
	roundTrip := func(st Status) {
		t.Helper()
		a, err := ParseAnswer(AppendStatus(nil, "label", st))
		if err != nil {
			t.Fatal(err)
		}
		if a.Key != "label" || a.ReqOp() != OpStatus {
			t.Errorf("status answer %+v: want key label, op S", a)
		}
		got, err := ParseStatus(a)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, st) {
			t.Errorf("status round trip\n got %+v\nwant %+v", got, st)
		}
	}
	roundTrip(st)
	roundTrip(Status{Self: "127.0.0.1:7070", Role: "active", Sticky: true})
	roundTrip(Status{Self: "a:1", Role: "joining", Active: "", Peers: []PeerStatus{{Addr: "b:2", Role: "?", Lag: 7}}})
	roundTrip(Status{Self: "a:1", Role: "active", Changes: []RoleChange{
		{At: time.UnixMilli(1764900000123), To: "a:1", Reason: "no active node is reachable"},
		{At: time.UnixMilli(1764900009000), From: "[::1]:2", To: "a:1", Reason: "handoff from [::1]:2, 100% sure"},
	}})

	// Fields a client does not know are skipped: newer servers, older clients.
	a, _ := ParseAnswer([]byte("S - self=a:1 role=active future=yes also=1,2,3"))
	if got, err := ParseStatus(a); err != nil || got.Self != "a:1" || got.Role != "active" {
		t.Errorf("ParseStatus with unknown fields = %+v, %v", got, err)
	}
	for _, line := range []string{
		"S - self",
		"S - token=x",
		"S - seq=-1",
		"S - uptime=1.2345",
		"S - keys=many",
		"S - waiters=1.5",
		"S - peer=a:1,active,up,1,0",
		"S - peer=a:1,active,up,1,0,x",
		"S - change=1,-,a:1",
		"S - change=x,-,a:1,why",
		"S - change=1,-,a:1,%zz",
		"Q deploy - - 0",
	} {
		a, err := ParseAnswer([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseStatus(a); err == nil {
			t.Errorf("ParseStatus(%q) accepted it", line)
		}
	}
}

func TestQueue(t *testing.T) {
	held := Queue{
		Key: "deploy", Held: true, Token: tok, LeaseLeft: 29500 * time.Millisecond,
		Waiters: []QueueWaiter{
			{Waited: 3200 * time.Millisecond, Addr: "127.0.0.1:51234"},
			{Waited: 400 * time.Millisecond, Addr: "127.0.0.1:51240"},
		},
	}
	for _, tt := range []struct {
		q    Queue
		line string
	}{
		{held, "Q deploy 7360982537641984001 29.5 2 3.2,127.0.0.1:51234 0.4,127.0.0.1:51240\n"},
		{Queue{Key: "nothing"}, "Q nothing - - 0\n"},
		{Queue{Key: "k", Held: true, Token: 1}, "Q k 1 0 0\n"},
		{Queue{Key: "k", Waiters: []QueueWaiter{{Waited: time.Second}}}, "Q k - - 1 1,-\n"},
	} {
		b := AppendQueue(nil, tt.q)
		if string(b) != tt.line {
			t.Errorf("AppendQueue\n got %q\nwant %q", b, tt.line)
		}
		a, err := ParseAnswer(b)
		if err != nil {
			t.Fatal(err)
		}
		if a.ReqOp() != OpQueue {
			t.Errorf("queue answer op %q", a.ReqOp())
		}
		got, err := ParseQueue(a)
		if err != nil {
			t.Fatalf("ParseQueue(%q): %v", b, err)
		}
		want := tt.q
		want.Waiting = max(want.Waiting, len(want.Waiters))
		if want.Held && len(want.Holders) == 0 {
			want.Holders = []QueueHolder{{Token: want.Token, LeaseLeft: want.LeaseLeft}}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("queue round trip\n got %+v\nwant %+v", got, want)
		}
	}
	// A semaphore lists every holder, the oldest first.
	sem := Queue{Key: "builds", Held: true, Token: 7, LeaseLeft: 30 * time.Second, Limit: 3,
		Holders: []QueueHolder{{Token: 7, LeaseLeft: 30 * time.Second}, {Token: 9, LeaseLeft: 12500 * time.Millisecond}}, Waiting: 1,
		Waiters: []QueueWaiter{{Waited: time.Second, Addr: "127.0.0.1:1"}}}
	line := string(AppendQueue(nil, sem))
	if line != "Q builds 7 30 1 1,127.0.0.1:1 limit=3 holder=9,12.5\n" {
		t.Errorf("semaphore queue: %q", line)
	}
	a, _ := ParseAnswer([]byte(line))
	if got, err := ParseQueue(a); err != nil || !reflect.DeepEqual(got, sem) {
		t.Errorf("semaphore queue round trip: %+v %v", got, err)
	}
	// A queue longer than MaxListKeys lists its head and counts them all.
	long := Queue{Key: "k", Waiting: 5000}
	for range MaxListKeys {
		long.Waiters = append(long.Waiters, QueueWaiter{Waited: time.Second, Addr: "127.0.0.1:1"})
	}
	a, _ = ParseAnswer(AppendQueue(nil, long))
	if got, err := ParseQueue(a); err != nil || got.Waiting != 5000 || len(got.Waiters) != MaxListKeys {
		t.Errorf("long queue: %d waiting, %d listed, %v", got.Waiting, len(got.Waiters), err)
	}
	for _, line := range []string{
		"Q deploy",
		"Q deploy - -",
		"Q deploy - - 1",
		"Q deploy - - 0 1,a",
		"Q deploy - - x",
		"Q deploy x 1 0",
		"Q deploy 1 x 0",
		"Q deploy - - 1 x,a",
		"K deploy - - 0",
		"Q deploy 1 1 0 holder=2,1",
		"Q deploy - - 0 limit=2 holder=2,1",
		"Q deploy 1 1 0 id=2,alice",
		"Q deploy 1 1 0 id=x,alice",
		"Q deploy 1 1 0 id=1,",
		"Q deploy 1 1 0 id=1",
		"Q deploy 1 1 0 id=1,a id=1,b",
		"Q deploy 1 1 1 1,- wid=2,alice",
		"Q deploy 1 1 1 1,- wid=0,alice",
		"Q deploy 1 1 1 1,- wid=+1,alice",
		"Q deploy 1 1 0 id=1," + strings.Repeat("x", MaxIDLen+1),
	} {
		a, err := ParseAnswer([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseQueue(a); err == nil {
			t.Errorf("ParseQueue(%q) accepted it", line)
		}
	}
}

// TestQueueIDs: the ids of holders and waiters travel as name=value words
// after everything else, so a plain lock's answer keeps its fixed words
// and a reader that skips the names it does not know reads it unchanged.
func TestQueueIDs(t *testing.T) {
	lock := Queue{Key: "deploy", Held: true, Token: 7, LeaseLeft: 29500 * time.Millisecond,
		Holders: []QueueHolder{{Token: 7, LeaseLeft: 29500 * time.Millisecond, ID: "alice@ci-1:4242#9f3c-1"}},
		Waiting: 2,
		Waiters: []QueueWaiter{
			{Waited: 3200 * time.Millisecond, Addr: "127.0.0.1:51234", ID: "bob@ci-2:77#ab,c=d"},
			{Waited: 400 * time.Millisecond, Addr: "127.0.0.1:51240"},
		}}
	sem := Queue{Key: "builds", Held: true, Token: 7, LeaseLeft: 30 * time.Second, Limit: 3,
		Holders: []QueueHolder{{Token: 7, LeaseLeft: 30 * time.Second}, {Token: 9, LeaseLeft: 12500 * time.Millisecond, ID: "carol#1"}}}
	for _, tt := range []struct {
		q    Queue
		line string
	}{
		{lock, "Q deploy 7 29.5 2 3.2,127.0.0.1:51234 0.4,127.0.0.1:51240 id=7,alice@ci-1:4242#9f3c-1 wid=1,bob@ci-2:77#ab,c=d\n"},
		{sem, "Q builds 7 30 0 limit=3 holder=9,12.5 id=9,carol#1\n"},
	} {
		line := string(AppendQueue(nil, tt.q))
		if line != tt.line {
			t.Errorf("AppendQueue\n got %q\nwant %q", line, tt.line)
		}
		a, _ := ParseAnswer([]byte(line))
		if got, err := ParseQueue(a); err != nil || !reflect.DeepEqual(got, tt.q) {
			t.Errorf("ParseQueue(%q)\n got %+v, %v\nwant %+v", line, got, err, tt.q)
		}
		// What a plain reader of the fixed words sees is unchanged.
		if f := a.Fields; f[0] != "7" || f[2] != strconv.Itoa(len(tt.q.Waiters)) {
			t.Errorf("fixed words of %q: %q", line, f)
		}
	}
	// Words a later version adds are skipped.
	a, _ := ParseAnswer([]byte("Q deploy 7 1 0 id=7,a later=x wid-of-later=1,b"))
	if got, err := ParseQueue(a); err != nil || got.Holders[0].ID != "a" {
		t.Errorf("later words: %+v %v", got, err)
	}
}

// TestQueueDoc: every Q answer of doc.go's sessions reads, and the ids
// of the session with ids come out whole.
func TestQueueDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	ids := 0
	for line := range strings.Lines(string(src)) {
		code, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "//\tQ ")
		if !ok || strings.Count(code, " ") < 3 || strings.Contains(code, "TOKEN") {
			continue
		}
		a, err := ParseAnswer([]byte("Q " + code))
		if err != nil {
			t.Fatalf("doc.go: %q: %v", code, err)
		}
		q, err := ParseQueue(a)
		if err != nil {
			t.Errorf("doc.go shows %q, which ParseQueue refuses: %v", "Q "+code, err)
		}
		for _, h := range q.Holders {
			if h.ID != "" {
				ids++
			}
		}
		for _, w := range q.Waiters {
			if w.ID != "" {
				ids++
				if w.Name() != "bob@ci-2:811" {
					t.Errorf("doc.go: waiter id %q", w.ID)
				}
			}
		}
	}
	if ids != 4 {
		t.Errorf("doc.go's Q answers carry %d ids, want the 4 of its session", ids)
	}
}

func TestIDName(t *testing.T) {
	for id, want := range map[string]string{
		"alice@ci-1:4242#9f3c2a7d1e5b6a70-1": "alice@ci-1:4242",
		"a#b#9f3c-1":                         "a#b",
		"deploy-job-7":                       "deploy-job-7",
		"#9f3c-1":                            "",
	} {
		if got := IDName(id); got != want {
			t.Errorf("IDName(%q) = %q, want %q", id, got, want)
		}
	}
}

// A holder's and a waiter's Name is the name part of its id, read by
// the Q answer's own types so that a program need not call IDName.
func TestQueueNames(t *testing.T) {
	a, err := ParseAnswer([]byte("Q k 5 29.9 2 2.1,127.0.0.1:51260 1.0,- id=5,alice@ci-1:42#9f3c-1 wid=1,bob#0c1d-1"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseQueue(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Holders) != 1 || q.Holders[0].Name() != "alice@ci-1:42" {
		t.Errorf("holders %+v, want alice@ci-1:42", q.Holders)
	}
	if len(q.Waiters) != 2 || q.Waiters[0].Name() != "bob" || q.Waiters[1].Name() != "" {
		t.Errorf("waiters %+v, want bob, then one without an id", q.Waiters)
	}
}

func TestMatchKeys(t *testing.T) {
	tests := []struct {
		pattern, key string
		want         bool
	}{
		{"*", "deploy", true},
		{"*", "*", true},
		{"dep*", "deploy", true},
		{"dep*", "dep", true},
		{"dep*", "de", false},
		{"dep*", "Deploy", false},
		{"deploy", "deploy", true},
		{"deploy", "deploy-db", false},
		{"deploy", "Deploy", false},
		{"a*b", "a*b", true},
		{"a*b", "axb", false},
		{"**", "*x", true},
		{"**", "x", false},
	}
	for _, tt := range tests {
		if got := MatchKeys(tt.pattern, tt.key); got != tt.want {
			t.Errorf("MatchKeys(%q, %q) = %v, want %v", tt.pattern, tt.key, got, tt.want)
		}
	}
}
