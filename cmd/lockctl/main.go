// Command lockctl is lockd's command-line client: it takes, holds and
// releases locks, wraps shell jobs in a lock, and inspects a cluster.
//
// lockctl owns flags, environment, signals and what is printed. It knows no
// lock rule: the server decides, and proto/client speaks the wire protocol.
// Each subcommand lives in its own file (acquire.go, exec.go, ...) as a
// small type holding its flags, with a Command method that describes it to
// urfave/cli and a Run method that does the work.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/didyoumean"
	"github.com/lockd-io/lockd/cmd/internal/durflag"
	"github.com/lockd-io/lockd/cmd/internal/flagname"
	"github.com/lockd-io/lockd/proto/client"
)

// defaultAddr is where lockd listens when started with no flags.
const defaultAddr = "127.0.0.1:7070"

func main() {
	// A lock command is a few requests and a child process: one
	// processor is plenty, and a second costs every run the threads the
	// runtime starts and wakes to use it (a tenth of exec's time). The
	// load generators, bench and drill, keep every processor, and so does
	// a GOMAXPROCS the user set.
	if os.Getenv("GOMAXPROCS") == "" {
		if name := commandArg(os.Args); name != "bench" && name != "drill" {
			runtime.GOMAXPROCS(1)
		}
	}
	os.Exit(run(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// commandDef is a subcommand by name, built only when a run needs it.
type commandDef struct {
	name string
	make func() *cli.Command
}

// commandTable lists every subcommand by name, in the order --help shows
// them. A new command is one file beside this one and one line here
// (TestCommandTableNames checks each name is its command's).
func commandTable() []commandDef {
	return []commandDef{
		{"acquire", func() *cli.Command { return new(acquireCommand).Command() }},
		{"release", func() *cli.Command { return new(releaseCommand).Command() }},
		{"renew", func() *cli.Command { return new(renewCommand).Command() }},
		{"hold", func() *cli.Command { return new(holdCommand).Command() }},
		{"exec", func() *cli.Command { return new(execCommand).Command() }},
		{"bench", func() *cli.Command { return new(benchCommand).Command() }},
		{"status", func() *cli.Command { return new(statusCommand).Command() }},
		{"queues", func() *cli.Command { return new(queuesCommand).Command() }},
		{"watch", func() *cli.Command { return new(watchCommand).Command() }},
		{"handoff", func() *cli.Command { return new(handoffCommand).Command() }},
		{"drill", func() *cli.Command { return new(drillCommand).Command() }},
		{"completion", func() *cli.Command { return new(completionCommand).Command() }},
		{"version", func() *cli.Command { return new(versionCommand).Command() }},
	}
}

// commands builds every subcommand, in the order --help shows them.
func commands() []*cli.Command {
	table := commandTable()
	cmds := make([]*cli.Command, len(table))
	for i, c := range table {
		cmds[i] = c.make()
	}
	return cmds
}

// commandsFor builds the commands a run with args needs: the one args
// name, when they name one and ask for no help (a command's definition
// and its flags are start-up work every run paid for the twelve it does
// not run); every command otherwise, for help, completion and the "did
// you mean" of a typo.
func commandsFor(args []string) []*cli.Command {
	if args != nil && !mayShowHelp(args) {
		name := commandArg(args)
		for _, c := range commandTable() {
			if c.name == name {
				return []*cli.Command{c.make()}
			}
		}
	}
	return append(commands(), flagsCommand())
}

// commandArg is the command args name: the first argument that is not a
// global flag or its value; "" when a flag before it is not a global one
// (the run then builds every command, and urfave/cli says what is
// wrong).
func commandArg(args []string) string {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			if a == "--" {
				return ""
			}
			return a
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takes, global := globalTakesValue[globalName(name)]
		if !global {
			return ""
		}
		if takes && !hasValue {
			i++
		}
	}
	return ""
}

// flagsBeyond reports whether args give, after the name of cmd and
// before a "--", a flag that is not one of cmd's own: a global flag, or
// one lockctl does not have, whose "did you mean" looks among the global
// flags too.
func flagsBeyond(args []string, cmd *cli.Command) bool {
	own := make(map[string]bool)
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			own[n] = true
		}
	}
	seen := false
	for _, a := range args[1:] {
		switch {
		case a == "--":
			return false
		case !seen:
			seen = a == cmd.Name
		case strings.HasPrefix(a, "-") && a != "-":
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !own[name] {
				return true
			}
		}
	}
	return false
}

