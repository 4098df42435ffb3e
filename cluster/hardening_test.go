package cluster

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
)

// testTLS writes a self-signed certificate for 127.0.0.1 to a temporary
// directory and returns the node's TLS and a client configuration that
// trusts it.
func testTLS(t *testing.T) (*auth.TLS, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:        true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "node.pem"), filepath.Join(dir, "node-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	lt, err := auth.LoadTLS(auth.TLSFiles{Cert: certFile, Key: keyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return lt, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// liveHeap is the heap in use after a forced collection.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// openConns is how many connections tn still knows.
func openConns(tn *testNode) int {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return len(tn.conns)
}

// cycleGrowth is how much the live heap grows over cycles connect/close
// cycles on a node started with set, once the node has forgotten every
// connection. With tlsCfg, each cycle finishes a TLS handshake first.
func cycleGrowth(t *testing.T, set func(*Config), tlsCfg *tls.Config, cycles int) int64 {
	t.Helper()
	addr := freeAddrs(t, 1)[0]
	tn := startNodeWith(t, addr, nil, func(c *Config) {
		// A long auth timeout: no connection may be forgotten only
		// because its timer ran out.
		c.Limits = Limits{AuthTimeout: time.Minute, MaxConnsPerIP: -1}
		if set != nil {
			set(c)
		}
	})
	cycle := func() {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if tlsCfg != nil {
			tc := tls.Client(nc, tlsCfg)
			tc.SetDeadline(time.Now().Add(5 * time.Second))
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			// A TLS 1.3 server sends its tickets after the handshake: read
			// a little, so that the node's side of it finishes too.
			tc.SetReadDeadline(time.Now().Add(time.Millisecond))
			tc.Read(make([]byte, 1))
			nc = tc
		}
		nc.Close()
	}
	// Warm up the pools and the runtime before the first measure.
	for range 50 {
		cycle()
	}
	waitFor(t, "warm-up connections forgotten", func() bool { return openConns(tn) == 0 })
	before := liveHeap()
	for range cycles {
		cycle()
	}
	waitFor(t, "every connection forgotten", func() bool { return openConns(tn) == 0 })
	return liveHeap() - before
}

// lateReaderGrowth is how much the live heap grows on a node, secured
// with a client secret or without secrets, over conns connections that
// each authenticate (where the node asks), pipeline status requests
// until the node holds half a MiB or more of answers for them, read
// those answers, then close: measured once the node has forgotten every
// one. A connection keeps an output buffer that grew past the pool's
// size once its answers are written (it is a busy one), so a node that
// kept closed connections kept those buffers too; answers never read are
// dropped at the close, and would not show it.
func lateReaderGrowth(t *testing.T, secured bool, conns int) int64 {
	t.Helper()
	addr := freeAddrs(t, 1)[0]
	tn := startNodeWith(t, addr, nil, func(c *Config) {
		c.Limits = Limits{AuthTimeout: time.Minute, MaxConnsPerIP: -1}
		if secured {
			c.Security.Secrets = auth.Secrets{Client: clientSecret}
		}
	})
	answered := tn.statusAnswered
	// A chunk's answers are about 200 KiB: the node's queue for a
	// connection ends between half a MiB and readPauseAt, so the node
	// never stops reading it.
	const target = 512 << 10
	chunk := []byte(strings.Repeat("S -\n", 1<<10))
	before := liveHeap()
	var total uint64
	for range conns {
		// Small segments: the answers wait in the node's memory rather
		// than in its socket's send buffer.
		nc, err := smallSegments().Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		nc.SetDeadline(time.Now().Add(time.Minute))
		r := bufio.NewReader(nc)
		if secured {
			if _, err := auth.Authenticate(nc, r, auth.Client, clientSecret, addr, true); err != nil {
				t.Fatal(err)
			}
		}
		// The socket buffers take the first answers, the node's queue
		// the rest. The previous connection's answers have all been
		// read; once the node sees them written, it holds none.
		waitFor(t, "no answers unread", func() bool { return tn.output.bytes.Load() == 0 })
		sent := 0
		for tn.output.bytes.Load() < target {
			if _, err := nc.Write(chunk); err != nil {
				t.Fatal(err)
			}
			sent += 1 << 10
			total += 1 << 10
			waitStatusAnswered(t, answered, total)
		}
		for range sent {
			if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "S - ") {
				t.Fatalf("reading the answers: %q %v", line, err)
			}
		}
		nc.Close()
	}
	waitFor(t, "every connection forgotten", func() bool { return openConns(tn) == 0 })
	return liveHeap() - before
}

