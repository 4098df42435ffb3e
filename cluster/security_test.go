package cluster

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto/auth"
)

var (
	clientSecret = []byte("client-secret-0123456789")
	adminSecret  = []byte("admin-secret-0123456789")
	peerSecret   = []byte("peer-secret-0123456789")
)

func withSecrets(admin bool) func(*Config) {
	return func(c *Config) {
		c.Security.Secrets = auth.Secrets{Client: clientSecret, Peer: peerSecret}
		if admin {
			c.Security.Secrets.Admin = adminSecret
		}
	}
}

func TestGateRefusesUnsafeSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sec    Security
		listen string
		peers  int
		want   string
	}{
		{"open on the network", Security{}, "0.0.0.0:7070", 0, "add --secret-file FILE"},
		{"open on all interfaces", Security{}, ":7070", 0, "add --secret-file FILE"},
		{"peers cannot prove themselves", Security{Secrets: auth.Secrets{Client: clientSecret}}, "127.0.0.1:7070", 2, "peers must prove they are peers"},
		{"admin secret alone on the network", Security{Secrets: auth.Secrets{Admin: adminSecret}}, "10.0.0.1:7070", 0, "add --secret-file FILE"},
		{"client secret is the peer secret", Security{Secrets: auth.Secrets{Client: clientSecret, Peer: clientSecret}}, "127.0.0.1:7070", 2, "--secret-file and --peer-secret-file hold the same secret, so every client could act as a node"},
		{"admin secret is the peer secret", Security{Secrets: auth.Secrets{Client: clientSecret, Admin: peerSecret, Peer: peerSecret}}, "127.0.0.1:7070", 2, "--admin-secret-file and --peer-secret-file hold the same secret"},
		{"client secret is the admin secret", Security{Secrets: auth.Secrets{Client: clientSecret, Admin: clientSecret}}, "127.0.0.1:7070", 0, "every client is an admin"},
		{"a trivial secret", Security{Secrets: auth.Secrets{Client: []byte("aaaaaaaaaaaaaaaaaaaa")}}, "127.0.0.1:7070", 0, "--secret-file: the secret has fewer than 8 different characters (1)"},
		{"a short secret", Security{Secrets: auth.Secrets{Peer: []byte("short")}}, "127.0.0.1:7070", 2, "--peer-secret-file: the secret is 5 bytes, shorter than 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newGate(tc.sec, tc.listen, tc.peers)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		sec    Security
		listen string
		peers  int
		open   auth.Role
	}{
		{"loopback, nothing set: today's open node", Security{}, "127.0.0.1:7070", 2, auth.Peer},
		{"localhost", Security{}, "localhost:7070", 0, auth.Peer},
		{"insecure on purpose", Security{Insecure: true}, "0.0.0.0:7070", 0, auth.Peer},
		{"client secret", Security{Secrets: auth.Secrets{Client: clientSecret, Peer: peerSecret}}, "0.0.0.0:7070", 2, auth.None},
		{"peer secret only: clients and admins open", Security{Secrets: auth.Secrets{Peer: peerSecret}}, "127.0.0.1:7070", 2, auth.Admin},
		{"admin secret only: clients open", Security{Secrets: auth.Secrets{Admin: adminSecret}}, "127.0.0.1:7070", 0, auth.Client},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := newGate(tc.sec, tc.listen, tc.peers)
			if err != nil {
				t.Fatal(err)
			}
			if g.open != tc.open {
				t.Fatalf("open role %s, want %s", g.open, tc.open)
			}
		})
	}
}

