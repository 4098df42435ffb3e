package main

// The global flags every command takes, and the settings they make.

import (
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/durflag"
	"github.com/lockd-io/lockd/proto/client"
)

// Global flags. They are declared on the app (with their environment twin
// and default) and again on every command, so that `lockctl acquire --json`
// works as well as `lockctl --json acquire`; a value given after the
// command wins.
const (
	flagAddr          = "addr"
	flagJSON          = "json"
	flagOutput        = "output"
	flagNoHeaders     = "no-headers"
	flagColor         = "color"
	flagTLS           = "tls"
	flagTLSCA         = "tls-ca"
	flagTLSCert       = "tls-cert"
	flagTLSKey        = "tls-key"
	flagTLSServerName = "tls-server-name"
	flagSecretFile    = "secret-file"
	flagTimeout       = "timeout"
	flagFailTimeout   = "failure-timeout"
	flagName          = "name"
)

// Defaults of the time limits every command shares.
const (
	// defaultTimeout bounds the wait for a node's answer to one request.
	// A node answers in well under a millisecond when idle and within
	// tens of milliseconds under heavy load (see the client's package
	// comment); 5 s leaves room for a slow network without letting a
	// script hang.
	defaultTimeout = 5 * time.Second
	// defaultFailureTimeout is lockd's own default --failure-timeout.
	defaultFailureTimeout = time.Second
)

const globalCategory = "GLOBAL (also accepted before the command)"

func globalFlags(app bool) []cli.Flag {
	addr := &cli.StringFlag{
		Name:  flagAddr,
		Usage: "lockd `NODES` to talk to: HOST:PORT, or several separated by commas; a bare PORT means 127.0.0.1:PORT, as lockd --listen takes it",
	}
	jsonOut := &cli.BoolFlag{
		Name:  flagJSON,
		Usage: "print machine-readable JSON, one object per line (the same as -o json)",
	}
	output := &cli.StringFlag{
		Name:    flagOutput,
		Aliases: []string{"o"},
		Usage: "`FORMAT` of what commands print: text (plain columns, for grep and awk), table (for a person, " +
			"cut to the terminal's width), wide (every column, nothing cut) or json; default table on a terminal, text otherwise",
	}
	noHeaders := &cli.BoolFlag{
		Name:  flagNoHeaders,
		Usage: "leave out the header line of status and queues",
	}
	color := &cli.StringFlag{
		Name:  flagColor,
		Usage: "`WHEN` to colour output: auto (on a terminal, unless NO_COLOR is set), always or never",
	}
	useTLS := &cli.BoolFlag{
		Name:  flagTLS,
		Usage: "speak TLS, verifying lockd's certificate with the system's CAs (--tls-ca implies --tls)",
	}
	tlsCA := &cli.StringFlag{
		Name:  flagTLSCA,
		Usage: "speak TLS, verifying lockd's certificate with the CA in `FILE` (lockd-ca.pem from lockd tls ca)",
	}
	tlsCert := &cli.StringFlag{
		Name:  flagTLSCert,
		Usage: "client certificate `FILE` to present, for nodes started with --tls-client-auth",
	}
	tlsKey := &cli.StringFlag{
		Name:  flagTLSKey,
		Usage: "private key `FILE` of --tls-cert",
	}
	tlsName := &cli.StringFlag{
		Name:  flagTLSServerName,
		Usage: "`NAME` to verify in lockd's certificate, when it differs from the host in --addr",
	}
	secret := &cli.StringFlag{
		Name:  flagSecretFile,
		Usage: "prove the secret in `FILE` to lockd (its --secret-file, or --admin-secret-file for handoff); the secret never crosses the network",
	}
	timeout := durflag.New(cli.DurationFlag{
		Name: flagTimeout,
		Usage: "longest to wait for lockd's answer to a request, a `DURATION` (not the wait for a lock: that is --wait); " +
			"for handoff and status --wait-active, the whole wait (default 10s there)",
	})
	failTimeout := durflag.New(cli.DurationFlag{
		Name: flagFailTimeout,
		Usage: "a node silent this long (a frozen or vanished machine) is treated as down and requests move on, " +
			"a `DURATION`; give lockd's --failure-timeout",
	})
	name := &cli.StringFlag{
		Name: flagName,
		Usage: "who is asking: a `NAME` that leads the id of every acquire, so that lockctl queues shows who holds and who waits; " +
			"up to " + strconv.Itoa(client.MaxNameLen) + " bytes are kept, spaces and control characters become _",
	}
	flags := []cli.Flag{addr, output, jsonOut, noHeaders, color, timeout, failTimeout, name, useTLS, tlsCA, tlsCert, tlsKey, tlsName, secret}
	if app {
		addr.Value = defaultAddr
		addr.EnvVars = []string{"LOCKD_ADDR"}
		color.Value = "auto"
		timeout.Value = defaultTimeout
		timeout.EnvVars = []string{"LOCKD_TIMEOUT"}
		failTimeout.Value = defaultFailureTimeout
		failTimeout.EnvVars = []string{"LOCKD_FAILURE_TIMEOUT"}
		name.EnvVars = []string{"LOCKD_NAME"}
		name.DefaultText = "USER@HOST:PID"
		useTLS.EnvVars = []string{"LOCKD_TLS"}
		tlsCA.EnvVars = []string{"LOCKD_TLS_CA"}
		tlsCert.EnvVars = []string{"LOCKD_TLS_CERT"}
		tlsKey.EnvVars = []string{"LOCKD_TLS_KEY"}
		tlsName.EnvVars = []string{"LOCKD_TLS_SERVER_NAME"}
		secret.EnvVars = []string{"LOCKD_SECRET_FILE"}
	} else {
		addr.Usage += " (default 127.0.0.1:7070, or $LOCKD_ADDR)"
		timeout.DefaultText = "5s, or $LOCKD_TIMEOUT"
		failTimeout.DefaultText = "1s, or $LOCKD_FAILURE_TIMEOUT"
		name.DefaultText = "USER@HOST:PID, or $LOCKD_NAME"
		timeout.Category, failTimeout.Category, name.Category = globalCategory, globalCategory, globalCategory
		useTLS.Usage += " ($LOCKD_TLS)"
		tlsCA.Usage += " ($LOCKD_TLS_CA)"
		tlsCert.Usage += " ($LOCKD_TLS_CERT)"
		tlsKey.Usage += " ($LOCKD_TLS_KEY)"
		tlsName.Usage += " ($LOCKD_TLS_SERVER_NAME)"
		secret.Usage += " ($LOCKD_SECRET_FILE)"
		addr.Category, jsonOut.Category, color.Category = globalCategory, globalCategory, globalCategory
		output.Category, noHeaders.Category = globalCategory, globalCategory
		useTLS.Category, tlsCA.Category, tlsCert.Category, tlsKey.Category = globalCategory, globalCategory, globalCategory, globalCategory
		tlsName.Category, secret.Category = globalCategory, globalCategory
	}
	return flags
}