// A secured node forgets the connections it accepted once they close, as
// a node without secrets does: connect/close cycles do not grow its live
// heap, over plain TCP or TLS, and neither do connections that
// authenticated and let half a MiB of answers or more pile up before they
// read them and closed.
func TestSecuredNodeForgetsClosedConnections(t *testing.T) {
	const slack = 512 << 10
	secrets := func(c *Config) { c.Security.Secrets = auth.Secrets{Client: clientSecret} }
	t.Run("plain", func(t *testing.T) {
		const cycles = 2000
		open := cycleGrowth(t, nil, nil, cycles)
		secured := cycleGrowth(t, secrets, nil, cycles)
		t.Logf("%d cycles: live heap +%d B without secrets, +%d B with", cycles, open, secured)
		if secured > open+slack {
			t.Fatalf("%d connect/close cycles grew a secured node's live heap by %d B (%d B a cycle), one without secrets by %d B", cycles, secured, secured/cycles, open)
		}
	})
	t.Run("tls", func(t *testing.T) {
		const cycles = 200
		lt, cli := testTLS(t)
		withTLS := func(c *Config) { c.Security.TLS = lt }
		open := cycleGrowth(t, withTLS, cli, cycles)
		secured := cycleGrowth(t, func(c *Config) { withTLS(c); secrets(c) }, cli, cycles)
		t.Logf("%d TLS cycles: live heap +%d B without secrets, +%d B with", cycles, open, secured)
		if secured > open+slack {
			t.Fatalf("%d TLS connect/close cycles grew a secured node's live heap by %d B (%d B a cycle), one without secrets by %d B", cycles, secured, secured/cycles, open)
		}
	})
	t.Run("authenticated, answers read late", func(t *testing.T) {
		const conns = 16
		open := lateReaderGrowth(t, false, conns)
		secured := lateReaderGrowth(t, true, conns)
		t.Logf("%d connections that read a backlog of answers, closed: live heap +%d B without secrets, +%d B with", conns, open, secured)
		if secured > open+slack {
			t.Fatalf("%d authenticated connections that read a backlog of answers and closed grew a secured node's live heap by %d B (%d B each), one without secrets by %d B", conns, secured, secured/conns, open)
		}
	})
}

// Strangers that send malformed lines and never read are closed after as
// many refusals as those that send well-formed requests: neither the
// node's buffered answers nor its live heap grow with what they send.
// Each keeps writing until the node closes it, stops reading it, or it
// has sent a few MiB: enough to fill the socket buffers between them and
// make a node that answered every line queue answers of its own.
func TestMalformedLinesBeforeAuthAreRefusalsToo(t *testing.T) {
	const (
		conns    = 300
		perConn  = 4 << 20 // bytes a stranger sends at most
		outBound = 1 << 20 // answers buffered by the node, all strangers together
		// Growth of the live heap while the strangers' connections are
		// still open on the test's side: their client ends count too.
		heapBound = 8 << 20
	)
	lt, cli := testTLS(t)
	for _, tc := range []struct {
		name string
		tls  *tls.Config
	}{
		{"plain", nil},
		{"tls", cli},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddrs(t, 1)[0]
			tn := startNodeWith(t, addr, nil, func(c *Config) {
				c.Security.Secrets = auth.Secrets{Client: clientSecret}
				if tc.tls != nil {
					c.Security.TLS = lt
				}
				c.Limits = Limits{AuthTimeout: time.Minute, MaxConnsPerIP: -1}
			})
			var peak atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					if b := tn.output.bytes.Load(); b > peak.Load() {
						peak.Store(b)
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			defer func() {
				close(stop)
				<-sampled
			}()
			before := liveHeap()
			junk := []byte(strings.Repeat("a x\n", 16<<10))
			var wg sync.WaitGroup
			var sent atomic.Int64
			ncs := make([]net.Conn, conns)
			for i := range ncs {
				nc, err := smallSegments().Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nc.Close() })
				if tc.tls != nil {
					nc = tls.Client(nc, tc.tls)
				}
				ncs[i] = nc
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Until the node closes the connection (the write
					// fails), or stops reading it (the write times out),
					// or perConn is sent.
					for n := 0; n < perConn; n += len(junk) {
						nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
						k, err := nc.Write(junk)
						sent.Add(int64(k))
						if err != nil {
							return
						}
					}
				}()
			}
			wg.Wait()
			// The node may still be reading what the socket buffers took:
			// give it the time to close every stranger, then measure
			// while the test still holds its ends of them.
			deadline := time.Now().Add(10 * time.Second)
			for openConns(tn) > 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			left := openConns(tn)
			grown := liveHeap() - before
			p := peak.Load()
			t.Logf("%d strangers sent %d B of malformed lines: at most %d B of answers buffered, live heap +%d B, %d still open", conns, sent.Load(), p, grown, left)
			if p > outBound {
				t.Errorf("%d strangers sending malformed lines made the node buffer %d B of answers, more than %d", conns, p, outBound)
			}
			if grown > heapBound {
				t.Errorf("%d strangers sending malformed lines grew the live heap by %d B, more than %d", conns, grown, heapBound)
			}
			if left > 0 {
				t.Fatalf("%d of %d strangers still open after 10s", left, conns)
			}
			// Each got its refusals and the last line, then the end.
			nc := ncs[0]
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(nc)
			lines := 0
			last := ""
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					break
				}
				lines++
				last = line
			}
			if lines != maxRefusals+1 || !strings.Contains(last, "too many requests before authenticating") {
				t.Fatalf("a stranger read %d lines, the last %q; want %d refusals and the closing line", lines, last, maxRefusals)
			}
		})
	}
}

