package cluster

import (
	"bufio"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
)

// backlogNode is a node with conns authenticated client connections,
// over TLS or plain TCP.
type backlogNode struct {
	t     *testing.T
	tn    *testNode
	addr  string
	conns []*bufio.ReadWriter
}

func startBacklogNode(t *testing.T, conns int, withTLS bool) *backlogNode {
	t.Helper()
	b := &backlogNode{t: t, addr: freeAddrs(t, 1)[0]}
	var cli *tls.Config
	b.tn = startNodeWith(t, b.addr, nil, func(c *Config) {
		c.Limits = Limits{AuthTimeout: time.Minute, MaxConnsPerIP: -1}
		c.Security.Secrets = auth.Secrets{Client: clientSecret}
		if withTLS {
			var lt *auth.TLS
			lt, cli = testTLS(t)
			c.Security.TLS = lt
		}
	})
	for range conns {
		// Small segments: the answers wait in the node's memory rather
		// than in its socket's send buffer.
		nc, err := smallSegments().Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		if withTLS {
			nc = tls.Client(nc, cli)
		}
		t.Cleanup(func() { nc.Close() })
		nc.SetDeadline(time.Now().Add(2 * time.Minute))
		r := bufio.NewReader(nc)
		if _, err := auth.Authenticate(nc, r, auth.Client, clientSecret, b.addr, true); err != nil {
			t.Fatal(err)
		}
		b.conns = append(b.conns, bufio.NewReadWriter(r, bufio.NewWriter(nc)))
	}
	return b
}

// rested waits until conns more readers rested than from: a reader
// rests restAfter after it was armed, which may be a while after its
// last request.
func (b *backlogNode) rested(from uint64) {
	b.t.Helper()
	deadline := time.Now().Add(4 * restAfter)
	for b.tn.rests.Load() < from+uint64(len(b.conns)) {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting for idle readers to rest: %d of %d", b.tn.rests.Load()-from, len(b.conns))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// backlog has every connection, one after the other, pipeline status
// requests until the node holds half a MiB or more of answers for it,
// then read those answers.
func (b *backlogNode) backlog() {
	t, tn := b.t, b.tn
	answered := tn.statusAnswered
	const target = 512 << 10
	chunk := strings.Repeat("S -\n", 1<<10)
	total := answered()
	for _, c := range b.conns {
		waitFor(t, "no answers unread", func() bool { return tn.output.bytes.Load() == 0 })
		sent := 0
		for tn.output.bytes.Load() < target {
			c.WriteString(chunk)
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			sent += 1 << 10
			total += 1 << 10
			waitStatusAnswered(t, answered, total)
		}
		for range sent {
			if line, err := c.ReadString('\n'); err != nil || !strings.HasPrefix(line, "S - ") {
				t.Fatalf("reading the answers: %q %v", line, err)
			}
		}
	}
}

// Connections that read a backlog of answers and went idle hold no more
// than idle ones: over TLS as over plain TCP, the buffers the backlog
// grew go once the connection rests. (The live heap is this process's,
// both nodes' and the clients' together.)
func TestIdleConnectionsAfterABacklogShedTheirBuffers(t *testing.T) {
	const (
		conns = 30
		// A TLS connection keeps the buffer crypto/tls grew for the
		// largest record it read: on the clients' ends, in this process
		// too, up to 64 KiB for the 16 KiB records of the answers; on
		// the node's, a few KiB for the requests'. Half the connections
		// are TLS ones. A backlog's output buffers are ten times more.
		slack = 48 << 10
	)
	nodes := []*backlogNode{startBacklogNode(t, conns, false), startBacklogNode(t, conns, true)}
	for _, b := range nodes {
		b.rested(0)
	}
	before := liveHeap()
	var rests []uint64
	for _, b := range nodes {
		rests = append(rests, b.tn.rests.Load())
		b.backlog()
	}
	for i, b := range nodes {
		b.rested(rests[i])
	}
	grown := (liveHeap() - before) / (2 * conns)
	t.Logf("live heap per connection, idle after a backlog against idle before it: %+d B", grown)
	if grown > slack {
		t.Fatalf("an idle connection that read a backlog holds %d B more than before it (plain TCP and TLS); want at most %d", grown, slack)
	}
	for i, b := range nodes {
		b.tn.mu.Lock()
		for _, c := range b.tn.conns {
			c.out.mu.Lock()
			held := cap(c.out.out) + cap(c.out.spare)
			c.out.mu.Unlock()
			if held > 0 {
				t.Errorf("node %d: an idle connection holds %d B of output buffers", i, held)
			}
		}
		b.tn.mu.Unlock()
	}
}