// globalTakesValue says, for each global flag, whether it takes a value
// (TestGlobalTakesValue keeps it in step with globalFlags).
var globalTakesValue = map[string]bool{
	flagAddr: true, flagOutput: true, flagJSON: false, flagNoHeaders: false, flagColor: true,
	flagTimeout: true, flagFailTimeout: true, flagName: true, flagTLS: false, flagTLSCA: true,
	flagTLSCert: true, flagTLSKey: true, flagTLSServerName: true, flagSecretFile: true,
}

// run is lockctl with its process boundary passed in, so tests can drive it.
// It returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app, helpMiss := newAppFor(args, stdin, stdout, stderr)
	err := app.RunContext(ctx, args)
	if err == nil && *helpMiss != "" {
		err = noCommand(*helpMiss)
	}
	if wantsJSON(args) {
		reportJSONError(stdout, err)
	}
	return reportError(stderr, err)
}

// wantsJSON reports whether args ask for JSON (--json, -o json), looking
// no further than a "--" (exec's command and its arguments follow it).
// It reads the raw arguments, so that an error in parsing the others
// still comes back as JSON.
func wantsJSON(args []string) bool {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return false
		case a == "--json" || a == "-json" || a == "--json=true":
			return true
		case a == "-o" || a == "--output" || a == "-output":
			if i+1 < len(args) && args[i+1] == outputJSON {
				return true
			}
		case a == "-o=json" || a == "--output=json" || a == "-ojson":
			return true
		}
	}
	return false
}

// newApp builds the urfave/cli application. helpMiss is set when
// `lockctl help NAME` names no command: urfave/cli reports that through a
// hook that cannot fail, and lockctl wants exit code 2 for it.
func newApp(stdin io.Reader, stdout, stderr io.Writer) (*cli.App, *string) {
	return newAppFor(nil, stdin, stdout, stderr)
}

// newAppFor is newApp for one run with args. Every command takes the
// global flags too, in a category of their own that its help shows
// apart. urfave/cli sorts each command's flags into their categories in
// App.Setup, writing out the help line of every flag of every command to
// do so: two fifths of the allocations of parsing a command line that
// asks for no help. So unless args may ask for a command's help, Setup
// runs before the global flags are added to the commands; they parse the
// same, and no help line is written.
func newAppFor(args []string, stdin io.Reader, stdout, stderr io.Writer) (*cli.App, *string) {
	helpMiss := new(string)
	cmds := commandsFor(args)
	for _, c := range cmds {
		c.OnUsageError = onUsageError
		if c.CustomHelpTemplate == "" {
			c.CustomHelpTemplate = commandHelpTemplate
		}
	}
	addGlobals := func() {
		for _, c := range cmds {
			if args != nil && len(cmds) == 1 && !flagsBeyond(args, c) {
				// Only the command args name was built, and every flag
				// after its name is its own: the global flags were given
				// before it, if at all, and it needs no copy of them.
				continue
			}
			c.Flags = append(c.Flags, globalFlags(false)...)
		}
	}
	app := &cli.App{
		Name:  "lockctl",
		Usage: "take, hold and release lockd locks; run commands under a lock",
		UsageText: "lockctl [--addr ADDR,...] [--json] [--color auto|always|never]\n" +
			"        COMMAND [flags] [args]\n" +
			"lockctl COMMAND --help",
		Description: "lockctl talks to lockd, the lock server, over its line protocol. Global\n" +
			"flags (GLOBAL OPTIONS below; lockctl help flags) may come before or after\n" +
			"the command name.\n\n" +
			"Examples:\n" +
			"   token=$(lockctl acquire --key deploy --lease 2m --wait 30s)\n" +
			"   lockctl release --key deploy --token \"$token\"\n" +
			"   lockctl exec --key nightly-backup -- ./backup.sh --full\n" +
			"   LOCKD_ADDR=10.0.0.1:7070,10.0.0.2:7070 lockctl hold --key maintenance\n\n" +
			"Durations are Go durations: 500ms, 30s, 2m, 1h30m.\n\n" +
			exitCodesHelp(helpExitOK, helpExitFailed, helpExitUsage, helpExitTimeout,
				helpExitUnavailable, helpExitLost, helpExitNoAnswer, helpExitSignal,
				exitLine("N", "exec: its command's exit code (126 not executable, 127 not found, 128+N killed by signal N)")),
		Flags:        globalFlags(true),
		Commands:     cmds,
		Version:      buildVersion(),
		Reader:       stdin,
		Writer:       stdout,
		ErrWriter:    stderr,
		OnUsageError: onUsageError,
		// lockctl decides the exit code and prints errors itself, in run:
		// urfave/cli must neither print nor call os.Exit.
		ExitErrHandler: func(*cli.Context, error) {},
		CommandNotFound: func(_ *cli.Context, name string) {
			*helpMiss = name
		},
		Action: func(cCtx *cli.Context) error {
			if cCtx.NArg() == 0 {
				return cli.ShowAppHelp(cCtx)
			}
			return noCommand(cCtx.Args().First())
		},
	}
	// --version (and -v) print what `lockctl version` prints.
	cli.VersionPrinter = func(cCtx *cli.Context) { fmt.Fprintln(cCtx.App.Writer, versionLine()) }
	cli.HelpPrinter = printHelp
	if args != nil && !mayShowHelp(args) {
		app.Setup()
	}
	addGlobals()
	return app, helpMiss
}