// relay listens on a free address and passes every connection it takes
// on to target, both ways, byte for byte: a stranger on an address of a
// client's list (a dead node's) that hands the client's handshake to a
// live node.
func relay(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			go func() { io.Copy(b, a); b.Close() }()
			go func() { io.Copy(a, b); a.Close() }()
		}
	}()
	return ln.Addr().String()
}

// Without TLS, a client's handshake relayed to a node by a stranger
// listening on another address is refused, whatever role it proves; the
// same handshake dialled straight at the node, by its address or by
// localhost, is served.
func TestRelayedClientHandshakeIsRefused(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, withSecrets(false))
	via := relay(t, addr)
	for _, role := range []auth.Role{auth.Client, auth.Admin} {
		nc, err := net.Dial("tcp", via)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(nc)
		_, err = auth.Authenticate(nc, r, role, clientSecret, via, true)
		var re *auth.RefusedError
		if !errors.As(err, &re) || !strings.Contains(re.Words, "not this node's") || strings.Contains(re.Words, addr) {
			t.Fatalf("%s through a relay: %v", role, err)
		}
		// Refused and closed: nothing more is served there.
		fmt.Fprintf(nc, "A k 30 0\n")
		if line, err := r.ReadString('\n'); err == nil {
			t.Fatalf("after a relayed handshake the node answered %q", line)
		}
		nc.Close()
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, target := range []string{addr, "localhost:" + port} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if role, err := auth.Authenticate(nc, bufio.NewReader(nc), auth.Client, clientSecret, target, true); err != nil || role != auth.Admin {
			t.Fatalf("dialled as %s: %s %v", target, role, err)
		}
	}
}

// A secret typed where a role or an op belongs is never sent back: not
// as the key of an I line, nor on a connection that has not
// authenticated.
func TestSecretTypedInTheWrongPlaceIsNotEchoed(t *testing.T) {
	const typed = "s3cr3t-typed-in-the-wrong-place"
	for _, tc := range []struct {
		name string
		set  func(*Config)
		line string
	}{
		{"I SECRET, secured node", withSecrets(false), "I " + typed},
		{"I SECRET with too many words", withSecrets(false), "I " + typed + strings.Repeat(" x", 20)},
		{"i SECRET before authenticating", withSecrets(false), "i " + typed},
		{"I SECRET, open node", nil, "I " + typed},
		{"I SECRET with a tab", nil, "I " + typed + " a\tb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddrs(t, 1)[0]
			startNodeWith(t, addr, nil, tc.set)
			w := dialWire(t, addr)
			w.send(tc.line)
			m := w.expect(`(E - .*)`)
			if strings.Contains(m[1], typed) {
				t.Fatalf("the answer echoes the secret: %q", m[1])
			}
		})
	}
	// A role is still echoed, and so is a key on an authenticated line.
	addr := freeAddrs(t, 1)[0]
	startNode(t, addr, nil)
	w := dialWire(t, addr)
	w.send("I client")
	w.expect(`E client I: .*`)
	w.send("a deploy 30 0")
	w.expect(`E deploy \?: .*`)
}

