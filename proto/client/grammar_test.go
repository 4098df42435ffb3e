package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lockd-io/lockd/proto"
)

// The words of shared holds, sets of keys, values and places, as the
// client sends them and reads them, against the scripted node.

const grammarFT = 100 * time.Millisecond

// wordsAfter returns the name=value words of a request line, without the
// ever-changing id= and ref=.
func wordsAfter(line string) string {
	var out []string
	for _, w := range strings.Fields(line) {
		if strings.Contains(w, "=") && !strings.HasPrefix(w, "id=") && !strings.HasPrefix(w, "ref=") {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// wordIndex is where the word starting with prefix stands in line, -1
// when it does not.
func wordIndex(line, prefix string) int {
	for i, w := range strings.Fields(line) {
		if strings.HasPrefix(w, prefix) {
			return i
		}
	}
	return -1
}

func TestSharedSendsModeShared(t *testing.T) {
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	ctx := context.Background()
	l, err := c.AcquireWith(ctx, "cfg", 30*time.Second, 10*time.Second, Shared())
	if err != nil {
		t.Fatal(err)
	}
	if !l.Shared || l.Place != 0 {
		t.Errorf("lock %+v: want Shared, no place", l)
	}
	line := lastLine(t, f, "A cfg ")
	if !strings.HasPrefix(line, "A cfg 30 10 mode=shared id=") {
		t.Errorf("sent %q, want mode=shared after the wait and before id=", line)
	}
	// Without Shared: a writer, as always, with no mode= word.
	if _, err := c.Acquire(ctx, "plain", 30*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if line := lastLine(t, f, "A plain "); strings.Contains(line, "mode=") {
		t.Errorf("a writer sent %q", line)
	}
}

func TestSharedWithLimitIsRefused(t *testing.T) {
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"AcquireWith": func() error {
			_, err := c.AcquireWith(ctx, "k", time.Second, 0, Shared(), Limit(3))
			return err
		},
		"Hold": func() error {
			_, err := c.Hold(ctx, "k", time.Second, Limit(2), Shared())
			return err
		},
		"HoldAll": func() error {
			_, err := c.HoldAll(ctx, []string{"a", "b"}, time.Second, Shared(), Limit(2))
			return err
		},
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "Shared and Limit") || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want a refusal of Shared with a Limit, matching ErrInvalidArgument", name, err)
		}
	}
	// Limit(1) is a lock: a reader of it is fine.
	if _, err := c.AcquireWith(ctx, "k", time.Second, 0, Shared(), Limit(1)); err != nil {
		t.Errorf("Shared with Limit(1): %v", err)
	}
	if n := f.requests(); n != 1 {
		t.Errorf("%d requests sent, want the one of Limit(1) only", n)
	}
}

// lastLine is the last request line the fake logged that starts with
// prefix; the fake's log keeps every line.
func lastLine(t *testing.T, f *fakeServer, prefix string) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(f.lines[i], prefix) {
			return f.lines[i]
		}
	}
	t.Fatalf("no request %q among %q", prefix, f.lines)
	return ""
}

func TestAcquireAllSendsOneRequestAndReadsATokenPerKey(t *testing.T) {
	f := newFakeServer(t, nil)
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	ctx := context.Background()
	got := async(func() lockResult2 {
		ls, err := c.AcquireAll(ctx, []string{"a", "b", "c"}, 30*time.Second, 10*time.Second, Shared())
		return lockResult2{ls, err}
	})
	r := f.next()
	if !strings.HasPrefix(r.line, "A a 30 10 key=b key=c mode=shared id=") {
		t.Fatalf("sent %q", r.line)
	}
	r.sc.send("A a 7360982537641984033 7360982537641984034 7360982537641984035" + refWord(r.line))
	res := await(t, got)
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := []uint64{7360982537641984033, 7360982537641984034, 7360982537641984035}
	for i, k := range []string{"a", "b", "c"} {
		if l := res.locks[i]; l.Key != k || l.Token != want[i] || !l.Shared || l.Lease != 30*time.Second {
			t.Errorf("lock %d: %+v", i, l)
		}
	}
	// Release gives every key back, each by its own token.
	rel := async(func() error { return res.locks.Release(ctx) })
	seen := map[string]bool{}
	for range 3 {
		r := f.next()
		seen[r.line] = true
		r.sc.send("R " + r.words[1] + " ok")
	}
	if err := await(t, rel); err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"a", "b", "c"} {
		if line := "R " + k + " " + itoa(want[i]); !seen[line] {
			t.Errorf("no %q among %v", line, seen)
		}
	}
}

