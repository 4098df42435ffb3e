package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
)

// dialPeer opens an authenticated link to the peer at addr: TCP, TLS when
// configured (the peer must present a node certificate), then the peer
// secret when there is one. The reader it returns is the link's.
func (n *Node) dialPeer(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error) {
	d := net.Dialer{Timeout: n.cfg.FailureTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	nc.SetDeadline(time.Now().Add(n.cfg.FailureTimeout))
	// certPeer: TLS verified the node at addr as a peer by its node
	// certificate, and this node's own certificate, presented in the
	// same handshake, proves this node to it the same way.
	certPeer := false
	if t := n.cfg.Security.TLS; t != nil {
		tc := tls.Client(nc, t.ClientConfig(addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			if ctx.Err() == nil && !isTimeout(err) {
				err = &peerAuthError{fmt.Errorf("TLS: %w", err)}
			}
			return nil, nil, err
		}
		if t.HasCA() {
			cs := tc.ConnectionState()
			certPeer = len(cs.PeerCertificates) > 0 && auth.RoleOfCert(cs.PeerCertificates[0]) == auth.Peer
		}
		nc = tc
	}
	r := bufio.NewReaderSize(nc, 64<<10)
	sec := n.cfg.Security.Secrets.Peer
	switch {
	case sec != nil:
		// Strict unless the certificates proved both ends already: a
		// node that grants the role without proving the secret is not
		// followed.
		if _, err := auth.Authenticate(nc, r, auth.Peer, sec, addr, !certPeer); err != nil {
			nc.Close()
			var re *auth.RefusedError
			if errors.As(err, &re) || errors.Is(err, auth.ErrOpen) || errors.Is(err, auth.ErrBadProof) {
				err = &peerAuthError{fmt.Errorf("peer secret: %w", err)}
			}
			return nil, nil, err
		}
	case n.gate.peerAuth && !certPeer:
		nc.Close()
		return nil, nil, &peerAuthError{fmt.Errorf("its certificate is not a node certificate (OU %s); make one with lockd tls cert --host, or set --peer-secret-file on every node", auth.OUPeer)}
	}
	nc.SetDeadline(time.Time{})
	return nc, r, nil
}

// peerAuthError is a peer link that failed past TCP: TLS or the peer
// secret. It is a configuration to fix, not a node that is down.
type peerAuthError struct{ err error }

func (e *peerAuthError) Error() string { return e.err.Error() }

func (e *peerAuthError) Unwrap() error { return e.err }

// isAuthErr reports whether a dial failed past TCP: in TLS or the peer
// secret, which is a configuration to fix rather than a node down.
func isAuthErr(err error) bool {
	var pe *peerAuthError
	return errors.As(err, &pe)
}
