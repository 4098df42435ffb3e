package auth

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
	"testing"
	"time"
)

// testPKI writes a CA and a certificate with OU ou, signed by it, to dir.
func testPKI(t *testing.T, dir, name, ou string) (certFile, keyFile, caFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA " + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name, OrganizationalUnit: []string{ou}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile = filepath.Join(dir, name+".pem")
	keyFile = filepath.Join(dir, name+"-key.pem")
	caFile = filepath.Join(dir, name+"-ca.pem")
	write := func(p, typ string, b []byte) {
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certFile, "CERTIFICATE", der)
	write(keyFile, "PRIVATE KEY", kb)
	write(caFile, "CERTIFICATE", caDER)
	return
}

// dialOnce runs one handshake from client to server config over loopback
// and returns the role the server saw and the client's error.
func dialOnce(t *testing.T, srv *tls.Config, cli *tls.Config) (Role, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan Role, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- None
			return
		}
		defer c.Close()
		tc := tls.Server(c, srv)
		if tc.Handshake() != nil {
			got <- None
			return
		}
		got <- CertRole(tc.ConnectionState())
		tc.Read(make([]byte, 1))
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cli)
	if err == nil {
		c.Close()
	}
	return <-got, err
}

func TestTLSRolesAndRotation(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := testPKI(t, dir, "node", OUPeer)
	srv, err := LoadTLS(TLSFiles{Cert: cert, Key: key, CA: ca}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := LoadTLS(TLSFiles{Cert: cert, Key: key, CA: ca}, nil)
	if err != nil {
		t.Fatal(err)
	}
	role, err := dialOnce(t, srv.ServerConfig(), cli.ClientConfig("127.0.0.1:7070"))
	if err != nil || role != Peer {
		t.Fatalf("node certificate: role %s, err %v", role, err)
	}
	// Without a certificate the client is verified as nobody.
	anon, _ := LoadTLS(TLSFiles{CA: ca}, nil)
	if role, err := dialOnce(t, srv.ServerConfig(), anon.ClientConfig("127.0.0.1:7070")); err != nil || role != None {
		t.Fatalf("no client certificate: role %s, err %v", role, err)
	}

	// Rotate the server to a certificate of another CA: clients that
	// trust only the first CA now refuse it, without a restart.
	dir2 := t.TempDir()
	cert2, key2, _ := testPKI(t, dir2, "node", OUPeer)
	for _, p := range [][2]string{{cert2, cert}, {key2, key}} {
		b, _ := os.ReadFile(p[0])
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dialOnce(t, srv.ServerConfig(), cli.ClientConfig("127.0.0.1:7070")); err == nil {
		t.Fatal("a client trusting the old CA accepted the rotated certificate")
	}

	// A broken file keeps the certificate in force.
	os.WriteFile(cert, []byte("garbage"), 0o600)
	if err := srv.Reload(); err == nil {
		t.Fatal("reload of a broken certificate succeeded")
	}
	if c, _ := srv.current(); c == nil {
		t.Fatal("the previous certificate was dropped")
	}
}

func TestLoadTLSNamesTheFlag(t *testing.T) {
	if _, err := LoadTLS(TLSFiles{Cert: "x.pem"}, nil); err == nil {
		t.Fatal("cert without key accepted")
	}
	if _, err := LoadTLS(TLSFiles{ClientAuth: true}, nil); err == nil {
		t.Fatal("client auth without CA accepted")
	}
	_, err := LoadTLS(TLSFiles{Cert: "/nonexistent.pem", Key: "/nonexistent-key.pem"}, nil)
	if err == nil || err.Error()[:10] != "--tls-cert" {
		t.Fatalf("err = %v, want it to name --tls-cert", err)
	}
}
