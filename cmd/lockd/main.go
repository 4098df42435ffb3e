// Command lockd is the lock server: it hosts the engine and the cluster
// logic. Run with no flags it serves a single in-memory node on
// 127.0.0.1:7070. This file only wires flags and signals to package
// cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cluster"
	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/cluster/wal"
	"github.com/lockd-io/lockd/cmd/internal/complete"
	"github.com/lockd-io/lockd/cmd/internal/didyoumean"
	"github.com/lockd-io/lockd/cmd/internal/durflag"
	"github.com/lockd-io/lockd/cmd/internal/flagname"
	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/auth"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args, os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	app := newApp(stderr)
	if err := app.Run(args); err != nil {
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			if msg := err.Error(); msg != "" {
				fmt.Fprintln(stderr, "lockd:", msg)
			}
			return ec.ExitCode()
		}
		fmt.Fprintln(stderr, "lockd:", err)
		return 1
	}
	return 0
}

func newApp(stderr io.Writer) *cli.App {
	cli.VersionPrinter = func(c *cli.Context) { printVersion(c.App.Writer) }
	return &cli.App{
		Name:    "lockd",
		Usage:   "serve named locks over TCP: FIFO queues, leases, fencing tokens, active/standby failover",
		Version: buildVersion(),
		Description: `lockd hands out named locks over a plain TCP line protocol (see the proto
package docs, or try it with: nc 127.0.0.1 7070, then type "A deploy 30 10").

With no flags it runs a single in-memory node on 127.0.0.1:7070: a restart
loses every lock. With --data-dir DIR it keeps them in a write-ahead log in DIR
and answers a change only once it is there: a restart (kill -9, an upgrade, a
reboot) finds the holders with their tokens and leases, and a lease that ended
while it was down has ended. --fsync says what a power cut may lose:
   batch   (default) one fsync per batch of requests, and every answer waits
           for it: a power cut loses nothing a client was told
   always  one fsync per change: the same promise, slower; for comparison
   never   written before answering, never fsynced: a kill -9 loses nothing,
           a power cut the last seconds the kernel had not written

A cluster is several lockd processes given the same --peers list, in priority
order: the first live node is active, the others are standbys replicating its
state and redirecting clients to it. Ctrl+C (SIGINT) or SIGTERM on the active
hands the role to the next node before exiting.

Examples:
   lockd
   lockd --listen 127.0.0.1:7171
   lockd --data-dir /var/lib/lockd
   lockd --listen 10.0.0.1:7070 --peers 10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070

Beyond loopback, clients must prove who they are: start with --secret-file
(and --admin-secret-file, --peer-secret-file) or TLS client certificates
(--tls-client-auth), or say --insecure for a network you trust. lockd tls ca
and lockd tls cert make the certificates. See the README's Security section.

A secret file holds at least ` + strconv.Itoa(auth.MinSecretLen) + ` bytes of printable ASCII with at least ` + strconv.Itoa(auth.MinSecretChars) + `
different characters (make one with: head -c 32 /dev/urandom | base64 > FILE),
can be read by its owner only (chmod 600), and differs from the other roles'
secrets; lockd refuses to start otherwise, and on a TLS key every user can read.

Every flag has a LOCKD_* environment twin (shown in brackets).

Exit codes: 0 stopped cleanly; 1 could not start (bad flag value, port busy); 2 usage error.`,
		HideHelpCommand: true,
		// run maps errors to exit codes itself; urfave/cli must not exit.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit(flagUsage(err, c.App.Flags)+"; see `lockd --help`", 2)
		},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: cluster.DefaultListen, EnvVars: []string{"LOCKD_LISTEN"}, Usage: "`HOST:PORT` to serve clients and peers on; a bare PORT means 127.0.0.1:PORT, :PORT every interface"},
			&cli.StringFlag{Name: "peers", EnvVars: []string{"LOCKD_PEERS"}, Usage: "every node of the cluster as `ADDR,ADDR,...` in priority order (first = preferred active); empty for a single node"},
			&cli.StringFlag{Name: "advertise", EnvVars: []string{"LOCKD_ADVERTISE"}, Usage: "this node's `ADDR` as written in --peers, when it differs from --listen (e.g. --listen 0.0.0.0:7070)"},
			durflag.New(cli.DurationFlag{Name: "heartbeat", Value: cluster.DefaultHeartbeat, EnvVars: []string{"LOCKD_HEARTBEAT"}, Usage: "`DURATION` between heartbeats to each peer"}),
			durflag.New(cli.DurationFlag{Name: "failure-timeout", Value: cluster.DefaultFailureTimeout, EnvVars: []string{"LOCKD_FAILURE_TIMEOUT"}, Usage: "a peer silent this `DURATION` is considered down (at least 2x --heartbeat)"}),
			&cli.StringFlag{Name: "data-dir", EnvVars: []string{"LOCKD_DATA_DIR"}, Usage: "keep the lock state across restarts in a write-ahead log in `DIR` (created 0700; one lockd per directory); default: memory only"},
			&cli.BoolFlag{Name: "drop-after-corruption", EnvVars: []string{"LOCKD_DROP_AFTER_CORRUPTION"}, Usage: "with --data-dir: where the log holds a damaged record that valid records follow (lockd refuses to start, naming the file and offset), start from the last good record and drop every record after it; the locks they granted are forgotten"},
			&cli.StringFlag{Name: "fsync", Value: "batch", EnvVars: []string{"LOCKD_FSYNC"}, Usage: "`MODE` with --data-dir: batch (one fsync per batch, answers wait for it), always (one per change), never (no fsync: a power cut may lose the last seconds)"},
			&cli.StringFlag{Name: "replication", Value: "sync", EnvVars: []string{"LOCKD_REPLICATION"}, Usage: "`MODE` sync: the active answers a grant, release or renewal once the standbys in sync applied it, so a crash loses nothing a client was told; async: it answers at once, a little faster, and a crash may lose the last answers"},
			durflag.New(cli.DurationFlag{Name: "sync-timeout", EnvVars: []string{"LOCKD_SYNC_TIMEOUT"}, DefaultText: "half --failure-timeout", Usage: "in sync mode, a standby that has not acknowledged an answer within this `DURATION` stops being waited for (the node says degraded when none is left)"}),
			&cli.IntFlag{Name: "max-keys", Value: engine.DefaultConfig.MaxKeys, EnvVars: []string{"LOCKD_MAX_KEYS"}, Usage: "most keys held or waited on at once, a number `N`"},
			&cli.IntFlag{Name: "max-waiters", Value: engine.DefaultConfig.MaxWaitersPerKey, EnvVars: []string{"LOCKD_MAX_WAITERS"}, Usage: "most clients queued on one key, a number `N`"},
			durflag.New(cli.DurationFlag{Name: "max-lease", Value: engine.DefaultConfig.MaxLease, EnvVars: []string{"LOCKD_MAX_LEASE"}, Usage: "longest lease a client may ask for, a `DURATION`"}),
			durflag.New(cli.DurationFlag{Name: "max-wait", Value: engine.DefaultConfig.MaxWait, EnvVars: []string{"LOCKD_MAX_WAIT"}, Usage: "longest finite wait a client may ask for, a `DURATION` (wait 0 = forever is always allowed)"}),
			&cli.IntFlag{Name: "max-total-waiters", Value: engine.DefaultConfig.MaxWaiters, EnvVars: []string{"LOCKD_MAX_TOTAL_WAITERS"}, Usage: "most clients queued over all keys together, a number `N`"},
			&cli.IntFlag{Name: "max-watches", Value: core.DefaultMaxWatches, EnvVars: []string{"LOCKD_MAX_WATCHES"}, Usage: "most keys one connection may watch (L), a number `N`"},
			&cli.IntFlag{Name: "max-total-watches", Value: core.DefaultMaxTotalWatches, EnvVars: []string{"LOCKD_MAX_TOTAL_WATCHES"}, Usage: "most watches over all connections together, a number `N`"},
			durflag.New(cli.DurationFlag{Name: "max-clock-skew", Value: engine.DefaultConfig.MaxEpochAhead, EnvVars: []string{"LOCKD_MAX_CLOCK_SKEW"}, Usage: "largest clock difference between the cluster's machines, a `DURATION`; a token from further ahead is ignored and logged"}),

			&cli.StringFlag{Name: "tls-cert", Category: catSecurity, EnvVars: []string{"LOCKD_TLS_CERT"}, Usage: "serve TLS with this node's certificate `FILE` (make one with lockd tls cert --host HOST); peers are dialled with TLS too"},
			&cli.StringFlag{Name: "tls-key", Category: catSecurity, EnvVars: []string{"LOCKD_TLS_KEY"}, Usage: "private key `FILE` of --tls-cert"},
			&cli.StringFlag{Name: "tls-ca", Category: catSecurity, EnvVars: []string{"LOCKD_TLS_CA"}, Usage: "CA `FILE` that signs the peers' certificates (and the clients', with --tls-client-auth); a peer proves itself with its node certificate"},
			&cli.BoolFlag{Name: "tls-client-auth", Category: catSecurity, EnvVars: []string{"LOCKD_TLS_CLIENT_AUTH"}, Usage: "require every client to present a certificate signed by --tls-ca (lockd tls cert --role client|admin)"},
			&cli.StringFlag{Name: "secret-file", Category: catSecurity, EnvVars: []string{"LOCKD_SECRET_FILE"}, Usage: "clients must prove the secret in `FILE` (lockctl --secret-file FILE) before any request"},
			&cli.StringFlag{Name: "admin-secret-file", Category: catSecurity, EnvVars: []string{"LOCKD_ADMIN_SECRET_FILE"}, Usage: "only the secret in `FILE` may move the active role (lockctl handoff); without it, every client may"},
			&cli.StringFlag{Name: "peer-secret-file", Category: catSecurity, EnvVars: []string{"LOCKD_PEER_SECRET_FILE"}, Usage: "nodes prove to each other the secret in `FILE` (the same file on every node), unless their TLS certificates do"},
			&cli.StringFlag{Name: "advertise-client", Category: catSecurity, EnvVars: []string{"LOCKD_ADVERTISE_CLIENT"}, Usage: "other `ADDR,ADDR,...` clients dial to reach this node without TLS (a DNS name, a NAT or load balancer address): a client's handshake names the address it dialled, and one naming an address that is not this node's (--listen, --advertise, an address of this machine at this port) is refused, so that it cannot be relayed"},
			&cli.BoolFlag{Name: "insecure", Category: catSecurity, EnvVars: []string{"LOCKD_INSECURE"}, Usage: "serve clients without authentication on an address other than loopback (a network you trust)"},

			&cli.IntFlag{Name: "max-conns", Category: catLimits, Value: cluster.DefaultLimits.MaxConns, EnvVars: []string{"LOCKD_MAX_CONNS"}, Usage: "most connections open at once, a number `N`; more are refused"},
			&cli.IntFlag{Name: "max-conns-per-ip", Category: catLimits, Value: cluster.DefaultLimits.MaxConnsPerIP, EnvVars: []string{"LOCKD_MAX_CONNS_PER_IP"}, Usage: "most connections from one IP address, a number `N` (0: no cap); more are refused, so one machine cannot take every connection"},
			durflag.New(cli.DurationFlag{Name: "auth-timeout", Category: catLimits, Value: cluster.DefaultLimits.AuthTimeout, EnvVars: []string{"LOCKD_AUTH_TIMEOUT"}, Usage: "a connection that has not authenticated (or finished TLS) within this `DURATION` is closed"}),
			durflag.New(cli.DurationFlag{Name: "line-timeout", Category: catLimits, Value: cluster.DefaultLimits.LineTimeout, EnvVars: []string{"LOCKD_LINE_TIMEOUT"}, Usage: "a request line that has begun must end within this `DURATION`, or the connection is closed"}),
			&cli.StringFlag{Name: "max-conn-output", Category: catLimits, Value: "8MiB", EnvVars: []string{"LOCKD_MAX_CONN_OUTPUT"}, Usage: "`SIZE` of answers one client may leave unread before it is disconnected"},
			&cli.StringFlag{Name: "max-output", Category: catLimits, Value: "512MiB", EnvVars: []string{"LOCKD_MAX_OUTPUT"}, Usage: "`SIZE` of unread answers of all clients together; past it, a client with more than 64KiB of them unread is disconnected"},

			&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"LOCKD_LOG_LEVEL"}, Usage: "`LEVEL` of logs on stderr: debug, info, warn, error"},
			&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"LOCKD_LOG_FORMAT"}, Usage: "`FORMAT` of logs: text or json"},
			metricsFlag(),
		},
		Commands: []*cli.Command{tlsCommand(), completionCommand(), versionCommand()},
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				arg := c.Args().First()
				var names []string
				for _, cmd := range c.App.Commands {
					names = append(names, cmd.Name)
				}
				if s := didyoumean.Suggest(arg, names); s != "" {
					return cli.Exit(fmt.Sprintf("unexpected argument %q: lockd takes flags, and the commands tls, completion and version; did you mean %q?; see `lockd --help`", arg, s), 2)
				}
				return cli.Exit(fmt.Sprintf("unexpected argument %q: lockd takes flags, and the commands tls, completion and version; see `lockd --help`", arg), 2)
			}
			logger, err := newLogger(stderr, c.String("log-level"), c.String("log-format"))
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			var peers []string
			if p := strings.TrimSpace(c.String("peers")); p != "" {
				for _, a := range strings.Split(p, ",") {
					peers = append(peers, strings.TrimSpace(a))
				}
			}
			for _, name := range []string{"max-keys", "max-waiters", "max-total-waiters", "max-conns", "max-watches", "max-total-watches"} {
				if c.Int(name) <= 0 {
					return cli.Exit(fmt.Sprintf("--%s %d: must be at least 1", name, c.Int(name)), 2)
				}
			}
			if c.Int("max-conns-per-ip") < 0 {
				return cli.Exit(fmt.Sprintf("--max-conns-per-ip %d: must be 0 (no cap) or more", c.Int("max-conns-per-ip")), 2)
			}
			for _, name := range []string{"max-lease", "max-wait", "heartbeat", "failure-timeout", "max-clock-skew", "auth-timeout", "line-timeout"} {
				if d := c.Duration(name); d <= 0 || d > proto.MaxSeconds*time.Second {
					return cli.Exit(fmt.Sprintf("--%s %s: must be more than 0 and at most 10 years (%s)", name, d, proto.MaxSeconds*time.Second), 2)
				}
			}
			var async bool
			switch c.String("replication") {
			case "sync":
			case "async":
				async = true
			default:
				return cli.Exit(fmt.Sprintf("--replication %q: must be sync or async", c.String("replication")), 2)
			}
			fsync, err := wal.ParseMode(c.String("fsync"))
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			if c.IsSet("fsync") && c.String("data-dir") == "" {
				return cli.Exit("--fsync needs --data-dir: without one nothing is written to disk", 2)
			}
			if c.Bool("drop-after-corruption") && c.String("data-dir") == "" {
				return cli.Exit("--drop-after-corruption needs --data-dir: without one there is no log to read back", 2)
			}
			if d := c.Duration("sync-timeout"); d < 0 || c.IsSet("sync-timeout") && d == 0 {
				return cli.Exit(fmt.Sprintf("--sync-timeout %s: must be more than 0 (and below --failure-timeout)", d), 2)
			}
			perIP := c.Int("max-conns-per-ip")
			if perIP == 0 {
				perIP = -1 // no cap; the zero Limits field means the default
			}
			limits := cluster.Limits{
				MaxConns:      c.Int("max-conns"),
				MaxConnsPerIP: perIP,
				AuthTimeout:   c.Duration("auth-timeout"),
				LineTimeout:   c.Duration("line-timeout"),
			}
			for _, f := range []struct {
				name string
				dst  func(int64)
			}{
				{"max-conn-output", func(v int64) { limits.MaxConnOutput = int(v) }},
				{"max-output", func(v int64) { limits.MaxOutput = v }},
			} {
				v, err := parseSize(c.String(f.name))
				if err != nil {
					return cli.Exit(fmt.Sprintf("--%s %q: %v", f.name, c.String(f.name), err), 2)
				}
				f.dst(v)
			}
			sec, err := loadSecurity(c, logger)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			listen := listenAddr(c.String("listen"))
			if w := clearTextWarning(listen, sec); w != "" {
				logger.Warn(w, "listen", listen)
			}
			logger = slog.New(servingHandler{logger.Handler(), securityAttrs(sec)})
			node, err := cluster.New(cluster.Config{
				Listen:          listen,
				Advertise:       c.String("advertise"),
				Peers:           peers,
				Heartbeat:       c.Duration("heartbeat"),
				FailureTimeout:  c.Duration("failure-timeout"),
				Async:           async,
				SyncTimeout:     c.Duration("sync-timeout"),
				MaxWatches:      c.Int("max-watches"),
				MaxTotalWatches: c.Int("max-total-watches"),
				Engine: engine.Config{
					MaxKeys:          c.Int("max-keys"),
					MaxWaitersPerKey: c.Int("max-waiters"),
					MaxWaiters:       c.Int("max-total-waiters"),
					MaxLease:         c.Duration("max-lease"),
					MaxWait:          c.Duration("max-wait"),
					MaxEpochAhead:    c.Duration("max-clock-skew"),
				},
				DataDir:     c.String("data-dir"),
				DropCorrupt: c.Bool("drop-after-corruption"),
				Fsync:       fsync,
				Security:    sec,
				Limits:      limits,
				Logger:      logger,
			})
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			// Signals are caught before the port opens: a SIGINT sent as
			// soon as the node accepts connections is a graceful shutdown,
			// not the default action's exit.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := node.Listen(); err != nil {
				return cli.Exit(err.Error(), 1)
			}
			stopMetrics, err := startMetrics(c, node, logger)
			if err != nil {
				return err
			}
			defer stopMetrics()
			if sec.TLS != nil {
				reloadOnHUP(ctx, sec.TLS, logger)
			}
			go func() {
				<-ctx.Done()
				// A second signal while the handoff runs means: stop now.
				again := make(chan os.Signal, 1)
				signal.Notify(again, os.Interrupt, syscall.SIGTERM)
				<-again
				logger.Warn("second signal: exiting without waiting")
				os.Exit(1)
			}()
			if err := node.Run(ctx); err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return nil
		},
	}
}