// Every request but I needs a role, watch and withdraw as much as acquire;
// the refusals say what is missing, and a connection that proves the
// secret is served.
func TestSecretRequired(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, withSecrets(true))
	w := dialWire(t, addr)
	for _, req := range []string{"A k 30 0", "R k 1", "N k 1 30", "Q k", "K *", "S -", "L k", "X k ci-1#1", "U k", "H -", "P x standby 1 0 -", "Y x 1", "O x 1", "C x 1"} {
		w.send(req)
		w.expect(`E \S+ [A-Z]: authenticate first: this node requires a secret`)
	}
	w.send("I client " + string(clientSecret))
	w.expect(`I client ok client`)
	w.send("A k 30 0")
	w.expect(`A k \d+`)
	// A stranger that keeps sending is cut off: its refusals must not
	// fill the node's buffers.
	x := dialWire(t, addr)
	for range maxRefusals - 1 {
		x.send("Q k")
		x.expect(`E k Q: authenticate first: .*`)
	}
	x.send("Q k")
	x.expect(`E k Q: authenticate first: .*`)
	x.expect(`E - \?: too many requests before authenticating; closing this connection`)
	// A client is not an admin here, nor a peer.
	w.send("H -")
	w.expect(`E - H: this needs the admin role: .*`)
	w.send("P x standby 1 0 -")
	w.expect(`E x P: peer messages are for lockd nodes.*`)
	// The admin secret upgrades the same connection.
	w.send("I admin " + string(adminSecret))
	w.expect(`I admin ok admin`)
	w.send("H -")
	w.expect(`E - H: no standby is caught up to take the role.*`)
}

// The official handshake proves the secret without sending it, both ways.
func TestChallengeResponseOnANode(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, withSecrets(false))
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	role, err := auth.Authenticate(nc, r, auth.Client, clientSecret, addr, false)
	if err != nil || role != auth.Admin {
		t.Fatalf("role %s, err %v; want admin (no separate admin secret)", role, err)
	}
	fmt.Fprintf(nc, "A k 30 0\n")
	line, _ := r.ReadString('\n')
	if !strings.HasPrefix(line, "A k ") {
		t.Fatalf("after authenticating: %q", line)
	}
	// A wrong secret ends the connection.
	nc2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	r2 := bufio.NewReader(nc2)
	if _, err := auth.Authenticate(nc2, r2, auth.Client, []byte("wrong-secret-0123456789"), addr, false); err == nil {
		t.Fatal("a wrong secret was accepted")
	}
	nc2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r2.ReadString('\n'); err == nil {
		t.Fatal("the connection stayed open after a wrong secret")
	}
}

// A connection over --max-conns-per-ip closes one of its IP's that has
// not authenticated, and is refused with a line saying which limit when
// every one has; the auth and line timeouts close idle and half-sent
// connections.
func TestConnectionLimits(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	tn := startNodeWith(t, addr, nil, func(c *Config) {
		withSecrets(false)(c)
		// b and e send nothing: taken at once, as where the kernel does
		// not hold such connections back (DeferAccept).
		c.Limits = Limits{MaxConns: 3, MaxConnsPerIP: 2, AuthTimeout: 300 * time.Millisecond, LineTimeout: 200 * time.Millisecond, DeferAccept: -1}
	})
	a := dialWire(t, addr)
	a.send("I client " + string(clientSecret))
	a.expect(`I client ok admin`)
	b := dialWire(t, addr)
	c := dialWire(t, addr)
	b.expect(`E - \?: too many connections from 127\.0\.0\.1; this one had not authenticated; closing it`)
	c.send("I client " + string(clientSecret))
	c.expect(`I client ok admin`)
	d := dialWire(t, addr)
	d.expect(`E - \?: too many connections from 127\.0\.0\.1 \(2, lockd --max-conns-per-ip\); close some`)
	// e never authenticates: closed after the auth timeout.
	c.nc.Close()
	waitFor(t, "c forgotten", func() bool { return openConns(tn) < 2 })
	e := dialWire(t, addr)
	e.expect(`E - \?: not authenticated within 300ms; closing this connection`)
	// a begins a line and stops.
	a.nc.Write([]byte("A k 30"))
	a.expect(`E - \?: line not finished within 200ms; closing this connection`)
}