type lockResult2 struct {
	locks Locks
	err   error
}

// refWord is the " ref=R" of a request line, to echo in its answer, or "".
func refWord(line string) string {
	if i := wordIndex(line, "ref="); i >= 0 {
		return " " + strings.Fields(line)[i]
	}
	return ""
}

func TestAcquireAllAnswersOfTheWrongShape(t *testing.T) {
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.words[0] == "A" {
			sc.send("A a 1 2" + refWord(r.line)) // one token short
			return true
		}
		return false
	})
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	_, err := c.AcquireAll(context.Background(), []string{"a", "b", "c"}, time.Second, time.Second)
	if err == nil || !strings.Contains(err.Error(), "does not understand") {
		t.Fatalf("two tokens for three keys: %v", err)
	}
}

func TestSetsRefusedBeforeSending(t *testing.T) {
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	ctx := context.Background()
	many := make([]string, MaxSetKeys+1)
	for i := range many {
		many[i] = "k" + itoa(uint64(i))
	}
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{nil, "no key given"},
		{many, "17 keys are too many: one request takes at most 16"},
		{[]string{"a", "b", "a"}, `key "a" is given twice (keys 1 and 3 of 3)`},
		{[]string{"a", "b c"}, "without space"},
	} {
		if _, err := c.AcquireAll(ctx, tc.keys, time.Second, 0); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("AcquireAll %q: %v, want %q, matching ErrInvalidArgument", tc.keys, err, tc.want)
		}
		if _, err := c.HoldAll(ctx, tc.keys, time.Second); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("HoldAll %q: %v, want %q", tc.keys, err, tc.want)
		}
		if _, err := c.TryAcquireAll(ctx, tc.keys, time.Second); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TryAcquireAll %q: %v, want %q", tc.keys, err, tc.want)
		}
	}
	if _, err := c.TryAcquireAll(ctx, []string{"a", "b"}, time.Second, Wait(time.Second)); err == nil || !strings.Contains(err.Error(), "never waits") {
		t.Errorf("TryAcquireAll with Wait: %v", err)
	}
	// Sixteen keys are fine.
	if _, err := c.AcquireAll(ctx, many[:MaxSetKeys], time.Second, 0); err == nil || !strings.Contains(err.Error(), "does not understand") {
		// grantAll answers one token: the request went out, whole.
		t.Errorf("16 keys: %v", err)
	}
	if line := lastLine(t, f, "A k0 "); strings.Count(line, " key=") != MaxSetKeys-1 {
		t.Errorf("16 keys sent as %q", line)
	}
}

func TestTryAcquireAllHeld(t *testing.T) {
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.words[0] == "A" {
			if r.words[3] != "-" {
				sc.send("E " + r.words[1] + " A: want a try")
				return true
			}
			sc.send("T " + r.words[1] + refWord(r.line))
			return true
		}
		return false
	})
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	_, err := c.TryAcquireAll(context.Background(), []string{"a", "b"}, time.Second)
	if !errors.Is(err, ErrHeld) || !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "try-acquire-all a+b") {
		t.Fatalf("%v: want ErrHeld, naming the set", err)
	}
}

// setNode grants sets and counts renewals per key; a key in lose answers
// notheld to its renewals.
type setNode struct {
	mu      sync.Mutex
	renews  map[string]int
	lose    map[string]bool
	release map[string]string // key: the token released
	next    uint64
}

