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
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/didyoumean"
	"github.com/lockd-io/lockd/cmd/internal/durflag"
	"github.com/lockd-io/lockd/cmd/internal/flagname"
	"github.com/lockd-io/lockd/cmd/lockctl/internal/oneproc"
)

// defaultAddr is where lockd listens when started with no flags.
const defaultAddr = "127.0.0.1:7070"

func main() {
	// Package oneproc gave the lock commands one processor; the load
	// generators, bench and drill, keep every processor.
	if name := commandArg(os.Args); name == "bench" || name == "drill" {
		oneproc.Restore()
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