// A handoff whose confirmation is lost is settled by asking the
// successor, not by guessing: the old active never serves again while the
// successor does.
func TestHandoffWithLostConfirmationIsSettled(t *testing.T) {
	playsFaults(t)
	addrs := freeAddrs(t, 2)
	a := startNode(t, addrs[0], addrs)
	b := startNode(t, addrs[1], addrs)
	waitFor(t, "a active and b synced", func() bool { return a.roleIs(Active) && b.isSynced() })
	h := dialWire(t, addrs[0])
	h.send("A k 30 0")
	tok := h.expect(`A k (\d+)`)[1]
	// The fault drops every reply on b's stream: plant it only once a
	// counts b in sync, or it drops b's acknowledgement of the grant
	// and the stream closes before the handoff reaches b.
	waitFor(t, "a waiting for b's acknowledgements", func() bool { return !a.degraded() })
	b.play(faultLoseTakeover)
	h.send("H -")
	// The confirmation never comes and the stream closes: a asks b (C),
	// b says it took the role, and a follows it.
	h.expect(`H - ok ` + addrs[1])
	if !b.roleIs(Active) || a.roleIs(Active) {
		t.Fatalf("after the handoff: a active %v, b active %v", a.roleIs(Active), b.roleIs(Active))
	}
	c := dialWire(t, addrs[1])
	c.send("R k " + tok)
	c.expect(`R k ok`)
}

// A handoff the successor never received (here: sent to a stream that is
// not the successor's, which the old active abandons) is cancelled on the
// successor's word, and the old active serves again.
func TestHandoffNotTakenIsCancelled(t *testing.T) {
	addrs := freeAddrs(t, 2)
	a := startNode(t, addrs[0], addrs)
	b := startNode(t, addrs[1], addrs)
	waitFor(t, "a active and b synced", func() bool { return a.roleIs(Active) && b.isSynced() })
	// A stand-in for b's stream (an open node lets anyone send Y): the H
	// record goes to it, and it never confirms.
	fake := dialWire(t, addrs[0])
	fake.send("Y " + addrs[1] + " 0")
	fake.expect(`Y ` + quoteRE(addrs[1]) + ` synced \d+ \d+`)
	h := dialWire(t, addrs[0])
	h.send("H - " + addrs[1])
	fake.expect(`H ` + quoteRE(addrs[1]) + ` \d+ \d+ pinned`)
	fake.nc.Close()
	h.expect(`E - H: handoff to ` + quoteRE(addrs[1]) + ` failed: the successor's stream closed; ` + quoteRE(addrs[1]) + ` did not take the role; ` + quoteRE(addrs[0]) + ` is still active`)
	if !a.roleIs(Active) || b.roleIs(Active) {
		t.Fatalf("after the cancelled handoff: a active %v, b active %v", a.roleIs(Active), b.roleIs(Active))
	}
	h.send("A k 30 0")
	h.expect(`A k \d+`)
}

func quoteRE(s string) string { return strings.NewReplacer(".", `\.`).Replace(s) }

// A standby that joins while the active changes state arrives at exactly
// the active's state: the snapshot is sent a slice at a time with the
// live changes interleaved.
func TestSnapshotUnderChurn(t *testing.T) {
	addrs := freeAddrs(t, 2)
	a := startNode(t, addrs[0], addrs)
	waitFor(t, "a active", func() bool { return a.roleIs(Active) })
	const held = 3 * core.SnapshotSlice
	w := dialWire(t, addrs[0])
	var batch []string
	for i := range held {
		batch = append(batch, fmt.Sprintf("A key-%05d 300 0", i))
	}
	w.send(batch...)
	for range held {
		w.expect(`A key-\d+ \d+`)
	}
	// Churn: release and re-acquire keys of the snapshot, and new keys.
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := net.Dial("tcp", addrs[0])
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		r := bufio.NewReader(c)
		for i := 0; !stop.Load(); i++ {
			key := "churn-" + strconv.Itoa(i%5000)
			fmt.Fprintf(c, "A %s 300 0\n", key)
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			f := strings.Fields(line)
			if i%3 != 0 && len(f) == 3 {
				fmt.Fprintf(c, "R %s %s\n", key, f[2])
				r.ReadString('\n')
			}
		}
	}()
	// b joins while the keys churn.
	b := startNode(t, addrs[1], addrs)
	waitFor(t, "b synced", b.isSynced)
	stop.Store(true)
	wg.Wait()
	// Compare once b has applied everything a streamed.
	waitFor(t, "b caught up", func() bool {
		a.mu.Lock()
		seq := a.core.Seq()
		a.mu.Unlock()
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.core.Seq() == seq
	})
	sa, sb := holders(a), holders(b)
	if !slices.Equal(sa, sb) {
		t.Fatalf("standby holds %d locks, active %d; first differences: %v", len(sb), len(sa), firstDiff(sa, sb))
	}
}