// globals is what every command needs beyond its own flags.
type globals struct {
	Addrs    []string // --addr, split
	AddrList string   // --addr, bare ports completed: for messages, and LOCKD_ADDR of exec's command
	JSON     bool
	// Output is -o: text, table, wide, json, or "" to follow the
	// terminal; --json is -o json.
	Output    string
	NoHeaders bool
	// Timeout bounds the wait for a node's answer to one request
	// (--timeout); TimeoutSet says whether it was given, for the
	// commands whose whole wait it bounds with a default of their own.
	Timeout    time.Duration
	TimeoutSet bool
	// FailureTimeout is how long a silent node keeps requests
	// (client.Options.FailureTimeout).
	FailureTimeout time.Duration
	// Name is who is asking (--name, LOCKD_NAME, else USER@HOST:PID):
	// client.Options.Name, shown by queues.
	Name   string
	Color  bool // colour may be written to Stdout
	TTY    bool // Stdout is a terminal: tables and decoration are welcome
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	// Security is how every connection is set up: TLS and the secret
	// (client.Options' TLS, Secret).
	Security client.Options
	// SecurityEnv passes the TLS and secret flags on to exec's command,
	// as their LOCKD_* twins, so that a lockctl it runs connects the same
	// way.
	SecurityEnv []string
}

// nodeAddr reads one address of --addr: HOST:PORT as given, or a bare
// PORT, which means 127.0.0.1:PORT, as lockd --listen 7171 listens there:
// the port make run and lockd were given works here too. Anything else
// goes on as given, for globalsOf to refuse.
func nodeAddr(s string) string {
	s = strings.TrimSpace(s)
	if _, err := strconv.ParseUint(s, 10, 16); err != nil {
		return s
	}
	return net.JoinHostPort("127.0.0.1", s)
}

