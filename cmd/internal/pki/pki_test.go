package pki

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

type pair struct{ cert, key []byte }

func newCA(t *testing.T) pair {
	t.Helper()
	c, k, err := NewCA("", 3650*day, now)
	if err != nil {
		t.Fatal(err)
	}
	return pair{c, k}
}

func newCert(t *testing.T, ca pair, req CertRequest) pair {
	t.Helper()
	if req.Validity == 0 {
		req.Validity = 730 * day
	}
	c, k, err := NewCert(ca.cert, ca.key, req, now)
	if err != nil {
		t.Fatal(err)
	}
	return pair{c, k}
}

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("want exactly one CERTIFICATE block, got %q", certPEM)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pool(t *testing.T, ca pair) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(parse(t, ca.cert))
	return p
}

func verify(t *testing.T, ca pair, leaf []byte, host string, usage x509.ExtKeyUsage) error {
	t.Helper()
	_, err := parse(t, leaf).Verify(x509.VerifyOptions{
		Roots:       pool(t, ca),
		DNSName:     host,
		KeyUsages:   []x509.ExtKeyUsage{usage},
		CurrentTime: now,
	})
	return err
}

func TestNewCA(t *testing.T) {
	ca := newCA(t)
	c := parse(t, ca.cert)
	if c.Subject.CommonName != "lockd CA" {
		t.Errorf("CN %q, want the default lockd CA", c.Subject.CommonName)
	}
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("IsCA %v, BasicConstraintsValid %v, MaxPathLen %d, MaxPathLenZero %v: want a CA that signs leaves only",
			c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.MaxPathLenZero)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature; c.KeyUsage != want {
		t.Errorf("KeyUsage %b, want %b", c.KeyUsage, want)
	}
	if !c.NotBefore.Equal(now.Add(-time.Hour)) || !c.NotAfter.Equal(now.Add(3650*day)) {
		t.Errorf("valid %s to %s, want now-1h to now+3650 days", c.NotBefore, c.NotAfter)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %s: want positive and at most 128 bits", c.SerialNumber)
	}
	if len(c.SubjectKeyId) == 0 {
		t.Error("no SubjectKeyId")
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve.Params().Name != "P-256" {
		t.Errorf("public key %T, want ECDSA P-256", c.PublicKey)
	}
	block, _ := pem.Decode(ca.key)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key is not a PKCS#8 PEM block: %q", ca.key)
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		t.Error(err)
	}

	named, _, err := NewCA("acme lockd CA", day, now)
	if err != nil {
		t.Fatal(err)
	}
	if cn := parse(t, named).Subject.CommonName; cn != "acme lockd CA" {
		t.Errorf("CN %q, want acme lockd CA", cn)
	}
	other := newCA(t)
	if parse(t, other.cert).SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two CAs share a serial")
	}
	if _, _, err := NewCA("", 0, now); err == nil {
		t.Error("NewCA with validity 0 succeeded")
	}
}

func TestNodeCert(t *testing.T) {
	ca := newCA(t)
	node := newCert(t, ca, CertRequest{Hosts: []string{"10.0.0.1", "node1.example.com", "localhost", "127.0.0.1", "::1", "10.0.0.1"}})
	c := parse(t, node.cert)

	for _, host := range []string{"10.0.0.1", "node1.example.com", "localhost", "127.0.0.1", "::1"} {
		if err := verify(t, ca, node.cert, host, x509.ExtKeyUsageServerAuth); err != nil {
			t.Errorf("server auth as %s: %v", host, err)
		}
	}
	if err := verify(t, ca, node.cert, "10.0.0.2", x509.ExtKeyUsageServerAuth); err == nil {
		t.Error("node certificate verifies for a host it does not name")
	}
	if err := verify(t, ca, node.cert, "", x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("client auth (peer links): %v", err)
	}
	if r := auth.RoleOfCert(c); r != auth.Peer {
		t.Errorf("role %s, want peer", r)
	}
	if c.Subject.CommonName != "10.0.0.1" {
		t.Errorf("CN %q, want the first host", c.Subject.CommonName)
	}
	if len(c.IPAddresses) != 3 || !slices.Equal(c.DNSNames, []string{"node1.example.com", "localhost"}) {
		t.Errorf("IPs %v, DNS names %v: want 10.0.0.1, 127.0.0.1, ::1 once each and the two names", c.IPAddresses, c.DNSNames)
	}
	if c.IsCA || c.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("IsCA %v, KeyUsage %b: want a leaf for digital signatures", c.IsCA, c.KeyUsage)
	}
	if caCert := parse(t, ca.cert); !slices.Equal(c.AuthorityKeyId, caCert.SubjectKeyId) {
		t.Errorf("AuthorityKeyId %x, want the CA's SubjectKeyId %x", c.AuthorityKeyId, caCert.SubjectKeyId)
	}
	if !c.NotBefore.Equal(now.Add(-time.Hour)) || !c.NotAfter.Equal(now.Add(730*day)) {
		t.Errorf("valid %s to %s, want now-1h to now+730 days", c.NotBefore, c.NotAfter)
	}
	if _, err := tls.X509KeyPair(node.cert, node.key); err != nil {
		t.Errorf("certificate and key do not pair: %v", err)
	}

	named := parse(t, newCert(t, ca, CertRequest{Role: "node", Name: "node1", Hosts: []string{"*.lockd.example.com"}}).cert)
	if named.Subject.CommonName != "node1" || !slices.Equal(named.DNSNames, []string{"*.lockd.example.com"}) {
		t.Errorf("CN %q, DNS names %v", named.Subject.CommonName, named.DNSNames)
	}
}