func (n *setNode) auto(sc *serverConn, r fakeReq) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch r.words[0] {
	case "A":
		line := "A " + r.words[1]
		keys := 1 + strings.Count(r.line, " key=")
		for range keys {
			n.next++
			line += " " + itoa(n.next)
		}
		sc.send(line + refWord(r.line))
	case "N":
		n.renews[r.words[1]]++
		if n.lose[r.words[1]] {
			sc.send("N " + r.words[1] + " notheld")
		} else {
			sc.send("N " + r.words[1] + " ok")
		}
	case "R":
		n.release[r.words[1]] = r.words[2]
		sc.send("R " + r.words[1] + " ok")
	default:
		return false
	}
	return true
}

func (n *setNode) count(m map[string]int, key string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return m[key]
}

func newSetNode() *setNode {
	return &setNode{renews: map[string]int{}, lose: map[string]bool{}, release: map[string]string{}, next: 100}
}

func TestHoldAllRenewsEachKeyAndReleasesAll(t *testing.T) {
	n := newSetNode()
	f := newFakeServer(t, n.auto)
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	ctx := context.Background()
	s, err := c.HoldAll(ctx, []string{"a", "b", "c"}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Keys(); strings.Join(got, " ") != "a b c" || s.Key() != "a" || s.Token() != 101 {
		t.Fatalf("keys %q, first %s %d", got, s.Key(), s.Token())
	}
	if ts := s.Tokens(); ts[0] != 101 || ts[1] != 102 || ts[2] != 103 {
		t.Fatalf("tokens %v", ts)
	}
	waitFor(t, "two renewals of every key", func() bool {
		return n.count(n.renews, "a") >= 2 && n.count(n.renews, "b") >= 2 && n.count(n.renews, "c") >= 2
	})
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(s.Err(), ErrReleased) {
		t.Errorf("Err after Release: %v", s.Err())
	}
	if _, by := s.EndedBy(); by {
		t.Error("EndedBy says a key ended a released set")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.release["a"] != "101" || n.release["b"] != "102" || n.release["c"] != "103" {
		t.Errorf("released %v", n.release)
	}
}

func TestHoldAllLossOfOneKeyEndsTheSetAndReleasesTheRest(t *testing.T) {
	n := newSetNode()
	f := newFakeServer(t, n.auto)
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	ctx := context.Background()
	s, err := c.HoldAll(ctx, []string{"a", "b", "c"}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.lose["b"] = true
	n.mu.Unlock()
	select {
	case <-s.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the set is still held after b was lost")
	}
	err = s.Err()
	if !errors.Is(err, ErrLost) || !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "key b ended the set") {
		t.Fatalf("Err %v: want ErrLost, naming b", err)
	}
	if l, by := s.EndedBy(); !by || l.Key != "b" || l.Token != 102 {
		t.Errorf("EndedBy %+v %v", l, by)
	}
	waitFor(t, "the other keys released", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.release["a"] == "101" && n.release["c"] == "103"
	})
	n.mu.Lock()
	_, releasedB := n.release["b"]
	n.mu.Unlock()
	if releasedB {
		t.Error("the lost key was released: lockd said it no longer holds it")
	}
	// Release after the loss returns the loss, and sends nothing more.
	if err := s.Release(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("Release after the loss: %v", err)
	}
	for _, h := range s.Held() {
		if h.Err() == nil {
			t.Errorf("key %s still held", h.Key())
		}
	}
}

func TestPlaceOfASemaphoreGrant(t *testing.T) {
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.words[0] == "A" {
			sc.send("A " + r.words[1] + " 42 place=2 future=word" + refWord(r.line))
			return true
		}
		return false
	})
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	l, err := c.AcquireWith(context.Background(), "pool", time.Second, 0, Limit(3))
	if err != nil {
		t.Fatal(err)
	}
	if l.Token != 42 || l.Place != 2 || l.Limit != 3 {
		t.Fatalf("lock %+v: want token 42 at place 2", l)
	}
	// An answer without place= (a lock, or an older node): 0.
	f2 := newFakeServer(t, grantAll())
	c2 := newTestClient(t, []string{f2.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	if l, err := c2.AcquireWith(context.Background(), "pool", time.Second, 0, Limit(3)); err != nil || l.Place != 0 {
		t.Fatalf("no place=: %+v %v", l, err)
	}
}

func TestValueEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1:8080":       "10.0.0.1%3A8080",
		"node 1 (10.0.0.1)":   "node%201%20%2810.0.0.1%29",
		"100% a=b,c":          "100%25%20a%3Db%2Cc",
		"é–\t\n":              "%C3%A9%E2%80%93%09%0A",
		"AZaz09-._~":          "AZaz09-._~",
		"\x7f\x00\xff\x20+/?": "%7F%00%FF%20%2B%2F%3F",
	} {
		if got := encodeValue(in); got != want {
			t.Errorf("encode %q = %q, want %q", in, got, want)
		}
		if !utf8.ValidString(in) {
			continue
		}
		if got, msg := proto.DecodeValue(want); msg != "" || got != in {
			t.Errorf("decode %q = %q %s", want, got, msg)
		}
	}
	if got, msg := proto.DecodeValue("a%c3%a9b"); msg != "" || got != "aéb" {
		t.Errorf("lower-case hex: %q %s", got, msg)
	}
}

