package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
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

// A secured node forgets the connections it accepted once they close, as
// a node without secrets does: connect/close cycles do not grow its live
// heap, over plain TCP or TLS.
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
}
