package main

// A node set up with TLS or a secret that lockctl was not told about
// looks, from the plain side, like a node that is down or frozen: a TLS
// node waits for the fifth byte of a handshake record that "S -\n" never
// sends, and closes a connection whose first line is not one. Reported as
// "cannot reach lockd" or "did not answer", the user restarts a node that
// runs fine. lockctl asks the one question that tells them apart, on a
// connection of its own: does the node answer a TLS hello?

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
	"github.com/lockd-io/lockd/proto/client"
)

// tlsProbeAfter is how long a plain status question waits for its answer
// before lockctl also asks whether the node speaks TLS: a node answers S
// in well under a millisecond, so a healthy plain node is never probed,
// and a TLS node is told apart long before --failure-timeout.
const tlsProbeAfter = 150 * time.Millisecond

// tlsProbeWait bounds the question: a TLS node sends its ServerHello
// within a round trip, and a frozen node, which takes the connection and
// says nothing, must not make an error any later than this.
const tlsProbeWait = 300 * time.Millisecond

// speaksTLSError is a node that answered a TLS hello while lockctl spoke
// plain TCP to it.
type speaksTLSError struct{ addr string }

func (e *speaksTLSError) Error() string {
	return e.addr + " speaks TLS, and lockctl spoke plain TCP to it"
}

// speaksTLS reports whether the node at addr answers a TLS ClientHello
// with a TLS record (a ServerHello, or an alert), within ctx. The
// handshake is never finished: the node's certificate is not checked
// against anything, because nothing but the answer's first byte is used.
func speaksTLS(ctx context.Context, addr string) bool {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	host, _, _ := net.SplitHostPort(addr)
	fb := &firstByteConn{Conn: nc}
	tc := tls.Client(fb, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12})
	// The handshake fails (no CA to verify the node with) or is cut by
	// ctx; either way the first byte read says what spoke.
	_ = tc.HandshakeContext(ctx)
	b, ok := fb.first()
	// 0x16 starts a handshake record, 0x15 an alert; a lockd answer
	// starts with an upper-case letter.
	return ok && (b == 0x16 || b == 0x15)
}

// firstByteConn remembers the first byte read from its connection.
type firstByteConn struct {
	net.Conn
	mu   sync.Mutex
	b    byte
	have bool
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.have {
			c.b, c.have = p[0], true
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *firstByteConn) first() (byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b, c.have
}

// probeTLS returns the first address of addrs whose node speaks TLS,
// asking all at once for at most wait, or "".
func probeTLS(addrs []string, wait time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	found := make([]bool, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { found[i] = speaksTLS(ctx, a) })
	}
	wg.Wait()
	for i, ok := range found {
		if ok {
			return addrs[i]
		}
	}
	return ""
}

// plainFailure reports whether err, from a connection without TLS, may
// be a TLS node's doing: anything but a refusal in words, which only a
// plain node can send.
func plainFailure(err error) bool {
	var srv *client.ServerError
	var refused *auth.RefusedError
	return !errors.As(err, &srv) && !errors.As(err, &refused)
}

// needsTLS is the error of a node that speaks TLS to a lockctl that does
// not.
func needsTLS(addr string, err error) *exitError {
	return &exitError{
		code: exitFailed,
		what: fmt.Sprintf("lockd at %s speaks TLS, and lockctl spoke plain TCP to it", printable(addr)),
		try:  "pass --tls-ca FILE (or LOCKD_TLS_CA), the CA that signed the node's certificate (lockd-ca.pem from `lockd tls ca`), or --tls for a certificate of a public CA",
		err:  err,
	}
}

// authRequired is the error of a node that refused a request because the
// connection did not authenticate ("authenticate first: ..."), or nil when
// msg is another refusal.
func authRequired(addr, msg string, err error) *exitError {
	if !strings.HasPrefix(msg, "authenticate first") {
		return nil
	}
	if strings.Contains(msg, "client certificate") {
		return &exitError{code: exitFailed,
			what: fmt.Sprintf("lockd at %s requires a client certificate, and lockctl presented none", printable(addr)),
			try:  "pass --tls-cert FILE --tls-key FILE (or LOCKD_TLS_CERT, LOCKD_TLS_KEY), made by `lockd tls cert --role client`",
			err:  err}
	}
	return &exitError{code: exitFailed,
		what: fmt.Sprintf("lockd at %s requires a secret, and lockctl proved none", printable(addr)),
		try:  "pass --secret-file FILE (or LOCKD_SECRET_FILE), the file the node was started with",
		err:  err}
}
