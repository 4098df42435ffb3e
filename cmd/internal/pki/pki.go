// Package pki makes the certificates lockd's TLS links use: a private CA,
// and node, admin and client certificates signed by it, all as PEM bytes.
// The role a certificate grants is written in its Subject OU, with the
// names package auth reads back (auth.OUPeer, auth.OUAdmin, auth.OUClient).
//
// It owns key generation, certificate templates and the checks that refuse
// a request a person got wrong. It knows nothing of files, flags or
// servers: the lockd tls command decides where the bytes go, and package
// cluster decides what a verified role may do. Only the standard library
// is used, so no one needs openssl to run a secure cluster.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
)

// defaultCAName is the CA's common name when NewCA is given none.
const defaultCAName = "lockd CA"

// The roles a CertRequest may ask for.
const (
	roleNode   = "node"
	roleAdmin  = "admin"
	roleClient = "client"
)

// backdate covers clocks that run a little behind the machine that signed:
// a certificate made a minute ago must already be valid on every node.
const backdate = time.Hour

// NewCA makes a self-signed CA: ECDSA P-256 key, CN name (default "lockd
// CA" when empty), IsCA, KeyUsageCertSign|KeyUsageCRLSign|
// KeyUsageDigitalSignature, MaxPathLen 0 with MaxPathLenZero, a random
// 128-bit serial, valid from now-1h to now+validity, SubjectKeyId set.
// The key is PKCS#8 PEM ("PRIVATE KEY").
func NewCA(name string, validity time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	if validity <= 0 {
		return nil, nil, fmt.Errorf("CA validity %s: must be more than 0", validity)
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = defaultCAName
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	ski, err := subjectKeyID(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// The CA signs leaf certificates only: an intermediate it signed
		// by mistake must not be able to sign more.
		MaxPathLen:     0,
		MaxPathLenZero: true,
		SubjectKeyId:   ski,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	return encode(der, key)
}

// CertRequest says what certificate NewCert makes.
type CertRequest struct {
	Role     string        // "node" (default when empty), "admin" or "client"
	Name     string        // CN; for node defaults to the first host
	Hosts    []string      // node only (required for node): each an IP (-> IPAddresses) or a DNS name (-> DNSNames); "localhost" and 127.0.0.1 are ordinary entries
	Validity time.Duration // from now; cut at the CA's own expiry
}

// NewCert signs a certificate with the CA. node: OU lockd-peer,
// ExtKeyUsage serverAuth and clientAuth (a node is a TLS server to clients
// and a TLS client to its peers; lockctl on that machine can use it too).
// admin: OU lockd-admin, clientAuth only, no hosts. client: OU
// lockd-client, clientAuth only. KeyUsage DigitalSignature (ECDSA P-256
// keys), AuthorityKeyId from the CA. The certificate is valid from now-1h
// to now+Validity, or to the CA's expiry if that comes first, since no
// verifier accepts a certificate past its CA's. The key is PKCS#8 PEM.
//
// An error about req itself (unknown role, missing hosts or name, a host
// that is neither an IP nor a DNS name) has a method BadRequest() bool
// that returns true, so a caller can tell a mistyped request from a bad CA.
func NewCert(caCertPEM, caKeyPEM []byte, req CertRequest, now time.Time) (certPEM, keyPEM []byte, err error) {
	tmpl, err := template(req)
	if err != nil {
		return nil, nil, err
	}
	ca, caKey, err := loadCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	if !now.Before(ca.NotAfter) {
		return nil, nil, fmt.Errorf("the CA %q expired on %s: make a new CA, then new certificates for every node and client", ca.Subject.CommonName, ca.NotAfter.UTC().Format(time.DateOnly))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the key: %w", err)
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return nil, nil, err
	}
	if tmpl.SubjectKeyId, err = subjectKeyID(&key.PublicKey); err != nil {
		return nil, nil, err
	}
	tmpl.AuthorityKeyId = ca.SubjectKeyId
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(req.Validity)
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the certificate: %w", err)
	}
	return encode(der, key)
}

// requestError is a mistake in a CertRequest, as opposed to a problem
// with the CA or the machine.
type requestError struct{ msg string }

func (e *requestError) Error() string    { return e.msg }
func (e *requestError) BadRequest() bool { return true }

func badRequest(format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...)}
}