func holders(tn *testNode) []string {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	var out []string
	for _, h := range tn.core.Engine().Snapshot(tn.now()).Holders {
		out = append(out, h.Key+"="+strconv.FormatUint(h.Token, 10))
	}
	return out
}

func firstDiff(a, b []string) []string {
	var out []string
	for i := 0; i < max(len(a), len(b)) && len(out) < 5; i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			out = append(out, x+" vs "+y)
		}
	}
	return out
}

// K lists the first keys in byte order and counts them all, also when
// there are more keys than one slice of the scan.
func TestKeysListingAcrossSlices(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	w := dialWire(t, addr)
	const n = 8*core.ListSlice + 100 // k00001 to k08292, across many slices
	var batch []string
	for i := range n {
		batch = append(batch, fmt.Sprintf("A k%05d 300 0", n-i))
	}
	w.send(batch...)
	for range n {
		w.expect(`A k\d+ \d+`)
	}
	w.send("K *")
	m := w.expect(`K \* (\d+) (.*)`)
	if m[1] != strconv.Itoa(n) {
		t.Fatalf("total %s, want %d", m[1], n)
	}
	keys := strings.Fields(m[2])
	if len(keys) != 1000 || keys[0] != "k00001" || keys[999] != "k01000" || !slices.IsSorted(keys) {
		t.Fatalf("listed %d keys from %s to %s", len(keys), keys[0], keys[len(keys)-1])
	}
	w.send("K k081*")
	m = w.expect(`K k081\* (\d+) (.*)`)
	if m[1] != "100" || len(strings.Fields(m[2])) != 100 {
		t.Fatalf("prefix listing: %s keys, %d listed", m[1], len(strings.Fields(m[2])))
	}
}

// Strangers that fill --max-conns do not lock out a client that proves
// the secret (nor a peer): at the limit, the oldest connection that has
// not authenticated makes room.
func TestFloodOfStrangersDoesNotLockOutClients(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, func(c *Config) {
		withSecrets(false)(c)
		// The strangers send nothing: taken at once, as where the kernel
		// does not hold such connections back (DeferAccept), they fill
		// the cap.
		c.Limits = Limits{MaxConns: 10, DeferAccept: -1}
	})
	for range 30 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	if _, err := auth.Authenticate(nc, r, auth.Client, clientSecret, addr, true); err != nil {
		t.Fatalf("an authenticating client among strangers: %v", err)
	}
}

// --line-timeout bounds one line, not a connection that keeps finishing
// lines while its writes never end on a line break (a pipelining client).
func TestLineTimeoutBoundsOneLine(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, func(c *Config) { c.Limits = Limits{LineTimeout: 200 * time.Millisecond} })
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go io.Copy(io.Discard, nc)
	nc.Write([]byte("S"))
	deadline := time.Now().Add(700 * time.Millisecond)
	for time.Now().Before(deadline) {
		// Each write finishes the line begun before and begins another.
		if _, err := nc.Write([]byte(" -\nS")); err != nil {
			t.Fatalf("the node closed a connection that keeps finishing its lines: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w := dialWire(t, addr)
	w.send("S -")
	w.expect(`S - self=.*`)
}
