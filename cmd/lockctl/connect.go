package main

// How lockctl reaches the cluster: the TLS and secret flags, the client
// every command dials, the status question of a survey, and --timeout.

import (
	"context"
	"errors"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
	"github.com/lockd-io/lockd/proto/client"
)

// loadSecurity reads the TLS and secret flags.
func (g *globals) loadSecurity(cCtx *cli.Context) error {
	cmd := cCtx.Command.Name
	files := auth.TLSFiles{
		CA:         lookupGlobal(cCtx, flagTLSCA, "", (*cli.Context).String),
		Cert:       lookupGlobal(cCtx, flagTLSCert, "", (*cli.Context).String),
		Key:        lookupGlobal(cCtx, flagTLSKey, "", (*cli.Context).String),
		ServerName: lookupGlobal(cCtx, flagTLSServerName, "", (*cli.Context).String),
	}
	useTLS := lookupGlobal(cCtx, flagTLS, false, (*cli.Context).Bool) || files.CA != "" || files.Cert != ""
	if !useTLS && files.ServerName != "" {
		return usageError(cmd, "--tls-server-name is for TLS: add --tls (system CAs) or --tls-ca FILE")
	}
	if useTLS {
		t, err := auth.LoadTLS(files, nil)
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		g.Security.TLS = t.ClientConfig("")
		g.Security.TLS.ServerName = files.ServerName
	}
	if path := lookupGlobal(cCtx, flagSecretFile, "", (*cli.Context).String); path != "" {
		secret, warning, err := auth.ReadSecretFile(flagSecretFile, path)
		if err != nil {
			return usageError(cmd, "%v", err)
		}
		if warning != "" {
			warn(g.Stderr, warning, "")
		}
		g.Security.Secret = secret
	}
	for _, f := range []struct{ flag, env string }{
		{flagTLSCA, "LOCKD_TLS_CA"}, {flagTLSCert, "LOCKD_TLS_CERT"}, {flagTLSKey, "LOCKD_TLS_KEY"},
		{flagTLSServerName, "LOCKD_TLS_SERVER_NAME"}, {flagSecretFile, "LOCKD_SECRET_FILE"},
	} {
		if v := lookupGlobal(cCtx, f.flag, "", (*cli.Context).String); v != "" {
			g.SecurityEnv = append(g.SecurityEnv, f.env+"="+v)
		}
	}
	if useTLS {
		g.SecurityEnv = append(g.SecurityEnv, "LOCKD_TLS=true")
	}
	return nil
}

// status asks the node at addr for its status, connecting as every other
// request does (TLS, secret). It waits --timeout for the answer, and no
// longer than --failure-timeout: a node silent that long is down to every
// lock command, and status says so as soon as they would. Without TLS, a
// question still unanswered after tlsProbeAfter also asks whether the
// node speaks TLS, and ends with a *speaksTLSError when it does.
func (g *globals) status(ctx context.Context, addr string) (proto.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, min(g.Timeout, g.FailureTimeout))
	defer cancel()
	if g.Security.TLS != nil {
		return client.StatusWith(ctx, addr, g.Security)
	}
	type answer struct {
		st  proto.Status
		err error
	}
	done := make(chan answer, 1)
	go func() {
		st, err := client.StatusWith(ctx, addr, g.Security)
		done <- answer{st, err}
	}()
	grace := time.NewTimer(tlsProbeAfter)
	defer grace.Stop()
	var a answer
	select {
	case a = <-done:
		if a.err == nil || !plainFailure(a.err) || ctx.Err() != nil {
			return a.st, a.err
		}
		// Closed at once: a TLS node refusing the secret's hello.
		pctx, pcancel := context.WithTimeout(ctx, tlsProbeWait)
		defer pcancel()
		if speaksTLS(pctx, addr) {
			return proto.Status{}, &speaksTLSError{addr}
		}
		return a.st, a.err
	case <-grace.C:
	}
	probe := make(chan bool, 1)
	go func() { probe <- speaksTLS(ctx, addr) }()
	select {
	case a = <-done:
		return a.st, a.err
	case tlsNode := <-probe:
		if !tlsNode {
			a = <-done
			return a.st, a.err
		}
		cancel()
		<-done
		return proto.Status{}, &speaksTLSError{addr}
	}
}

// timeoutOr is --timeout when it was given, else def: the default of a
// command whose whole wait --timeout bounds (handoff, status
// --wait-active).
func (g *globals) timeoutOr(def time.Duration) time.Duration {
	if g.TimeoutSet {
		return g.Timeout
	}
	return def
}

// withTimeout bounds a request by --timeout. The cause names the flag,
// so that the error says which limit ran out.
func (g *globals) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, g.Timeout, errRequestTimeout)
}

// errRequestTimeout is the cause of a context that --timeout ended.
var errRequestTimeout = errors.New("no answer within --timeout")

// client connects to the --addr nodes. The client dials in the background;
// unreachable nodes show up as client.ErrUnavailable on first use.
func (g *globals) client(opts client.Options) (*client.Client, error) {
	opts.TLS, opts.Secret = g.Security.TLS, g.Security.Secret
	opts.FailureTimeout = g.FailureTimeout
	opts.Name = g.Name
	if opts.ReleaseFor == 0 {
		opts.ReleaseFor = g.Timeout
	}
	if opts.Role == auth.None {
		opts.Role = auth.Client
	}
	c, err := client.New(g.Addrs, opts)
	if err != nil {
		return nil, usageError("", "cannot use --addr %s: %v", g.AddrList, err)
	}
	return c, nil
}

// lockClient is the client of the lock commands (acquire, release, renew,
// hold, exec, queues): one connection per node, also when --addr names
// only one. Each is a single caller (hold and exec renew every third of
// the lease; queues pipelines its Q requests on the one connection). The
// client library's second connection to a lone node is for a process
// that many goroutines share and that must not stall while one
// connection is re-dialled; here a call that finds its connection down
// re-dials it at once, and redirects, re-sends and failover across
// several nodes still work. A second dial, its status exchange and its
// goroutines would be start-up work every run pays for nothing.
func (g *globals) lockClient() (*client.Client, error) {
	return g.client(client.Options{ConnsPerAddr: 1})
}

// defaultName is who lockctl says it is when --name is not given:
// USER@HOST:PID, the host without its domain, so that a person reading
// queues can find the process (and the machine) that holds a key.
func defaultName() string {
	who := os.Getenv("USER")
	if who == "" {
		who = os.Getenv("LOGNAME")
	}
	if who == "" {
		if u, err := user.Current(); err == nil {
			who = u.Username
		} else {
			who = strconv.Itoa(os.Getuid())
		}
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	return who + "@" + host + ":" + strconv.Itoa(os.Getpid())
}