func TestClientCerts(t *testing.T) {
	ca := newCA(t)
	for _, tc := range []struct {
		role string
		ou   string
		want auth.Role
	}{
		{"admin", auth.OUAdmin, auth.Admin},
		{"client", auth.OUClient, auth.Client},
	} {
		p := newCert(t, ca, CertRequest{Role: tc.role, Name: "alice"})
		c := parse(t, p.cert)
		if err := verify(t, ca, p.cert, "", x509.ExtKeyUsageClientAuth); err != nil {
			t.Errorf("%s: client auth: %v", tc.role, err)
		}
		if err := verify(t, ca, p.cert, "", x509.ExtKeyUsageServerAuth); err == nil {
			t.Errorf("%s: verifies for server auth; want client auth only", tc.role)
		}
		if !slices.Equal(c.Subject.OrganizationalUnit, []string{tc.ou}) || c.Subject.CommonName != "alice" {
			t.Errorf("%s: OU %v, CN %q", tc.role, c.Subject.OrganizationalUnit, c.Subject.CommonName)
		}
		if r := auth.RoleOfCert(c); r != tc.want {
			t.Errorf("%s: role %s, want %s", tc.role, r, tc.want)
		}
		if len(c.DNSNames)+len(c.IPAddresses) != 0 {
			t.Errorf("%s: names hosts %v %v", tc.role, c.DNSNames, c.IPAddresses)
		}
	}
}

// TestHandshake runs real TLS the way lockd will: the node requires and
// verifies a client certificate from the same CA.
func TestHandshake(t *testing.T) {
	ca := newCA(t)
	node1 := newCert(t, ca, CertRequest{Hosts: []string{"node1.example.com"}})
	node2 := newCert(t, ca, CertRequest{Hosts: []string{"node2.example.com"}})
	client := newCert(t, ca, CertRequest{Role: "client", Name: "deploy-bot"})
	stranger := newCert(t, newCA(t), CertRequest{Role: "admin", Name: "mallory"})
	fakeNode := newCert(t, newCA(t), CertRequest{Hosts: []string{"node1.example.com"}})

	for _, tc := range []struct {
		name           string
		server, client pair
		ok             bool
		role           auth.Role
	}{
		{"client to node", node1, client, true, auth.Client},
		{"peer to node", node1, node2, true, auth.Peer},
		{"client from another CA", node1, stranger, false, 0},
		{"node from another CA", fakeNode, client, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role, err := handshake(t, ca, tc.server, tc.client)
			if tc.ok && err != nil {
				t.Fatalf("handshake failed: %v", err)
			}
			if !tc.ok && (err == nil || errors.Is(err, os.ErrDeadlineExceeded)) {
				t.Fatalf("handshake: %v; want a refused certificate", err)
			}
			if tc.ok && role != tc.role {
				t.Errorf("server sees role %s, want %s", role, tc.role)
			}
		})
	}
}

