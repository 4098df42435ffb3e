package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// gate is what a node decides about callers once, at start.
type gate struct {
	secrets auth.Secrets
	// open is the role every connection has without proving anything.
	open auth.Role
	// peerAuth: peers prove themselves (by secret or by certificate).
	peerAuth bool
	// certsOnly: clients prove themselves by certificate alone.
	certsOnly bool
	// names: the addresses a client's handshake may name besides the one
	// its connection arrived at (see reaches); hostname, this machine's.
	names    []string
	hostname string
	// resolved: what localhost and hostname resolved to at start, by
	// lower-case name; wildcard: the node listens on every address of
	// the machine, localIPs (loopback ones aside).
	resolved map[string][]netip.Addr
	wildcard bool
	localIPs []netip.Addr
}

// lookupNetIP resolves a host name; tests replace it to stand for the
// resolver of another machine.
var lookupNetIP = net.DefaultResolver.LookupNetIP

// resolveTimeout bounds how long a node's start waits to resolve its own
// names.
const resolveTimeout = time.Second

// newGate checks the security settings of a node listening on listen with
// peers other nodes.
func newGate(s Security, listen string, peers int) (gate, error) {
	g := gate{secrets: s.Secrets, names: slices.Clone(s.ClientAddrs)}
	if specificHost(listen) {
		g.names = append(g.names, listen)
	}
	g.hostname, _ = os.Hostname()
	g.resolveNames(listen)
	if err := checkSecrets(s.Secrets); err != nil {
		return g, err
	}
	for _, a := range s.ClientAddrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return g, fmt.Errorf("--advertise-client %q is not HOST:PORT: %v", a, err)
		}
	}
	if g.secrets.Admin == nil {
		g.secrets.Admin = g.secrets.Client
	}
	clientCerts := s.TLS != nil && s.TLS.Files().ClientAuth
	g.peerAuth = s.Secrets.Peer != nil || (s.TLS != nil && s.TLS.HasCA() && s.TLS.Files().Cert != "")
	authOn := s.Secrets.Client != nil || s.Secrets.Admin != nil || s.Secrets.Peer != nil || clientCerts
	if s.TLS != nil && s.TLS.Files().Cert == "" {
		return g, errors.New("TLS needs this node's certificate: give --tls-cert and --tls-key (make them with lockd tls cert --host HOST)")
	}
	if authOn && peers > 0 && !g.peerAuth {
		return g, errors.New("with authentication on, peers must prove they are peers: add --peer-secret-file FILE (the same file on every node), or TLS with --tls-ca and node certificates (lockd tls cert --host HOST)")
	}
	clientOpen := s.Secrets.Client == nil && !clientCerts
	g.certsOnly = clientCerts && s.Secrets.Client == nil
	switch {
	case !clientOpen:
		g.open = auth.None
	case s.Secrets.Admin != nil:
		g.open = auth.Client
	case g.peerAuth:
		g.open = auth.Admin
	default:
		g.open = auth.Peer
	}
	if clientOpen && !s.Insecure && !isLoopback(listen) {
		return g, fmt.Errorf("--listen %s is reachable from the network, and without authentication anyone who reaches it could take and release every lock: add --secret-file FILE (clients send it: lockctl --secret-file FILE), or --tls-client-auth with certificates from lockd tls; or pass --insecure to serve a network you trust without authentication", listen)
	}
	return g, nil
}

// checkSecrets refuses secrets too weak to prove anything, and two roles
// with one secret: it proves the higher role to everyone who holds it for
// the lower.
func checkSecrets(s auth.Secrets) error {
	for _, sec := range []struct {
		flag string
		b    []byte
	}{{"secret-file", s.Client}, {"admin-secret-file", s.Admin}, {"peer-secret-file", s.Peer}} {
		if sec.b == nil {
			continue
		}
		if err := auth.CheckSecret(sec.b); err != nil {
			return fmt.Errorf("--%s: %v", sec.flag, err)
		}
	}
	const fresh = "make it a secret of its own: head -c 32 /dev/urandom | base64 > FILE"
	switch {
	case s.Peer != nil && s.Client != nil && bytes.Equal(s.Peer, s.Client):
		return errors.New("--secret-file and --peer-secret-file hold the same secret, so every client could act as a node of the cluster (replicate, take the active role): " + fresh + " for --peer-secret-file, the same on every node")
	case s.Peer != nil && s.Admin != nil && bytes.Equal(s.Peer, s.Admin):
		return errors.New("--admin-secret-file and --peer-secret-file hold the same secret, so every admin could act as a node of the cluster: " + fresh + " for --peer-secret-file, the same on every node")
	case s.Admin != nil && s.Client != nil && bytes.Equal(s.Admin, s.Client):
		return errors.New("--secret-file and --admin-secret-file hold the same secret, so every client is an admin: " + fresh + " for --admin-secret-file, or leave --admin-secret-file out to let every client move the active role")
	}
	return nil
}

// specificHost reports whether addr names one host: not the wildcard of
// a listener (":7070", "0.0.0.0:7070"), which a client on another
// machine that dials it reaches its own machine with.
func specificHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.IsUnspecified()
}

// isLoopback reports whether a listen address only accepts connections
// from this machine.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refusal is the E words for a request that needs more than have.
func (g *gate) refusal(need, have auth.Role) string {
	switch {
	case have == auth.None:
		if g.certsOnly {
			return "authenticate first: this node requires a client certificate"
		}
		return "authenticate first: this node requires a secret"
	case need == auth.Admin:
		return "this needs the admin role: authenticate with the admin secret or an admin certificate"
	default:
		return "peer messages are for lockd nodes: authenticate as a peer (--peer-secret-file, or a node certificate)"
	}
}