// Categories of lockd's flags in --help.
const (
	catSecurity = "SECURITY (see the README's Security section)"
	catLimits   = "LIMITS (what one client, or all together, can make a node hold)"
)

// loadSecurity reads the TLS files and secrets the flags name.
func loadSecurity(c *cli.Context, logger *slog.Logger) (cluster.Security, error) {
	sec := cluster.Security{Insecure: c.Bool("insecure")}
	if v := strings.TrimSpace(c.String("advertise-client")); v != "" {
		for _, a := range strings.Split(v, ",") {
			sec.ClientAddrs = append(sec.ClientAddrs, strings.TrimSpace(a))
		}
	}
	files := auth.TLSFiles{
		Cert:       c.String("tls-cert"),
		Key:        c.String("tls-key"),
		CA:         c.String("tls-ca"),
		ClientAuth: c.Bool("tls-client-auth"),
	}
	if files.Cert != "" || files.Key != "" || files.CA != "" || files.ClientAuth {
		t, err := auth.LoadTLS(files, logger)
		if err != nil {
			return sec, err
		}
		if why := auth.ExposedKey("tls-key", files.Key); why != "" {
			return sec, errors.New(why + " (or 640 with a group only lockd is in), then start lockd again")
		}
		sec.TLS = t
	}
	for _, f := range []struct {
		flag string
		dst  *[]byte
	}{
		{"secret-file", &sec.Secrets.Client},
		{"admin-secret-file", &sec.Secrets.Admin},
		{"peer-secret-file", &sec.Secrets.Peer},
	} {
		path := c.String(f.flag)
		if path == "" {
			continue
		}
		secret, warning, err := auth.ReadSecretFile(f.flag, path)
		if err != nil {
			return sec, err
		}
		if warning != "" {
			// Anyone who can read it is every role it proves.
			return sec, errors.New(warning + ", then start lockd again")
		}
		*f.dst = secret
	}
	return sec, nil
}