// Campaign sends its value as value=, percent-encoded, and Proclaim a new
// one on a renewal; both refuse what the wire cannot carry.
func TestCampaignSendsValueAndProclaimRenewsWithIt(t *testing.T) {
	f := newFakeServer(t, grantAll())
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT, Name: "svc"}, hooks{})
	ctx := context.Background()
	e := NewElection(c, "leader")
	e.Lease = time.Second
	value := "node 1 (10.0.0.1) 100% é"
	h, err := e.Campaign(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	line := lastLine(t, f, "A leader ")
	if !strings.HasSuffix(wordsAfter(line), "value=node%201%20%2810.0.0.1%29%20100%25%20%C3%A9") {
		t.Errorf("campaign sent %q", line)
	}
	if id := strings.Fields(line)[wordIndex(line, "id=")]; !strings.HasPrefix(id, "id=svc#") {
		t.Errorf("the id %q should be the client's, the value no longer in it", id)
	}
	if wordIndex(line, "id=") > wordIndex(line, "value=") {
		t.Errorf("value= before id= in %q", line)
	}

	long := strings.Repeat("é", MaxValueLen/2)
	if err := e.Proclaim(ctx, long); err != nil {
		t.Fatal(err)
	}
	want := "N leader " + itoa(h.Token()) + " 1 value=" + strings.Repeat("%C3%A9", MaxValueLen/2)
	line = lastLine(t, f, "N leader "+itoa(h.Token())+" 1 value=")
	if line != want {
		t.Errorf("proclaim sent %q…, want %q…", line[:min(len(line), 60)], want[:60])
	}
	for _, bad := range []struct{ value, want string }{
		{"", "no leader"},
		{long + "x", "too long"},
		{"\xff", "UTF-8"},
	} {
		if err := e.Proclaim(ctx, bad.value); err == nil || !strings.Contains(err.Error(), bad.want) || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Proclaim %.10q: %v, want %q, matching ErrInvalidArgument", bad.value, err, bad.want)
		}
		if _, err := NewElection(c, "x").Campaign(ctx, bad.value); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Campaign %.10q: %v, want %q", bad.value, err, bad.want)
		}
	}
	if err := NewElection(c, "other").Proclaim(ctx, "v"); !errors.Is(err, ErrNotLeader) {
		t.Errorf("Proclaim without leading: %v", err)
	}
}