// mayShowHelp reports whether args may ask for a command's help: a help
// flag (-h, --help) or the help command (or its alias h) anywhere before
// a "--". A false alarm costs only the time newAppFor saves.
func mayShowHelp(args []string) bool {
	for _, a := range args[min(1, len(args)):] {
		if a == "--" {
			return false
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "help" || name == "h" {
			return true
		}
	}
	return false
}

// noCommand is the usage error for a command lockctl does not have, with
// the nearest one it has when the name looks like a typo of it.
func noCommand(name string) error {
	var names []string
	for _, c := range commands() {
		names = append(names, c.Name)
	}
	if s := didyoumean.Suggest(name, names); s != "" {
		return usageError("", "no command named %q; did you mean %q?", name, s)
	}
	return usageError("", "no command named %q", name)
}

// onUsageError turns urfave/cli's flag parsing errors into exit code 2,
// in lockctl's words, with a pointer to the right --help.
func onUsageError(cCtx *cli.Context, err error, isSubcommand bool) error {
	name := ""
	var flags []cli.Flag
	if isSubcommand && cCtx.Command != nil {
		name, flags = cCtx.Command.Name, cCtx.Command.Flags
	} else {
		flags = cCtx.App.Flags
	}
	msg := err.Error()
	if flag, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		flag = strings.TrimPrefix(flag, "-")
		var known []string
		for _, f := range flags {
			for _, n := range f.Names() {
				if len(n) > 1 {
					known = append(known, n)
				}
			}
		}
		if s := didyoumean.Suggest(flag, known); s != "" && len(flag) > 1 {
			return usageError(name, "unknown flag %s; did you mean --%s?", flagname.Dashed(flag), s)
		}
		return usageError(name, "unknown flag %s", flagname.Dashed(flag))
	}
	if flag, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return usageError(name, "%s needs a value", flagname.Dashed(strings.TrimPrefix(flag, "-")))
	}
	if m := invalidValue().FindStringSubmatch(msg); m != nil {
		value, flag := m[1], m[2]
		// A value of lockctl's own type (lockWait) says what it wants.
		want := strings.TrimPrefix(msg, m[0])
		if want == "" {
			want = "not a valid value"
		}
		for _, f := range flags {
			if !slices.Contains(f.Names(), flag) {
				continue
			}
			switch f.(type) {
			case *cli.DurationFlag:
				want = "want a duration like 500ms, 30s, 2m or 1h30m"
			case *durflag.Flag:
				want = durflag.ErrSyntax.Error()
			case *cli.IntFlag:
				want = "want a whole number"
			}
		}
		return usageError(name, "%s %q: %s", flagname.Dashed(flag), value, want)
	}
	return usageError(name, "%s", msg)
}

// invalidValue matches the flag package's complaint about a value. It is
// compiled on the first usage error, not at every start.
var invalidValue = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^invalid value "(.*)" for flag -([^:]+): `)
})

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

// withSignals returns a context canceled by the first SIGINT or SIGTERM,
// with an interrupted cause naming the signal. Later signals are swallowed
// until stop is called, so a second Ctrl-C cannot cut short the cleanup
// that the first one started.
func withSignals(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			cancel(interrupted{s})
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel(context.Canceled)
		})
	}
}