// Wrong secrets from one address slow down the next authentications from
// it, and from it only: a few typos are free, then each wrong secret
// refuses every authentication from there for a while, told when to
// retry.
func TestWrongSecretsSlowDownTheirSource(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, withSecrets(false))
	try := func(from, secret string) string {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		w := &wire{t: t, nc: nc, r: bufio.NewReader(nc)}
		w.send("I client " + secret)
		return w.expect(`(.*)`)[1]
	}
	const wrong = "not-the-secret-0123456789"
	for i := range authFreeFailures {
		if got := try("127.0.0.1", wrong); !strings.HasPrefix(got, "E client I: wrong secret for role client") {
			t.Fatalf("wrong secret %d: %q", i+1, got)
		}
	}
	if got := try("127.0.0.1", string(clientSecret)); got != "I client ok admin" {
		t.Fatalf("the right secret after %d typos: %q", authFreeFailures, got)
	}
	start := time.Now()
	try("127.0.0.1", wrong)
	got := try("127.0.0.1", string(clientSecret))
	if time.Since(start) < authPenaltyBase && !strings.HasPrefix(got, "E client I: too many wrong secrets from this address: retry in ") {
		t.Fatalf("the right secret right after one wrong secret too many: %q", got)
	}
	// Another address is not slowed down.
	if got := try("127.0.0.2", string(clientSecret)); got != "I client ok admin" {
		t.Fatalf("from another address: %q", got)
	}
	// Once the penalty is over, the right secret is served again.
	time.Sleep(time.Until(start.Add(authPenaltyBase + 50*time.Millisecond)))
	if got := try("127.0.0.1", string(clientSecret)); got != "I client ok admin" {
		t.Fatalf("after the penalty: %q", got)
	}
}

// The sources remembered are bounded; forgotten sources make room first.
func TestAuthBackoffIsBounded(t *testing.T) {
	var b authBackoff
	now := time.Now()
	for i := range 3 * maxAuthSources {
		b.failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String(), "client", now)
		if len(b.m) > maxAuthSources {
			t.Fatalf("%d sources remembered", len(b.m))
		}
	}
	// IPv6 counts by /64: one machine cannot spread its guesses over
	// its addresses.
	for i := range authFreeFailures + 1 {
		b.failed(fmt.Sprintf("2001:db8::%x", i+1), "client", now)
	}
	if b.penalty("2001:db8::ffff", "client", now) <= 0 {
		t.Fatal("another address of the same /64 is not slowed down")
	}
	// Wrong client secrets from a source do not slow down the peers'
	// handshakes from there (nodes behind one NAT, or on one machine).
	if b.penalty("2001:db8::1", "peer", now) != 0 {
		t.Fatal("wrong client secrets slow down a peer's handshake from the same source")
	}
	// Once they are forgotten, new sources take their room.
	later := now.Add(authForget + time.Second)
	for i := range maxAuthSources {
		b.failed(netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)}).String(), "client", later)
	}
	if len(b.m) > maxAuthSources {
		t.Fatalf("%d sources remembered", len(b.m))
	}
}

// One machine cannot take every connection by default; a negative cap is
// none.
func TestConnsPerIPCappedByDefault(t *testing.T) {
	var l Limits
	l.fill()
	if l.MaxConnsPerIP != DefaultLimits.MaxConnsPerIP || l.MaxConnsPerIP <= 0 || l.MaxConnsPerIP >= l.MaxConns {
		t.Fatalf("default cap per IP %d, of %d connections", l.MaxConnsPerIP, l.MaxConns)
	}
	l = Limits{MaxConnsPerIP: -1}
	l.fill()
	if l.MaxConnsPerIP > 0 {
		t.Fatalf("no cap asked, got %d", l.MaxConnsPerIP)
	}
}