func TestProclaimNotHeldEndsTheLeadership(t *testing.T) {
	var lose sync.Once
	gone := make(chan struct{})
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		switch r.words[0] {
		case "A":
			sc.send("A " + r.words[1] + " 9" + refWord(r.line))
		case "N":
			if strings.Contains(r.line, "value=") {
				lose.Do(func() { close(gone) })
			}
			select {
			case <-gone:
				sc.send("N " + r.words[1] + " notheld")
			default:
				sc.send("N " + r.words[1] + " ok")
			}
		case "R":
			sc.send("R " + r.words[1] + " ok")
		default:
			return false
		}
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	e := NewElection(c, "leader")
	e.Lease = time.Second
	h, err := e.Campaign(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Proclaim(context.Background(), "b"); !errors.Is(err, ErrLost) {
		t.Fatalf("Proclaim answered notheld: %v", err)
	}
	if !errors.Is(h.Err(), ErrLost) {
		t.Errorf("the leadership goes on after lockd said it was lost: %v", h.Err())
	}
}

// A node that refuses value= (older than the word) still elects: the
// value goes in the id, as before.
func TestCampaignOnANodeWithoutValues(t *testing.T) {
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		switch {
		case r.words[0] == "A" && strings.Contains(r.line, "value="):
			sc.send(`E leader A: "value=x": want limit=N, id=ID or ref=R after the wait`)
		case r.words[0] == "A":
			sc.send("A leader 5")
		case r.words[0] == "R", r.words[0] == "N":
			sc.send(r.words[0] + " leader ok")
		default:
			return false
		}
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	e := NewElection(c, "leader")
	e.Lease = time.Second
	h, err := e.Campaign(context.Background(), "10.0.0.7:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	if line := lastLine(t, f, "A leader "); !strings.Contains(line, " id=10.0.0.7:8080#") || strings.Contains(line, "value=") {
		t.Errorf("second campaign sent %q", line)
	}
	if _, err := NewElection(c, "leader").Campaign(context.Background(), "two words"); err == nil || !strings.Contains(err.Error(), "does not read value=") {
		t.Errorf("a value with a space on such a node: %v", err)
	}
}

func TestParseQueueInfo(t *testing.T) {
	parse := func(line string) QueueInfo {
		t.Helper()
		a, err := proto.ParseAnswer([]byte(line + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		qi, err := ParseQueueInfo(a)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return qi
	}
	// Readers: more holders than a lock's one, no limit.
	qi := parse("Q cfg 7360982537641984001 29.1 2 1.5,10.0.0.9:1 0.2,- holder=7360982537641984017,29.8 mode=shared wmode=2,shared")
	if !qi.Shared || qi.Limit != 1 || len(qi.Holders) != 2 || qi.Holders[1].Token != 7360982537641984017 {
		t.Fatalf("readers: %+v", qi)
	}
	if qi.WaiterInfo[0].Shared || !qi.WaiterInfo[1].Shared {
		t.Errorf("waiter modes %+v", qi.WaiterInfo)
	}
	// Sets, places, values.
	qi = parse("Q a 33 29 1 0.5,- id=33,svc#x-1 set=33,33 wset=1,a+b+c value=33,node%201%20%C3%A9")
	if qi.HolderInfo[0].Set != 33 || qi.HolderInfo[0].Value != "node 1 é" || qi.Holders[0].ID != "svc#x-1" {
		t.Errorf("holder %+v %+v", qi.Holders[0], qi.HolderInfo[0])
	}
	if got := qi.WaiterInfo[0].Set; strings.Join(got, " ") != "a b c" {
		t.Errorf("waiter set %q", got)
	}
	// A set's keys are percent-encoded, '+' among them, and decoded one
	// by one once the word is split on '+'.
	qi = parse("Q a+1 33 29 1 0.5,- wset=1,a%2B1+b%3Dc%2C+%C3%A9%25")
	if got := qi.WaiterInfo[0].Set; len(got) != 3 || got[0] != "a+1" || got[1] != "b=c," || got[2] != "é%" {
		t.Errorf("encoded waiter set %q", got)
	}
	qi = parse("Q pool 5 9 0 limit=3 holder=6,9 place=5,1 place=6,3")
	if qi.Limit != 3 || qi.HolderInfo[0].Place != 1 || qi.HolderInfo[1].Place != 3 {
		t.Errorf("places %+v", qi)
	}
	// Today's answer: nothing more, nothing lost.
	qi = parse("Q k 5 9 0 id=5,v#1")
	if qi.Shared || qi.HolderInfo[0] != (HolderInfo{}) || qi.Holders[0].ID != "v#1" {
		t.Errorf("plain %+v", qi)
	}
	for _, bad := range []string{
		"Q k 5 9 0 set=6,5",
		"Q k 5 9 0 place=5,0",
		"Q k 5 9 0 value=5,%zz",
		"Q k 5 9 1 1,- wmode=2,shared",
		"Q k 5 9 1 1,- wset=1,",
		"Q k 5 9 1 1,- wset=1,a+b%2",
		"Q k 5 9 1 1,- wset=1,a",
	} {
		a, _ := proto.ParseAnswer([]byte(bad + "\n"))
		if _, err := ParseQueueInfo(a); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// Observers read the leader's value from value=, or, from a node that
// does not send it, from the name its id leads with.
func TestLeaderValueFromValueWordOrID(t *testing.T) {
	var answer atomic.Value
	answer.Store("Q leader 7 9 0 id=7,10.0.0.7:8080#abc")
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.words[0] == "Q" {
			sc.send(answer.Load().(string))
			return true
		}
		return false
	})
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	e := NewElection(c, "leader")
	if l, err := e.Leader(context.Background()); err != nil || l.Value != "10.0.0.7:8080" || l.Token != 7 {
		t.Fatalf("from the id: %+v %v", l, err)
	}
	answer.Store("Q leader 7 9 0 id=7,svc#abc-1 value=7,node%207")
	if l, err := e.Leader(context.Background()); err != nil || l.Value != "node 7" {
		t.Fatalf("from value=: %+v %v", l, err)
	}
	// Client.Queue reads a reader key's holders too.
	answer.Store("Q leader 7 9 0 holder=8,9 mode=shared")
	if q, err := c.Queue(context.Background(), "leader"); err != nil || len(q.Holders) != 2 || q.Limit != 1 {
		t.Fatalf("Queue of readers: %+v %v", q, err)
	}
}

// A request line longer than lockd reads (proto.MaxLineLen) is refused
// before it is sent, as an invalid argument; one that fits is sent.
func TestLongLineRefusedBeforeSending(t *testing.T) {
	f := newFakeServer(t, func(sc *serverConn, r fakeReq) bool {
		if r.words[0] != "A" {
			return grantAll()(sc, r)
		}
		toks := []string{}
		for _, w := range r.words[1:] {
			if strings.HasPrefix(w, "key=") || len(toks) == 0 {
				toks = append(toks, itoa(uint64(100+len(toks))))
			}
		}
		sc.send("A " + r.words[1] + " " + strings.Join(toks, " "))
		return true
	})
	c := newTestClient(t, []string{f.addr}, Options{FailureTimeout: grammarFT}, hooks{})
	ctx := context.Background()
	keys := func(n, size int) []string {
		var ks []string
		for i := range n {
			ks = append(ks, strings.Repeat(string(rune('a'+i)), size))
		}
		return ks
	}
	long := keys(MaxSetKeys, proto.MaxKeyLen)
	_, err := c.AcquireAll(ctx, long, 30*time.Second, time.Second)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "4096") {
		t.Errorf("16 keys of 255 bytes: want an invalid argument naming the 4096-byte limit, got %v", err)
	}
	if _, err := c.HoldAll(ctx, long, 30*time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("HoldAll of 16 keys of 255 bytes: %v", err)
	}
	if n := f.requests(); n != 0 {
		t.Errorf("%d requests sent; a line too long must not be", n)
	}
	ls, err := c.AcquireAll(ctx, keys(MaxSetKeys, 200), 30*time.Second, time.Second)
	if err != nil || len(ls) != MaxSetKeys {
		t.Fatalf("16 keys of 200 bytes fit in a line: %v %v", ls, err)
	}
	// The longest value, every byte encoded, on the longest key fits.
	key := strings.Repeat("k", proto.MaxKeyLen)
	h, err := NewElection(c, key).Campaign(ctx, strings.Repeat("%", MaxValueLen))
	if err != nil {
		t.Fatalf("a 1024-byte value on a 255-byte key: %v", err)
	}
	if line := lastLine(t, f, "A "+key+" "); len(line) > proto.MaxLineLen {
		t.Errorf("sent a line of %d bytes", len(line))
	}
	h.Release(ctx)
}
