package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// Rolling upgrades: a node of this release meets a node of the previous
// one, which speaks peer version 1 (no v: flag, no V acknowledgements, no
// limit= or id= on records). The previous release is played by hand here,
// with its peer encoding frozen in these tests: what it writes is spelled
// out line by line.

// v1Token is a token as a node of the previous release would issue it
// now: epoch (wall-clock ms), counter, node bits.
func v1Token(counter uint64) uint64 {
	return uint64(time.Now().UnixMilli())<<22 | counter<<4
}

// v1Peer listens on addr and answers heartbeats as a node of the previous
// release in role, counting them.
type v1Peer struct {
	addr, role, active string
	token              uint64
	beats              atomic.Int64
	ln                 net.Listener
	onSync             func(w *bufio.Writer, r *bufio.Reader, from string) // a stream subscribed (Y)
}

func startV1Peer(t *testing.T, p *v1Peer) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				go func() { <-t.Context().Done(); nc.Close() }()
				r, w := bufio.NewReader(nc), bufio.NewWriter(nc)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					f := strings.Fields(line)
					switch {
					case len(f) >= 2 && f[0] == "P":
						p.beats.Add(1)
						// The previous release's answer: no v:, no round:.
						fmt.Fprintf(w, "P %s %s %s %d 0 %s -\n", f[1], p.addr, p.role, p.token, p.active)
						w.Flush()
					case len(f) >= 2 && f[0] == "Y" && p.onSync != nil:
						p.onSync(w, r, f[1])
						return
					}
				}
			}()
		}
	}()
}

// logBuffer collects a node's log lines for a test to search.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An active of this release with a standby of the previous one: the
// standby gets records it can read (no limit=, no id=, no semaphore), the
// active does not wait for acknowledgements that will never come (it says
// it is degraded), and the log names both versions.
func TestUpgradeOldStandbyNewActive(t *testing.T) {
	addrs := freeAddrs(t, 2)
	var logs logBuffer
	old := &v1Peer{addr: addrs[1], role: "standby", active: "-"}
	startV1Peer(t, old)
	a := startNodeWith(t, addrs[0], addrs, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	waitFor(t, "a active", func() bool { return a.roleIs(Active) })

	// The old standby introduces itself with a heartbeat, as it does
	// before it subscribes, then subscribes and reads.
	s := dialWire(t, addrs[0])
	s.send(fmt.Sprintf("P %s standby 0 0 -", addrs[1]))
	s.expect(`P \S+ \S+ active \d+ \d+ \S+ .*`)
	s.send(fmt.Sprintf("Y %s 0", addrs[1]))
	s.expect(fmt.Sprintf(`Y %s synced \d+ 0`, addrs[1]))

	c := dialWire(t, addrs[0])
	c.send("A deploy 30 0 id=job-1", "A builds 30 0 limit=2 id=job-2", "A builds 30 0 limit=2 id=job-3")
	tok := c.expect(`A deploy (\d+)`)[1]
	c.expect(`A builds \d+ place=1`)
	c.expect(`A builds \d+ place=2`)
	// Its stream: the lock without its id, the semaphore not at all (the
	// old release cannot hold one).
	s.expect(`G deploy ` + tok + ` 30`)
	c.send("R deploy " + tok)
	c.expect(`R deploy ok`)
	s.expect(`F deploy ` + tok)
	c.send("S -")
	c.expect(`S - .* replication=sync degraded=true .*`)
	if !strings.Contains(logs.String(), "its_version=1 this_version="+strconv.Itoa(proto.PeerVersion)) {
		t.Errorf("the log does not name both versions:\n%s", logs.String())
	}
}

// A standby of this release following an active of the previous one: it
// syncs from the old records and sends no acknowledgement the old active
// could not read.
func TestUpgradeNewStandbyOldActive(t *testing.T) {
	addrs := freeAddrs(t, 2)
	tok := v1Token(1)
	var acks atomic.Int64
	old := &v1Peer{addr: addrs[0], role: "active", active: addrs[0], token: tok}
	old.onSync = func(w *bufio.Writer, r *bufio.Reader, from string) {
		fmt.Fprintf(w, "G deploy %d 30\nY %s synced %d 1\n", tok, from, tok)
		w.Flush()
		go func() {
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if strings.HasPrefix(line, "V ") {
					acks.Add(1)
				}
			}
		}()
		for i := 0; ; i++ {
			time.Sleep(50 * time.Millisecond) // the old active's mark, every heartbeat
			if _, err := fmt.Fprintf(w, "W - %d 1\n", tok); err != nil || w.Flush() != nil {
				return
			}
		}
	}
	startV1Peer(t, old)
	b := startNode(t, addrs[1], addrs)
	waitFor(t, "b synced from the old active", func() bool { return b.roleIs(Standby) && b.isSynced() })
	beats := old.beats.Load()
	waitFor(t, "ten more heartbeats", func() bool { return old.beats.Load() >= beats+10 })
	if n := acks.Load(); n > 0 {
		t.Fatalf("the standby sent %d acknowledgements to an active of the previous release", n)
	}
	w := dialWire(t, addrs[1])
	w.send("A deploy 30 0")
	w.expect(`M deploy ` + addrs[0])
	w.send("Q deploy")
	w.expect(`M deploy ` + addrs[0])
}
