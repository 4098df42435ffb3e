package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// TLSFiles names the PEM files of one end of a TLS link.
type TLSFiles struct {
	Cert string // this end's certificate chain (a server must have one)
	Key  string // its private key
	CA   string // CAs that verify the other end; empty: system roots on a client, no client verification on a server
	// ClientAuth (server only) requires every client to present a
	// certificate that CA verifies.
	ClientAuth bool
	// ServerName (client only) is the name to verify in the server's
	// certificate; empty: the host of the address dialled.
	ServerName string
}

// reloadEvery bounds how often the files are checked for a change.
const reloadEvery = time.Second

// TLS is a TLS configuration read from files and reread when they change
// (checked at most once a second, when a connection needs it) or when
// Reload is called, so certificates rotate without a restart. A reload
// that fails keeps the previous certificates and logs why. It is safe for
// concurrent use.
type TLS struct {
	files TLSFiles
	log   *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	pool      *x509.CertPool // nil: system roots (client) or none (server)
	stamp     string         // what the files looked like when read
	lastCheck time.Time
}

// LoadTLS reads the files once, failing with a message that names the
// flag to fix. log receives reload outcomes; nil discards them.
func LoadTLS(f TLSFiles, log *slog.Logger) (*TLS, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("--tls-cert and --tls-key go together: give both files, or neither")
	}
	if f.ClientAuth && f.CA == "" {
		return nil, errors.New("--tls-client-auth needs --tls-ca: the CA that signs the client certificates")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &TLS{files: f, log: log}
	if err := t.load(); err != nil {
		return nil, err
	}
	return t, nil
}

// Files returns the files t reads.
func (t *TLS) Files() TLSFiles { return t.files }

// HasCA reports whether t verifies the other end with a CA of its own.
func (t *TLS) HasCA() bool { return t.files.CA != "" }

// Reload rereads the files now.
func (t *TLS) Reload() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reloadLocked(true)
}

func (t *TLS) load() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reloadLocked(false)
}

// stampOf describes the files' sizes and modification times: a change in
// it means a file was replaced or rewritten.
func (t *TLS) stampOf() string {
	s := ""
	for _, p := range []string{t.files.Cert, t.files.Key, t.files.CA} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
		} else {
			s += p + ":missing;"
		}
	}
	return s
}

func (t *TLS) reloadLocked(logIt bool) error {
	stamp := t.stampOf()
	var cert *tls.Certificate
	if t.files.Cert != "" {
		c, err := tls.LoadX509KeyPair(t.files.Cert, t.files.Key)
		if err != nil {
			err = fmt.Errorf("--tls-cert %s / --tls-key %s: %v", t.files.Cert, t.files.Key, unwrapPath(err))
			if logIt {
				t.log.Warn("TLS reload failed, keeping the previous certificate", "err", err.Error())
			}
			return err
		}
		cert = &c
		if w := ExposedKey("tls-key", t.files.Key); w != "" && logIt {
			t.log.Warn("TLS key reloaded, but others can read it", "why", w)
		}
	}
	var pool *x509.CertPool
	if t.files.CA != "" {
		pem, err := os.ReadFile(t.files.CA)
		if err != nil {
			err = fmt.Errorf("--tls-ca %s: %v", t.files.CA, unwrapPath(err))
			if logIt {
				t.log.Warn("TLS reload failed, keeping the previous CA", "err", err.Error())
			}
			return err
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			err = fmt.Errorf("--tls-ca %s holds no PEM certificate", t.files.CA)
			if logIt {
				t.log.Warn("TLS reload failed, keeping the previous CA", "err", err.Error())
			}
			return err
		}
	}
	t.cert, t.pool, t.stamp = cert, pool, stamp
	if logIt {
		t.log.Info("TLS files reloaded", "cert", t.files.Cert, "ca", t.files.CA)
	}
	return nil
}

// current returns the certificate and pool in force, rereading the files
// first if they changed since the last look (at most once a second).
func (t *TLS) current() (*tls.Certificate, *x509.CertPool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := time.Now(); now.Sub(t.lastCheck) >= reloadEvery {
		t.lastCheck = now
		if t.stampOf() != t.stamp {
			t.reloadLocked(true)
		}
	}
	return t.cert, t.pool
}

// ServerConfig is the configuration of a listener: this node's
// certificate, TLS 1.2 or later, and client certificates verified against
// the CA (required with ClientAuth, otherwise verified when given, so that
// peers can prove themselves by certificate).
func (t *TLS) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := t.current()
			if cert == nil {
				return nil, errors.New("this node has no TLS certificate (--tls-cert)")
			}
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
			}
			switch {
			case t.files.ClientAuth:
				c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, pool
			case pool != nil:
				c.ClientAuth, c.ClientCAs = tls.VerifyClientCertIfGiven, pool
			}
			return c, nil
		},
	}
}

// ClientConfig is the configuration to dial addr: the server verified
// against the CA (or the system roots), under ServerName or addr's host,
// and this end's certificate presented when it has one.
func (t *TLS) ClientConfig(addr string) *tls.Config {
	cert, pool := t.current()
	name := t.files.ServerName
	if name == "" {
		name = addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			name = h
		}
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: name}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// CertRole is the role the verified client certificate of a finished
// server-side handshake grants, None when the client sent none.
func CertRole(cs tls.ConnectionState) Role {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return None
	}
	return RoleOfCert(cs.PeerCertificates[0])
}