// globalsOf resolves the global flags for the command running in cCtx, or
// returns a usage error.
func globalsOf(cCtx *cli.Context) (*globals, error) {
	g := &globals{
		AddrList: lookupGlobal(cCtx, flagAddr, defaultAddr, (*cli.Context).String),
		JSON:     lookupGlobal(cCtx, flagJSON, false, (*cli.Context).Bool),
		Stdin:    cCtx.App.Reader,
		Stdout:   cCtx.App.Writer,
		Stderr:   cCtx.App.ErrWriter,
	}
	for _, a := range strings.Split(g.AddrList, ",") {
		a = nodeAddr(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, usageError(cCtx.Command.Name, "--addr (or LOCKD_ADDR) %q is not HOST:PORT (or a bare PORT)", a)
		}
		g.Addrs = append(g.Addrs, a)
	}
	if len(g.Addrs) == 0 {
		return nil, usageError(cCtx.Command.Name, "--addr (or LOCKD_ADDR) is empty: give at least one HOST:PORT")
	}
	g.AddrList = strings.Join(g.Addrs, ",")
	g.Output = lookupGlobal(cCtx, flagOutput, "", (*cli.Context).String)
	g.NoHeaders = lookupGlobal(cCtx, flagNoHeaders, false, (*cli.Context).Bool)
	switch g.Output {
	case "", outputText, outputTable, outputWide:
		if g.JSON && g.Output != "" {
			return nil, usageError(cCtx.Command.Name, "--json and -o %s do not go together: --json is -o json", g.Output)
		}
	case outputJSON:
		g.JSON = true
	default:
		return nil, usageError(cCtx.Command.Name, "-o/--output %q: want text, table, wide or json", g.Output)
	}
	if g.JSON {
		g.Output = outputJSON
	}
	g.Timeout = lookupGlobal(cCtx, flagTimeout, defaultTimeout, (*cli.Context).Duration)
	g.FailureTimeout = lookupGlobal(cCtx, flagFailTimeout, defaultFailureTimeout, (*cli.Context).Duration)
	for _, c := range cCtx.Lineage() {
		if c.Command != nil && given(c, flagTimeout) {
			g.TimeoutSet = true
		}
	}
	if g.Timeout < time.Millisecond {
		return nil, usageError(cCtx.Command.Name, "--timeout %s: must be at least 1ms", g.Timeout)
	}
	if g.FailureTimeout < 10*time.Millisecond {
		return nil, usageError(cCtx.Command.Name, "--failure-timeout %s: must be at least 10ms", g.FailureTimeout)
	}
	g.Name = lookupGlobal(cCtx, flagName, "", (*cli.Context).String)
	if g.Name == "" {
		g.Name = defaultName()
	}
	if err := g.loadSecurity(cCtx); err != nil {
		return nil, err
	}
	if f, ok := g.Stdout.(*os.File); ok {
		g.TTY = isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
	}
	mode := lookupGlobal(cCtx, flagColor, "auto", (*cli.Context).String)
	switch mode {
	case "always":
		g.Color = true
	case "never":
	case "auto":
		// https://no-color.org: set and not empty means no colour; an
		// explicit --color=always still wins.
		g.Color = g.TTY && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	default:
		return nil, usageError(cCtx.Command.Name, "--color %q: want auto, always or never", mode)
	}
	return g, nil
}

// lookupGlobal reads a global flag from the innermost context that was
// given it (on the command line, or, for the app, by its environment
// twin), or returns def.
func lookupGlobal[T any](cCtx *cli.Context, name string, def T, get func(*cli.Context, string) T) T {
	for _, c := range cCtx.Lineage() {
		if c.Command != nil && given(c, name) {
			return get(c, name)
		}
	}
	return def
}

// given reports whether the global flag name was given to c's command: on
// its command line, or, for the app, by its environment twin. It answers
// what c.IsSet(name) does, from the few flags that were given: IsSet,
// for a flag that was not, looks through every flag of the lineage and
// runs a regexp over each of their names: asked for each global flag in
// each context, that was a quarter of the allocations of parsing a
// command line.
func given(c *cli.Context, name string) bool {
	for _, n := range c.LocalFlagNames() {
		if n == name || globalName(n) == name {
			return true
		}
	}
	return false
}

// globalName is the name of the global flag whose alias is alias
// (TestGlobalAliases keeps it complete).
func globalName(alias string) string {
	if alias == "o" {
		return flagOutput
	}
	return alias
}