// reloadOnHUP rereads the TLS files on every SIGHUP until ctx ends (they
// are also reread when they change, within a second of the next
// connection).
func reloadOnHUP(ctx context.Context, t *auth.TLS, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := t.Reload(); err != nil {
					logger.Warn("SIGHUP: TLS files not reloaded", "err", err.Error())
				}
			}
		}
	}()
}

// parseSize reads a size like 8MiB, 512MiB, 1GiB, 64KiB or a number of bytes.
func parseSize(s string) (int64, error) {
	num := strings.TrimRight(s, "KMGiB")
	unit := s[len(num):]
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v <= 0 {
		return 0, errors.New("want a size like 64KiB, 8MiB or 1GiB")
	}
	mult := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
	if mult == 0 {
		return 0, errors.New("want a size like 64KiB, 8MiB or 1GiB (units B, KiB, MiB, GiB)")
	}
	if v > (1<<50)/mult {
		return 0, errors.New("too large")
	}
	return v * mult, nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
			a.Value = slog.StringValue(a.Value.Time().Format(time.RFC3339Nano))
		}
		return a
	}}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// completionCommand prints a completion script generated from lockd's own
// flag definitions, so it cannot drift from them.
func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "Examples:\n" +
			"   source <(lockd completion bash)\n" +
			"   lockd completion zsh > ~/.zfunc/_lockd\n" +
			"   lockd completion fish > ~/.config/fish/completions/lockd.fish",
		Action: func(c *cli.Context) error {
			shells := strings.Join(complete.Shells(), ", ")
			if c.NArg() != 1 {
				return cli.Exit("name one shell: "+shells+" (see lockd completion --help)", 2)
			}
			if err := writeCompletion(c.App.Writer, c.Args().First()); err != nil {
				return cli.Exit(err.Error()+"; want one of "+shells, 2)
			}
			return nil
		},
	}
}

