package cluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
)

// A stranger that shares a node's address and sends wrong peer secrets
// as fast as it can never pauses the handshakes of a peer that proves
// itself from that address: every one is served, however long the
// stranger's run of wrong secrets.
func TestWrongPeerSecretsNeverPauseARealPeer(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, func(c *Config) {
		c.Security.Secrets = auth.Secrets{Client: clientSecret, Peer: peerSecret}
	})
	var wrong atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				continue
			}
			nc.Write([]byte("I peer not-the-peer-secret-0123456789\n"))
			line, _ := bufio.NewReader(nc).ReadString('\n')
			nc.Close()
			if strings.HasPrefix(line, "E peer I: ") {
				wrong.Add(1)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "the stranger's first wrong secrets", func() bool { return wrong.Load() > authFreeFailures+1 })
	for i := range 20 {
		// Each try comes after another wrong secret: a pause, if any,
		// has just begun again.
		seen := wrong.Load()
		waitFor(t, "another wrong secret", func() bool { return wrong.Load() > seen })
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		role, err := auth.Authenticate(nc, bufio.NewReader(nc), auth.Peer, peerSecret, addr, true)
		nc.Close()
		if err != nil || role != auth.Peer {
			t.Fatalf("peer handshake %d, after %d wrong peer secrets from its address: %s %v", i+1, wrong.Load(), role, err)
		}
	}
}

// A stranger that fills --max-conns-per-ip of an address with idle
// connections, and reopens each as the node closes it, keeps neither a
// client that proves the secret nor a peer from that address out.
func TestFloodFromAnAddressDoesNotLockOutItsClients(t *testing.T) {
	const (
		perIP = 200
		flood = 4 * perIP
		tries = 5
	)
	addr := freeAddrs(t, 1)[0]
	tn := startNodeWith(t, addr, nil, func(c *Config) {
		c.Security.Secrets = auth.Secrets{Client: clientSecret, Peer: peerSecret}
		c.Limits = Limits{MaxConnsPerIP: perIP}
	})
	var closed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					continue
				}
				go func() { <-stop; nc.Close() }()
				// Idle until the node closes it, then again.
				nc.Read(make([]byte, 256))
				nc.Close()
				closed.Add(1)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "the flood to fill the cap and be turned away", func() bool {
		return openConns(tn) >= perIP && closed.Load() >= flood
	})
	try := func(role auth.Role, secret []byte) error {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = auth.Authenticate(nc, bufio.NewReader(nc), role, secret, addr, true)
		return err
	}
	for _, who := range []struct {
		role   auth.Role
		secret []byte
	}{{auth.Client, clientSecret}, {auth.Peer, peerSecret}} {
		ok := 0
		var errs []string
		for range tries {
			if err := try(who.role, who.secret); err != nil {
				errs = append(errs, err.Error())
			} else {
				ok++
			}
		}
		if ok < tries-1 {
			t.Fatalf("a %s authenticated %d times of %d from an address a stranger floods (%d of its connections closed): %q", who.role, ok, tries, closed.Load(), errs)
		}
		t.Logf("%s: %d of %d %q", who.role, ok, tries, errs)
	}
}

// Where connections must authenticate, one that has sent nothing is held
// back by the kernel and takes no place under the node's caps: a flood
// of them cannot evict a client's connection before its first line.
// Once it sends something it is taken, and counted, as any other.
func TestSilentConnectionsAreHeldBackUntilTheySpeak(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel holds connections back on Linux only")
	}
	addr := freeAddrs(t, 1)[0]
	tn := startNodeWith(t, addr, nil, func(c *Config) {
		withSecrets(false)(c)
		// Far longer than the test takes: the silent connection is
		// taken for what it sends, not because the wait ran out.
		c.Limits = Limits{MaxConnsPerIP: 1, DeferAccept: 30 * time.Second}
	})
	silent := dialWire(t, addr)
	w := dialWire(t, addr)
	w.send("I client " + string(clientSecret))
	w.expect(`I client ok admin`)
	if n := openConns(tn); n != 1 {
		t.Fatalf("%d connections open with one authenticated and one silent, want 1", n)
	}
	silent.send("Q k")
	silent.expect(`E - \?: too many connections from 127\.0\.0\.1 \(1, lockd --max-conns-per-ip\); close some`)
}

