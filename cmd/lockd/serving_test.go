package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/lockd-io/lockd/cluster"
	"github.com/lockd-io/lockd/proto/auth"
)

// A node reachable from the network with secrets but no TLS warns that
// its traffic crosses in clear; on loopback, with TLS, or without
// secrets (refused, or --insecure on a trusted network) it does not.
func TestClearTextWarning(t *testing.T) {
	secret := cluster.Security{Secrets: auth.Secrets{Client: []byte("client-secret-0123456789")}}
	peerOnly := cluster.Security{Secrets: auth.Secrets{Peer: []byte("peer-secret-0123456789")}}
	withTLS := secret
	withTLS.TLS = new(auth.TLS)
	for _, tc := range []struct {
		listen string
		sec    cluster.Security
		warn   bool
	}{
		{"0.0.0.0:7070", secret, true},
		{":7070", secret, true},
		{"10.0.0.1:7070", secret, true},
		{"[::]:7070", peerOnly, true},
		{"lockd.example.com:7070", secret, true},
		{"127.0.0.1:7070", secret, false},
		{"[::1]:7070", secret, false},
		{"localhost:7070", secret, false},
		{"10.0.0.1:7070", withTLS, false},
		{"10.0.0.1:7070", cluster.Security{Insecure: true}, false},
	} {
		w := clearTextWarning(tc.listen, tc.sec)
		if (w != "") != tc.warn {
			t.Errorf("--listen %s: warning %q, want one: %v", tc.listen, w, tc.warn)
		}
		if w != "" && !strings.Contains(w, "add --tls-cert and --tls-key") {
			t.Errorf("the warning does not say what to do: %q", w)
		}
	}
}

// The serving line, and only it, carries tls= and auth=, through the
// loggers the node derives with With.
func TestServingLineSaysTLSAndAuth(t *testing.T) {
	var b bytes.Buffer
	logger := slog.New(servingHandler{slog.NewTextHandler(&b, nil), securityAttrs(cluster.Security{Secrets: auth.Secrets{Client: []byte("x")}})})
	logger.With("self", "127.0.0.1:7070").Info(servingMessage, "role", "active")
	logger.Info("another line")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], `msg="lockd serving" self=127.0.0.1:7070 role=active tls=off auth=secret`) ||
		strings.Contains(lines[1], "tls=") {
		t.Errorf("log:\n%s", b.String())
	}
}