// handshake connects a client to a server over net.Pipe; it returns the
// role the server saw, or the first error of either side.
func handshake(t *testing.T, ca, server, client pair) (auth.Role, error) {
	t.Helper()
	sc, err := tls.X509KeyPair(server.cert, server.key)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := tls.X509KeyPair(client.cert, client.key)
	if err != nil {
		t.Fatal(err)
	}
	roots := pool(t, ca)
	clock := func() time.Time { return now }
	a, b := net.Pipe()
	deadline := time.Now().Add(10 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	srv := tls.Server(a, &tls.Config{
		Certificates: []tls.Certificate{sc},
		ClientCAs:    roots,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
		Time:         clock,
	})
	cl := tls.Client(b, &tls.Config{
		Certificates: []tls.Certificate{cc},
		RootCAs:      roots,
		ServerName:   "node1.example.com",
		MinVersion:   tls.VersionTLS13,
		Time:         clock,
	})
	type result struct {
		role auth.Role
		err  error
	}
	done := make(chan result, 1)
	// Closing the pipes, not the TLS conns: a close_notify nobody reads
	// would block on net.Pipe until tls gives up after 5s.
	go func() {
		defer a.Close()
		if err := srv.Handshake(); err != nil {
			done <- result{err: err}
			return
		}
		role := auth.RoleOfCert(srv.ConnectionState().PeerCertificates[0])
		_, err := srv.Write([]byte("ok"))
		done <- result{role, err}
	}()
	// In TLS 1.3 the client finishes first; the server's verdict on its
	// certificate arrives as the first read.
	cerr := cl.Handshake()
	if cerr == nil {
		_, cerr = io.ReadFull(cl, make([]byte, 2))
	}
	b.Close()
	r := <-done
	if r.err != nil {
		return 0, r.err
	}
	return r.role, cerr
}

func TestNewCertErrors(t *testing.T) {
	ca := newCA(t)
	other := newCA(t)
	node := newCert(t, ca, CertRequest{Hosts: []string{"10.0.0.1"}})
	shortCA, shortKey, err := NewCA("", 10*day, now)
	if err != nil {
		t.Fatal(err)
	}
	node1 := CertRequest{Hosts: []string{"10.0.0.1"}, Validity: day}

	for _, tc := range []struct {
		name          string
		caCert, caKey []byte
		req           CertRequest
		now           time.Time
		want          string
		badRequest    bool
	}{
		{"unknown role", ca.cert, ca.key, CertRequest{Role: "root", Name: "x", Validity: day}, now, `unknown certificate role "root": want node, admin or client`, true},
		{"node without hosts", ca.cert, ca.key, CertRequest{Role: "node", Validity: day}, now, "needs at least one host", true},
		{"host with a space", ca.cert, ca.key, CertRequest{Hosts: []string{"node 1"}, Validity: day}, now, `host "node 1" is neither an IP address nor a valid DNS name`, true},
		{"host with a port", ca.cert, ca.key, CertRequest{Hosts: []string{"10.0.0.1:7070"}, Validity: day}, now, "give the host alone (10.0.0.1)", true},
		{"host as URL", ca.cert, ca.key, CertRequest{Hosts: []string{"https://node1"}, Validity: day}, now, "is a URL", true},
		{"bracketed IPv6", ca.cert, ca.key, CertRequest{Hosts: []string{"[::1]"}, Validity: day}, now, "without brackets (::1)", true},
		{"label starting with a hyphen", ca.cert, ca.key, CertRequest{Hosts: []string{"-node.example.com"}, Validity: day}, now, "neither an IP", true},
		{"empty label", ca.cert, ca.key, CertRequest{Hosts: []string{"node..example.com"}, Validity: day}, now, "neither an IP", true},
		{"empty host", ca.cert, ca.key, CertRequest{Hosts: []string{" "}, Validity: day}, now, "empty host", true},
		{"admin without name", ca.cert, ca.key, CertRequest{Role: "admin", Validity: day}, now, "admin certificates need a name", true},
		{"client with hosts", ca.cert, ca.key, CertRequest{Role: "client", Name: "bob", Hosts: []string{"10.0.0.1"}, Validity: day}, now, "not a host", true},
		{"no validity", ca.cert, ca.key, CertRequest{Hosts: []string{"10.0.0.1"}}, now, "must be more than 0", true},
		{"leaf as CA", node.cert, node.key, node1, now, `"10.0.0.1" is not a CA`, false},
		{"key of another CA", ca.cert, other.key, node1, now, "the CA key does not match the CA certificate", false},
		{"key and certificate swapped", ca.key, ca.cert, node1, now, "holds no PEM CERTIFICATE block", false},
		{"certificate given as key", ca.cert, ca.cert, node1, now, "no PEM private key found", false},
		{"not PEM", []byte("hello"), ca.key, node1, now, "holds no PEM CERTIFICATE block", false},
		{"expired CA", shortCA, shortKey, node1, now.Add(11 * day), "expired on 2025-06-11", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := NewCert(tc.caCert, tc.caKey, tc.req, tc.now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
			var bad interface{ BadRequest() bool }
			if got := errors.As(err, &bad) && bad.BadRequest(); got != tc.badRequest {
				t.Errorf("BadRequest %v, want %v", got, tc.badRequest)
			}
		})
	}
}

func TestCertEndsWithItsCA(t *testing.T) {
	caCert, caKey, err := NewCA("", 10*day, now)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := NewCert(caCert, caKey, CertRequest{Hosts: []string{"10.0.0.1"}, Validity: 730 * day}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := parse(t, c).NotAfter, parse(t, caCert).NotAfter; !got.Equal(want) {
		t.Errorf("NotAfter %s, want the CA's %s", got, want)
	}
}

// TestSEC1CAKey signs with a CA key as openssl writes it.
func TestSEC1CAKey(t *testing.T) {
	ca := newCA(t)
	block, _ := pem.Decode(ca.key)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	sec1 := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	c, _, err := NewCert(ca.cert, sec1, CertRequest{Role: "client", Name: "bob", Validity: day}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(t, ca, c, "", x509.ExtKeyUsageClientAuth); err != nil {
		t.Error(err)
	}
}
