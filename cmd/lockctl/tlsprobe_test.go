package main

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cmd/internal/pki"
)

// tlsListener serves TLS handshakes on a loopback port until the test
// ends, as a lockd started with --tls-cert does.
func tlsListener(t *testing.T) string {
	t.Helper()
	now := time.Now()
	caCert, caKey, err := pki.NewCA("", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := pki.NewCert(caCert, caKey, pki.CertRequest{Hosts: []string{"127.0.0.1"}, Validity: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	return serveConns(t, ln, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.(*tls.Conn).Handshake()
		c.Read(make([]byte, 1))
	})
}

// The probe tells a TLS node from a plain one and from a silent one, and
// never waits past its bound.
func TestSpeaksTLS(t *testing.T) {
	if addr := tlsListener(t); probeTLS([]string{closedAddr(t), addr}, time.Second) != addr {
		t.Errorf("a TLS listener at %s is not found", addr)
	}
	plain := startFake(t)
	if got := probeTLS([]string{plain.addr}, time.Second); got != "" {
		t.Errorf("a plain lockd is taken for TLS: %q", got)
	}
	silent := startFake(t)
	silent.mute = true
	start := time.Now()
	if got := probeTLS([]string{silent.addr}, 200*time.Millisecond); got != "" {
		t.Errorf("a silent node is taken for TLS: %q", got)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the probe of a silent node took %s, bound 200ms", took)
	}
}

// status without TLS against a TLS node says so at once, with
// --timeout and --failure-timeout far longer than it takes.
func TestStatusNamesATLSNode(t *testing.T) {
	addr := tlsListener(t)
	start := time.Now()
	code, _, errOut := lockctl(t, "--addr", addr, "--timeout", "20s", "--failure-timeout", "20s", "status")
	if code != exitFailed || !strings.Contains(errOut, "speaks TLS, and lockctl spoke plain TCP to it; pass --tls-ca FILE") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s", took)
	}
}