// writeCompletion generates from a fresh app, so every run agrees byte for
// byte with the committed completions/ files.
func writeCompletion(w io.Writer, shell string) error {
	return complete.Generate(w, shell, newApp(io.Discard), "lockd",
		complete.FlagValues("log-level", "debug", "info", "warn", "error"),
		complete.FlagValues("log-format", "text", "json"),
		complete.FlagValues("role", "node", "admin", "client"),
		complete.ArgValues("completion", complete.Shells()...))
}

// flagUsage says what was wrong with the flags in lockctl's words: an
// unknown flag with the nearest known one, a flag without its value, a
// value that is not one (with what is wanted).
func flagUsage(err error, flags []cli.Flag) string {
	msg := err.Error()
	if flag, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		flag = strings.TrimPrefix(flag, "-")
		var known []string
		for _, f := range flags {
			known = append(known, f.Names()...)
		}
		if s := didyoumean.Suggest(flag, known); s != "" && len(flag) > 1 {
			return fmt.Sprintf("unknown flag %s; did you mean --%s?", flagname.Dashed(flag), s)
		}
		return "unknown flag " + flagname.Dashed(flag)
	}
	if flag, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return flagname.Dashed(strings.TrimPrefix(flag, "-")) + " needs a value"
	}
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		// invalid value "banana" for flag -heartbeat: parse error
		if value, tail, ok := strings.Cut(rest, " for flag -"); ok {
			flag, _, _ := strings.Cut(tail, ":")
			want := "not a valid value"
			for _, f := range flags {
				for _, n := range f.Names() {
					if n != flag {
						continue
					}
					switch f.(type) {
					case *cli.DurationFlag:
						want = "want a duration like 500ms, 30s, 2m or 1h30m"
					case *durflag.Flag:
						want = durflag.ErrSyntax.Error()
					case *cli.IntFlag:
						want = "want a whole number"
					case *cli.BoolFlag:
						want = "want true or false"
					}
				}
			}
			return fmt.Sprintf("%s %s: %s", flagname.Dashed(flag), value, want)
		}
	}
	return msg
}

// listenAddr reads --listen: HOST:PORT as given, or a bare PORT, which
// means loopback: a port typed without a host must not open the node to
// the network. :PORT keeps what it means to Go, etcd and Redis, every
// interface (which protected mode refuses without client
// authentication), so an existing configuration that uses it keeps
// listening where it does. Anything else goes on as given, for the node
// to refuse in its words.
func listenAddr(s string) string {
	s = strings.TrimSpace(s)
	if _, err := strconv.ParseUint(s, 10, 16); err != nil {
		return s
	}
	return net.JoinHostPort("127.0.0.1", s)
}
