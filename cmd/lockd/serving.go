package main

import (
	"context"
	"log/slog"
	"net"
	"strings"

	"github.com/lockd-io/lockd/cluster"
)

// servingMessage is the message of the line the node logs once it serves
// (package cluster writes it).
const servingMessage = "lockd serving"

// securityAttrs say what protects the clients' connections: tls on or
// off, and how a client proves who it is (auth: secret, cert, both, or
// off). They join the serving line, so that an operator who reads where
// the node listens reads at once whether anyone there could take a lock.
func securityAttrs(sec cluster.Security) []slog.Attr {
	tls := "off"
	if sec.TLS != nil {
		tls = "on"
	}
	var proofs []string
	if sec.Secrets.Client != nil {
		proofs = append(proofs, "secret")
	}
	if sec.TLS != nil && sec.TLS.Files().ClientAuth {
		proofs = append(proofs, "cert")
	}
	authn := "off"
	if len(proofs) > 0 {
		authn = strings.Join(proofs, "+")
	}
	return []slog.Attr{slog.String("tls", tls), slog.String("auth", authn)}
}

// clearTextWarning is what to say when the node listens beyond loopback
// with secrets but without TLS, or "" when there is nothing to say. A
// secret proves who connects and never crosses the wire, but without TLS
// every request and answer does, keys and tokens in clear, and whoever
// sits on the path can take over a connection once it has proven itself.
func clearTextWarning(listen string, sec cluster.Security) string {
	secrets := sec.Secrets.Client != nil || sec.Secrets.Admin != nil || sec.Secrets.Peer != nil
	if sec.TLS != nil || !secrets || loopbackOnly(listen) {
		return ""
	}
	return "serving beyond loopback with secrets but without TLS: the secrets never cross the network, " +
		"but every request and answer does in clear (keys, tokens), and a connection can be taken over once it has proven itself; " +
		"add --tls-cert and --tls-key (lockd tls ca, then lockd tls cert --host HOST), or listen on loopback"
}

// loopbackOnly reports whether listen (HOST:PORT) is reachable from this
// machine only: a loopback address or localhost. A wildcard (":7070",
// "0.0.0.0:7070") or a name is every interface, or may be.
func loopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// servingHandler adds attrs to the serving line and passes every record
// on to the handler it wraps.
type servingHandler struct {
	slog.Handler
	attrs []slog.Attr
}

func (h servingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == servingMessage {
		r = r.Clone()
		r.AddAttrs(h.attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h servingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return servingHandler{h.Handler.WithAttrs(attrs), h.attrs}
}

func (h servingHandler) WithGroup(name string) slog.Handler {
	return servingHandler{h.Handler.WithGroup(name), h.attrs}
}