// A stranger that repeats the first step of the handshake is cut off as
// one that sends anything else: a challenge is an answer too.
func TestRepeatedHellosBeforeAuthAreCapped(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, withSecrets(false))
	w := dialWire(t, addr)
	for range maxRefusals {
		w.send("I client hello " + auth.NewNonce() + " " + addr)
	}
	for range maxRefusals {
		w.expect(`I client challenge [0-9a-f]{32}`)
	}
	w.expect(`E - \?: too many requests before authenticating; closing this connection`)
	// The official client authenticates within the cap.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := auth.Authenticate(nc, bufio.NewReader(nc), auth.Client, clientSecret, addr, true); err != nil {
		t.Fatal(err)
	}
}

// A client's handshake may name this node by any address that leads to
// it, and no other.
func TestHandshakeTargetsThatReachTheNode(t *testing.T) {
	g, err := newGate(Security{Secrets: auth.Secrets{Client: clientSecret}, ClientAddrs: []string{"lockd.example:17070", "192.0.2.10:7070"}}, "0.0.0.0:7070", 0)
	if err != nil {
		t.Fatal(err)
	}
	g.hostname = "node-1"
	g.resolved = map[string][]netip.Addr{
		"localhost": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"node-1":    {netip.MustParseAddr("10.0.0.1")},
	}
	g.localIPs = []netip.Addr{netip.MustParseAddr("10.0.0.1")}
	v4 := &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 7070}
	lo := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 7070}
	v6 := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 7070}
	for _, tc := range []struct {
		addr  string
		local *net.TCPAddr
		want  bool
	}{
		{"10.0.0.1:7070", v4, true},
		{"NODE-1:7070", v4, true},
		{"lockd.example:17070", v4, true}, // --advertise-client, through a NAT
		{"192.0.2.10:7070", v4, true},
		{"localhost:7070", lo, true},
		{"[::1]:7070", v6, true},
		{"127.0.0.1:7070", &net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 7070}, true},
		{"10.0.0.2:7070", v4, false}, // another node's
		{"10.0.0.1:7071", v4, false}, // another port
		{"localhost:7070", v4, false},
		{"0.0.0.0:7070", v4, false},      // the wildcard is no address of this node
		{"lockd.example:7070", v4, true}, // a name of this node, at the port it arrived at
		{"other.example:7070", v4, false},
		{"node-2:7070", v4, false},
		{"", v4, false},
		{"garbage", v4, false},
	} {
		if got := g.reaches(tc.addr, tc.local); got != tc.want {
			t.Errorf("%q arriving at %s: reaches %v, want %v", tc.addr, tc.local, got, tc.want)
		}
	}
	// A name of this machine leads to a node listening on one address
	// only when every address it resolves to is that one: a client that
	// dialled localhost may have reached a stranger on [::1] otherwise.
	one, err := newGate(Security{Secrets: auth.Secrets{Client: clientSecret}}, "127.0.0.1:7070", 0)
	if err != nil {
		t.Fatal(err)
	}
	one.hostname = "node-1"
	for _, tc := range []struct {
		addr     string
		resolved []string
		want     bool
	}{
		{"localhost:7070", []string{"127.0.0.1", "::1"}, false},
		{"localhost:7070", []string{"127.0.0.1"}, true},
		{"node-1:7070", []string{"127.0.0.1"}, true},
		{"node-1:7070", []string{"127.0.1.1"}, false},
		{"node-1:7070", nil, false}, // did not resolve
	} {
		var ips []netip.Addr
		for _, a := range tc.resolved {
			ips = append(ips, netip.MustParseAddr(a))
		}
		host, _, _ := net.SplitHostPort(tc.addr)
		one.resolved = map[string][]netip.Addr{host: ips}
		if got := one.reaches(tc.addr, lo); got != tc.want {
			t.Errorf("on 127.0.0.1 only, %q resolving to %v: reaches %v, want %v", tc.addr, tc.resolved, got, tc.want)
		}
	}
	// On every address, a name that leads to one that is not this
	// machine's is refused too.
	g.resolved["node-1"] = []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("192.0.2.99")}
	if g.reaches("node-1:7070", v4) {
		t.Error("node-1 resolving to an address of another machine too: reaches")
	}
}