// Connections closed before their TLS handshake is done, by the auth
// timer or to make room, leave no answer queued behind (a line no writer
// would ever take, counted in lockd_output_buffered_bytes for good), and
// each one the auth timer or the handshake's own bound closes counts
// once in limit_hits{auth_timeout}, as plain TCP ones do.
func TestClosedDuringTLSHandshakeLeavesNothingQueued(t *testing.T) {
	lt, _ := testTLS(t)
	// Connections that never send a byte, taken at once (DeferAccept),
	// in the order they were dialled: as the node takes them where the
	// kernel does not hold them back.
	for _, tc := range []struct {
		name    string
		plain   bool
		limits  Limits
		dial    int
		timeout uint64 // closed by the auth timeout
	}{
		{"auth timeout", false, Limits{AuthTimeout: 200 * time.Millisecond, DeferAccept: -1}, 20, 20},
		{"evicted", false, Limits{MaxConns: 5, AuthTimeout: time.Minute, DeferAccept: -1}, 20, 0},
		{"plain TCP, auth timeout", true, Limits{AuthTimeout: 200 * time.Millisecond, DeferAccept: -1}, 20, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddrs(t, 1)[0]
			tn := startNodeWith(t, addr, nil, func(c *Config) {
				if !tc.plain {
					c.Security.TLS = lt
				}
				c.Security.Secrets = auth.Secrets{Client: clientSecret}
				c.Limits = tc.limits
			})
			var ncs []net.Conn
			for range tc.dial {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				ncs = append(ncs, nc)
			}
			closing := ncs
			if tc.timeout == 0 {
				closing = ncs[:tc.dial-tc.limits.MaxConns] // the oldest make room
			}
			for i, nc := range closing {
				nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := nc.Read(make([]byte, 64)); isTimeout(err) {
					t.Fatalf("connection %d of %d, which the node was to close, still open after 10 s", i+1, tc.dial)
				}
			}
			if tc.timeout > 0 {
				waitFor(t, "every connection forgotten", func() bool { return openConns(tn) == 0 })
			} else {
				waitFor(t, "the evicted forgotten", func() bool { return openConns(tn) <= tc.limits.MaxConns })
			}
			for _, nc := range ncs {
				nc.Close()
			}
			waitFor(t, "every connection forgotten", func() bool { return openConns(tn) == 0 })
			// A connection is forgotten while its writer may still be
			// writing its last line; a line no writer takes stays
			// counted for good.
			waitFor(t, "no bytes of answers counted as buffered with no connection open", func() bool { return tn.output.bytes.Load() == 0 })
			if got := tn.limits[limAuthTimeout].Load(); got != tc.timeout {
				t.Fatalf("limit_hits{auth_timeout} %d, want %d", got, tc.timeout)
			}
		})
	}
}

// A stranger on [::1] at a node's port, where the node listens on
// 127.0.0.1 only, gets the connections of clients that dial localhost
// (or the machine's host name) and reach ::1 first. A handshake it
// relays to the node, naming the name the client dialled, is refused:
// that name also leads to an address that is not this node's. Named by
// its IP, or by a name that leads here only, the node is still served.
func TestHelloByNameThroughARelayIsRefused(t *testing.T) {
	host, _ := os.Hostname()
	both := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}
	resolved := both
	was := lookupNetIP
	// This machine's resolver as a stock /etc/hosts has it: localhost
	// and the host name on both loopback addresses.
	lookupNetIP = func(ctx context.Context, network, name string) ([]netip.Addr, error) {
		return slices.Clone(resolved), nil
	}
	t.Cleanup(func() { lookupNetIP = was })
	addr := freeAddrs(t, 1)[0]
	_, port, _ := net.SplitHostPort(addr)
	startNodeWith(t, addr, nil, withSecrets(false))
	ln, err := net.Listen("tcp", net.JoinHostPort("::1", port))
	if err != nil {
		t.Skipf("no [::1]:%s to listen on: %v", port, err)
	}
	via := relayFrom(t, ln, addr)
	hello := func(dial, target string) error {
		nc, err := net.Dial("tcp", dial)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = auth.Authenticate(nc, bufio.NewReader(nc), auth.Client, clientSecret, target, true)
		return err
	}
	for _, name := range []string{"localhost", host} {
		target := net.JoinHostPort(name, port)
		err := hello(via, target)
		var re *auth.RefusedError
		if !errors.As(err, &re) || !strings.Contains(re.Words, "not this node's") {
			t.Fatalf("a hello naming %s relayed from [::1]: %v", target, err)
		}
		// Dialled straight at the node, the name still leads to ::1
		// too: refused as well, told to list the name.
		if err := hello(addr, target); !errors.As(err, &re) || !strings.Contains(re.Words, "--advertise-client") {
			t.Fatalf("a hello naming %s dialled at %s: %v", target, addr, err)
		}
	}
	if err := hello(addr, addr); err != nil {
		t.Fatalf("a hello naming the node's address: %v", err)
	}
	// Where localhost is 127.0.0.1 alone, it names a node on 127.0.0.1.
	resolved = both[:1]
	addr = freeAddrs(t, 1)[0]
	_, port, _ = net.SplitHostPort(addr)
	startNodeWith(t, addr, nil, withSecrets(false))
	if err := hello(addr, net.JoinHostPort("localhost", port)); err != nil {
		t.Fatalf("a hello naming localhost, which leads to the node only: %v", err)
	}
}

// relayFrom passes every connection ln takes on to target, both ways.
func relayFrom(t *testing.T, ln net.Listener, target string) string {
	t.Helper()
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