// template checks req and turns it into an unsigned certificate with
// everything but serial, keys and dates.
func template(req CertRequest) (*x509.Certificate, error) {
	if req.Validity <= 0 {
		return nil, badRequest("certificate validity %s: must be more than 0", req.Validity)
	}
	tmpl := &x509.Certificate{
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	name := strings.TrimSpace(req.Name)
	role := req.Role
	if role == "" {
		role = roleNode
	}
	switch role {
	case roleNode:
		if len(req.Hosts) == 0 {
			return nil, badRequest("a node certificate needs at least one host: the IP address or DNS name clients and peers dial to reach the node")
		}
		for _, h := range req.Hosts {
			h = strings.TrimSpace(h)
			if err := checkHost(h); err != nil {
				return nil, err
			}
			if ip := net.ParseIP(h); ip != nil {
				if !slices.ContainsFunc(tmpl.IPAddresses, ip.Equal) {
					tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
				}
			} else if !slices.Contains(tmpl.DNSNames, h) {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
			if name == "" {
				name = h
			}
		}
		tmpl.Subject.OrganizationalUnit = []string{auth.OUPeer}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	case roleAdmin, roleClient:
		if len(req.Hosts) > 0 {
			return nil, badRequest("%s certificates name a person or a program, not a host: drop the hosts %s, or ask for a node certificate", role, strings.Join(req.Hosts, ","))
		}
		if name == "" {
			return nil, badRequest("%s certificates need a name: who or what will use them (e.g. alice, deploy-bot)", role)
		}
		tmpl.Subject.OrganizationalUnit = []string{auth.OUClient}
		if role == roleAdmin {
			tmpl.Subject.OrganizationalUnit = []string{auth.OUAdmin}
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		return nil, badRequest("unknown certificate role %q: want node, admin or client", req.Role)
	}
	tmpl.Subject.CommonName = name
	return tmpl, nil
}

// checkHost accepts an IP address or a DNS name as a verifier would match
// it, and says how to fix the usual slips (a port, brackets, a URL).
func checkHost(h string) error {
	if h == "" {
		return badRequest("empty host: give an IP address or a DNS name")
	}
	if net.ParseIP(h) != nil {
		return nil
	}
	if strings.Contains(h, "://") {
		return badRequest("host %q is a URL: give the host alone, without scheme or path", h)
	}
	if host, _, err := net.SplitHostPort(h); err == nil {
		return badRequest("host %q has a port: give the host alone (%s); the certificate is valid on every port", h, host)
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return badRequest("host %q: give an IPv6 address without brackets (%s)", h, h[1:len(h)-1])
	}
	if !validDNSName(h) {
		return badRequest("host %q is neither an IP address nor a valid DNS name (letters, digits and hyphens in dot-separated labels, e.g. node1.example.com)", h)
	}
	return nil
}

// validDNSName reports whether s is a hostname as RFC 1123 writes it,
// optionally with a "*." wildcard as its first label.
func validDNSName(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// loadCA reads a CA certificate and its key, and checks they belong
// together and may sign.
func loadCA(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	block := findBlock(certPEM, "CERTIFICATE")
	if block == nil {
		return nil, nil, errors.New("the CA certificate holds no PEM CERTIFICATE block: is it the CA file, not its key?")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA certificate: %w", err)
	}
	if !ca.BasicConstraintsValid || !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, fmt.Errorf("the certificate %q is not a CA (it may not sign certificates): give the CA certificate, not a node or client one", ca.Subject.CommonName)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA key: %w", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("the CA key does not match the CA certificate %q: give the key file made with that certificate", ca.Subject.CommonName)
	}
	return ca, key, nil
}

// parseKey reads a private key as lockd writes it (PKCS#8), or as openssl
// commonly does (SEC 1 "EC PRIVATE KEY", PKCS#1 "RSA PRIVATE KEY"), so a
// CA made elsewhere can sign lockd certificates too.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	for rest := keyPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key found: is it the key file, not the certificate?")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("the key is encrypted: decrypt it first (lockd reads unencrypted PKCS#8 keys)")
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("a %T cannot sign certificates", key)
		}
		return signer, nil
	}
}

// findBlock returns the first PEM block of the given type, skipping others
// (a file may start with comments or hold a key and a certificate).
func findBlock(data []byte, typ string) *pem.Block {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil || block.Type == typ {
			return block
		}
	}
}

// newSerial is a random positive 128-bit serial: unique without a counter
// to keep, as RFC 5280 asks of one CA.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generating a serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// subjectKeyID is SHA-256 of the public key's bits, cut to 160 bits
// (RFC 7093, method 1), so chains match keys without trying each.
func subjectKeyID(pub *ecdsa.PublicKey) ([]byte, error) {
	k, err := pub.ECDH()
	if err != nil {
		return nil, fmt.Errorf("encoding the public key: %w", err)
	}
	sum := sha256.Sum256(k.Bytes())
	return sum[:20], nil
}

// encode writes a certificate and its key as PEM.
func encode(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	return certPEM, keyPEM, nil
}