// authStep serves an I request on c. A key that is no role may be a
// secret typed in the wrong place: it is neither logged nor echoed.
func (n *Node) authStep(c *conn, req *proto.Request) {
	key := req.Key
	if _, ok := auth.ParseRole(key); !ok {
		key = proto.WordNone
	}
	to := auth.Target{Self: n.self}
	if !c.tls {
		to.Reaches = func(addr string) bool { return n.gate.reaches(addr, c.nc.LocalAddr()) }
	}
	now := time.Now()
	var err error
	var reply []string
	role := c.role
	// A peer's handshake is never paused: see authBackoff.
	paused := key != auth.Peer.String()
	if wait := n.authFails.penalty(c.ip, key, now); paused && wait > 0 {
		err = fmt.Errorf("too many wrong secrets from this address: retry in %s", wait.Round(10*time.Millisecond))
	} else {
		reply, role, err = c.hs.Step(n.gate.secrets, n.gate.open, c.role, to, req.Key, req.Args)
		if paused && errors.Is(err, auth.ErrWrongSecret) {
			n.authFails.failed(c.ip, key, now)
		}
	}
	if err != nil {
		n.refusedLog.log(n.log, "refused authentication", "remote", c.remote, "role", key, "why", err.Error())
		c.send(func(b []byte) []byte {
			return proto.AppendError(b, key, proto.OpAuth, err.Error()+"; closing this connection")
		})
		c.flushAndClose()
		return
	}
	if role > c.role {
		n.log.Debug("authenticated", "remote", c.remote, "role", role.String())
	}
	c.role = role
	c.authed.Store(role >= auth.Client)
	if role >= auth.Client {
		n.forgetStrangerLocked(c)
	} else {
		n.engagedLocked(c)
	}
	c.send(func(b []byte) []byte { return proto.AppendFields(b, proto.OpAuth, key, reply...) })
}

// reaches reports whether addr, the address a client says it dialled,
// is this node's, for a connection that arrived at local: one of the
// node's names, or an address with local's port whose host is local's
// IP, or a name of this machine that leads there (localhost on
// loopback, its host name).
func (g *gate) reaches(addr string, local net.Addr) bool {
	for _, a := range g.names {
		if strings.EqualFold(addr, a) {
			return true
		}
	}
	host, port, err := net.SplitHostPort(addr)
	la, ok := local.(*net.TCPAddr)
	if err != nil || !ok || port != strconv.Itoa(la.Port) {
		return false
	}
	lip, ok := netip.AddrFromSlice(la.IP)
	if !ok {
		return false
	}
	lip = lip.Unmap().WithZone("")
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().WithZone("") == lip
	}
	if strings.EqualFold(host, "localhost") || g.hostname != "" && strings.EqualFold(host, g.hostname) {
		return g.nameLeadsHere(host, lip)
	}
	for _, a := range g.names {
		if h, _, err := net.SplitHostPort(a); err == nil && strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

// unechoed is pe as c is answered it: its key is not echoed where it
// may be a secret typed in the wrong place: the key of an I line that is
// no role ("I SECRET" alone), or any key on a connection that has not
// authenticated, whose lines may be a mistyped I ("i SECRET"). Nothing
// matches such an answer by its key.
func unechoed(c *conn, pe *proto.ParseError) *proto.ParseError {
	if pe.Key == proto.WordNone {
		return pe
	}
	if pe.Op == proto.OpAuth {
		if _, isRole := auth.ParseRole(pe.Key); isRole {
			return pe
		}
	} else if c.role != auth.None {
		return pe
	}
	masked := *pe
	masked.Key = proto.WordNone
	return &masked
}

// resolveNames resolves localhost and this machine's host name, for a
// node listening on listen, once at start: a hello is served under the
// node's mutex, which must not wait for a resolver.
func (g *gate) resolveNames(listen string) {
	g.wildcard = !specificHost(listen)
	if g.wildcard {
		if as, err := net.InterfaceAddrs(); err == nil {
			for _, a := range as {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					g.localIPs = append(g.localIPs, p.Addr().Unmap().WithZone(""))
				}
			}
		}
	}
	g.resolved = make(map[string][]netip.Addr)
	for _, name := range []string{"localhost", g.hostname} {
		if name == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		ips, err := lookupNetIP(ctx, "ip", name)
		cancel()
		if err != nil {
			continue
		}
		for i, ip := range ips {
			ips[i] = ip.Unmap().WithZone("")
		}
		g.resolved[strings.ToLower(name)] = ips
	}
}

// nameLeadsHere reports whether a client that dialled host, a name of
// this machine, reaches this node whichever of its addresses it dialled,
// one of them local, the address the connection arrived at. A name that
// also leads to an address this node does not listen on (localhost as
// ::1 too, for a node on 127.0.0.1 only) may have taken the client to a
// stranger listening there, who relayed its handshake here.
func (g *gate) nameLeadsHere(host string, local netip.Addr) bool {
	ips := g.resolved[strings.ToLower(host)]
	if !slices.Contains(ips, local) {
		return false
	}
	for _, ip := range ips {
		if ip == local {
			continue
		}
		if !g.wildcard || !ip.IsLoopback() && !slices.Contains(g.localIPs, ip) {
			return false
		}
	}
	return true
}
