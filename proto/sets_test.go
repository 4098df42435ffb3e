package proto

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSetSharedValue(t *testing.T) {
	req, err := Parse([]byte("A a 30 10 key=b key=c mode=shared id=x value=node%201%20(10.0.0.1) ref=r1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if req.Key != "a" || !reflect.DeepEqual(req.Keys, []string{"b", "c"}) || req.Mode != ModeShared || !req.HasValue || req.Value != "node 1 (10.0.0.1)" || req.ID != "x" || req.Ref.String() != "r1" {
		t.Fatalf("Parse = %+v", req)
	}
	req, err = Parse([]byte("N leader 7 10 value=node%202"))
	if err != nil || !req.HasValue || req.Value != "node 2" || req.Token != 7 {
		t.Fatalf("Parse N = %+v, %v", req, err)
	}
	req, err = Parse([]byte("N leader 7 10"))
	if err != nil || req.HasValue {
		t.Fatalf("Parse N = %+v, %v", req, err)
	}
	// 16 keys in all, every option: within MaxArgs.
	line := "A k0 30 10"
	for i := 1; i < MaxSetKeys; i++ {
		line += " key=k" + itoa(i)
	}
	line += " mode=shared limit=1 id=x value=v ref=r"
	if req, err = Parse([]byte(line)); err != nil || len(req.Keys) != MaxSetKeys-1 {
		t.Fatalf("Parse(%q) = %+v, %v", line, req, err)
	}
	long := strings.Repeat("%C3%A9", MaxValueLen/2)
	if req, err = Parse([]byte("A k 30 10 value=" + long)); err != nil || len(req.Value) != MaxValueLen {
		t.Fatalf("a value of %d bytes: %v", MaxValueLen, err)
	}
	if _, err = Parse([]byte("A k 30 10 value=" + long + "a")); err == nil {
		t.Fatal("a value over MaxValueLen accepted")
	}
}

func TestValueRoundTrip(t *testing.T) {
	for _, v := range []string{"", "node 1", "a=b,c%d+e", "é€😀", "\t\n"} {
		enc := EncodeValue(v)
		got, msg := DecodeValue(enc)
		if msg != "" || got != v {
			t.Fatalf("%q encoded %q decodes to %q, %s", v, enc, got, msg)
		}
		if strings.ContainsAny(enc, " =,+") {
			t.Fatalf("%q encoded %q holds a separator", v, enc)
		}
	}
}

func TestAppendGrantedSet(t *testing.T) {
	r, _ := MakeRef("r1")
	got := string(AppendGrantedSet(nil, "a", []uint64{1, 2, 3}, 0, r))
	if got != "A a 1 2 3 ref=r1\n" {
		t.Fatalf("got %q", got)
	}
	got = string(AppendGrantedSet(nil, "sem", []uint64{9}, 2, Ref{}))
	if got != "A sem 9 place=2\n" {
		t.Fatalf("got %q", got)
	}
	a, _ := ParseAnswer([]byte("A a 1 2 3 place=2 ref=r1\n"))
	if a.Ref() != "r1" || len(a.WithoutRef().Fields) != 4 {
		t.Fatalf("%+v", a)
	}
}

func TestQueueModes(t *testing.T) {
	q := Queue{Key: "cfg", Held: true, Token: 7, LeaseLeft: 29e9, Shared: true,
		Holders: []QueueHolder{{Token: 7, LeaseLeft: 29e9, Set: 7, Value: "a b"}, {Token: 9, LeaseLeft: 28e9}},
		Waiting: 2, Waiters: []QueueWaiter{{Waited: 1e9, Set: []string{"cfg", "x+y"}}, {Waited: 2e9, Shared: true}}}
	line := AppendQueue(nil, q)
	want := "Q cfg 7 29 2 1,- 2,- holder=9,28 mode=shared wmode=2,shared set=7,7 wset=1,cfg+x%2By value=7,a%20b\n"
	if string(line) != want {
		t.Fatalf("AppendQueue = %q\nwant %q", line, want)
	}
	a, _ := ParseAnswer(line)
	q2, err := ParseQueue(a)
	if err != nil || !reflect.DeepEqual(q, q2) {
		t.Fatalf("ParseQueue = %+v, %v\nwant %+v", q2, err, q)
	}
	sem := Queue{Key: "s", Held: true, Token: 7, Limit: 3, Holders: []QueueHolder{{Token: 7, Place: 1}, {Token: 9, Place: 3}}}
	line = AppendQueue(nil, sem)
	if !strings.HasSuffix(string(line), " limit=3 holder=9,0 place=7,1 place=9,3\n") {
		t.Fatalf("AppendQueue = %q", line)
	}
}

func TestRecordModes(t *testing.T) {
	for _, r := range []Record{
		{Kind: RecHeld, Key: "a", Token: 7, Lease: 30e9, ID: "x", Shared: true, Set: 7, Batch: 3, Value: "v w"},
		{Kind: RecHeld, Key: "s", Token: 7, Lease: 30e9, Limit: 3, Place: 2},
		{Kind: RecJoined, Key: "a", ID: "x", Lease: 30e9, Shared: true, Keys: string(AppendKeys(nil, []string{"b", "c=d"}))},
	} {
		line := AppendRecord(nil, r)
		a, _ := ParseAnswer(line)
		got, err := ParseRecord(a)
		if err != nil || got != r {
			t.Fatalf("%q reads %+v, %v; want %+v", line, got, err, r)
		}
		if _, ok := RecordFor(4, r); ok && (r.Shared || r.Set != 0 || r.Keys != "") {
			t.Fatalf("RecordFor(4) keeps %+v", r)
		}
	}
}
