package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// Each state is one line: a lock with its holder's name, a semaphore's
// places, a free key with its waiters; keys and names escaped; JSON
// tokens as strings.
func TestPrintWatch(t *testing.T) {
	lock := proto.Queue{Key: "deploy", Held: true, Token: 7360982537641984005, LeaseLeft: 29940 * time.Millisecond, Waiting: 1,
		Holders: []proto.QueueHolder{{Token: 7360982537641984005, LeaseLeft: 29940 * time.Millisecond, ID: "alice@ci-1:42#9f3c-1"}},
		Waiters: []proto.QueueWaiter{{Waited: 2100 * time.Millisecond, ID: "bob#0c1d-1"}}}
	sem := proto.Queue{Key: "builds", Held: true, Token: 3, Limit: 3,
		Holders: []proto.QueueHolder{{Token: 3}, {Token: 4}}}
	for _, tc := range []struct {
		q    proto.Queue
		json bool
		want string
	}{
		{lock, false, "deploy held token=7360982537641984005 name=alice@ci-1:42 lease_left=29.9s waiting=1\n"},
		{sem, false, "builds held 2/3 tokens=3,4 waiting=0\n"},
		{proto.Queue{Key: "dep\x1bloy"}, false, printable("dep\x1bloy") + " free\n"},
		{proto.Queue{Key: "deploy", Waiting: 2}, false, "deploy free waiting=2\n"},
		{lock, true, `{"key":"deploy","held":true,"limit":1,"holders":[{"token":"7360982537641984005","name":"alice@ci-1:42","lease_left_seconds":29.94}],"waiting":1,"waiters":[{"name":"bob","waited_seconds":2.1}]}` + "\n"},
	} {
		var b strings.Builder
		if err := printWatch(&b, tc.json, tc.q); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want || strings.Contains(b.String(), "\x1b") {
			t.Errorf("printWatch(%+v):\n got %q\nwant %q", tc.q, b.String(), tc.want)
		}
	}
}
