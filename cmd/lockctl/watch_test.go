package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// Each state is one line: a lock with its holder's name, a semaphore's
// places, readers together, a key held as one of a set, a free key with
// its waiters; keys and names escaped; JSON tokens as strings, modes
// named, sets and places where they apply.
func TestPrintWatch(t *testing.T) {
	lock := proto.Queue{Key: "deploy", Held: true, Token: 7360982537641984005, LeaseLeft: 29940 * time.Millisecond, Waiting: 1,
		Holders: []proto.QueueHolder{{Token: 7360982537641984005, LeaseLeft: 29940 * time.Millisecond, ID: "alice@ci-1:42#9f3c-1"}},
		Waiters: []proto.QueueWaiter{{Waited: 2100 * time.Millisecond, ID: "bob#0c1d-1"}}}
	sem := proto.Queue{Key: "builds", Held: true, Token: 3, Limit: 3,
		Holders: []proto.QueueHolder{{Token: 3, Place: 1}, {Token: 4, Place: 2}}}
	readers := proto.Queue{Key: "config", Held: true, Shared: true, Token: 8,
		Holders: []proto.QueueHolder{{Token: 8, ID: "r1#a-1"}, {Token: 9, ID: "r2#b-1"}},
		Waiting: 1, Waiters: []proto.QueueWaiter{{Waited: time.Second, ID: "w#c-1"}}}
	inSet := proto.Queue{Key: "a", Held: true, Token: 11, LeaseLeft: 10 * time.Second,
		Holders: []proto.QueueHolder{{Token: 11, LeaseLeft: 10 * time.Second, ID: "m#d-1", Set: 11}},
		Waiting: 1, Waiters: []proto.QueueWaiter{{ID: "n#e-1", Shared: true, Set: []string{"a", "b"}}}}
	for _, tc := range []struct {
		q    proto.Queue
		json bool
		want string
	}{
		{lock, false, "deploy held token=7360982537641984005 name=alice@ci-1:42 lease_left=29.9s waiting=1\n"},
		{sem, false, "builds held 2/3 tokens=3,4 waiting=0\n"},
		{proto.Queue{Key: "dep\x1bloy"}, false, printable("dep\x1bloy") + " free\n"},
		{proto.Queue{Key: "deploy", Waiting: 2}, false, "deploy free waiting=2\n"},
		{readers, false, "config held shared readers=2 tokens=8,9 waiting=1\n"},
		{inSet, false, "a held token=11 name=m lease_left=10s waiting=1 set=11\n"},
		{lock, true, `{"key":"deploy","held":true,"mode":"exclusive","limit":1,"holders":[{"token":"7360982537641984005","name":"alice@ci-1:42","lease_left_seconds":29.94}],"waiting":1,"waiters":[{"name":"bob","waited_seconds":2.1,"mode":"exclusive"}]}` + "\n"},
		{readers, true, `{"key":"config","held":true,"mode":"shared","limit":1,"holders":[{"token":"8","name":"r1","lease_left_seconds":0},{"token":"9","name":"r2","lease_left_seconds":0}],"waiting":1,"waiters":[{"name":"w","waited_seconds":1,"mode":"exclusive"}]}` + "\n"},
		{inSet, true, `{"key":"a","held":true,"mode":"exclusive","limit":1,"holders":[{"token":"11","name":"m","lease_left_seconds":10,"set":"11"}],"waiting":1,"waiters":[{"name":"n","waited_seconds":0,"mode":"shared","set":["a","b"]}]}` + "\n"},
		{sem, true, `{"key":"builds","held":true,"mode":"exclusive","limit":3,"holders":[{"token":"3","name":"","lease_left_seconds":0,"place":1},{"token":"4","name":"","lease_left_seconds":0,"place":2}],"waiting":0,"waiters":[]}` + "\n"},
		{proto.Queue{Key: "deploy"}, true, `{"key":"deploy","held":false,"limit":1,"holders":[],"waiting":0,"waiters":[]}` + "\n"},
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

// syncBuffer is a bytes.Buffer written by one goroutine and read by
// another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watchNode is a node that answers S and watches of one key with the
// state it is given, and can go away and come back on its address.
type watchNode struct {
	t     *testing.T
	addr  string
	state atomic.Value // the words of the L answer after the key
	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func (n *watchNode) listen() {
	n.t.Helper()
	addr := n.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		n.t.Fatal(err)
	}
	n.mu.Lock()
	n.ln, n.addr = ln, ln.Addr().String()
	n.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.mu.Lock()
			n.conns = append(n.conns, c)
			n.mu.Unlock()
			go n.serve(c)
		}
	}()
}

func (n *watchNode) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var out string
		switch f[0] {
		case "S":
			out = "S " + f[1] + " self=" + n.addr + " role=active active=" + n.addr
		case "L":
			out = "L " + f[1] + " " + n.state.Load().(string)
		case "U":
			out = "U " + f[1] + " ok"
		default:
			out = "E " + f[1] + " " + f[0] + ": not in this test"
		}
		c.Write([]byte(out + "\n"))
	}
}

// away closes the listener and every connection: a node that died.
func (n *watchNode) away() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ln.Close()
	for _, c := range n.conns {
		c.Close()
	}
	n.conns = nil
}

func waitText(t *testing.T, what string, b *syncBuffer, re string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !regexp.MustCompile(re).MatchString(b.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q within 10s in %q", what, re, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When the node goes away, watch says on stderr that it lost the
// cluster and that the last state may be out of date; when the node is
// back, that it is current again, and it prints the state there.
// Stdout holds states alone.
func TestWatchSaysWhenItLosesTheCluster(t *testing.T) {
	n := &watchNode{t: t}
	n.state.Store("- - 0")
	n.listen()
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"lockctl", "--addr", n.addr, "--failure-timeout", "200ms", "watch", "--key", "deploy"}, strings.NewReader(""), &stdout, &stderr)
	}()
	waitText(t, "the first state", &stdout, `^deploy free\n$`)
	n.away()
	waitText(t, "the node gone", &stderr, `lockctl: watch deploy lost the cluster: .*no node has served it for 200ms.* its last state may be out of date\n`)
	n.state.Store("7360982537641984001 29.9 0 id=7360982537641984001,alice#1")
	n.listen()
	waitText(t, "the node back", &stderr, `lockctl: watch deploy is current again: `+regexp.QuoteMeta(n.addr)+` serves it; its state follows\n$`)
	waitText(t, "the state where it is back", &stdout, `^deploy free\ndeploy held token=7360982537641984001 name=alice lease_left=29.9s waiting=0\n$`)
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d, want 0; stderr %q", c, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not end with its context")
	}
}
