// Package complete writes static shell completion scripts (bash, zsh and
// fish) for a urfave/cli application, from its commands and flags, so the
// scripts cannot drift from the program: regenerate them whenever a
// command or flag changes.
//
// It knows the shapes urfave/cli parses (commands and their aliases, nested
// subcommands, boolean and valued flags, --flag=value, "--" ending the
// flags) and nothing of what the program does; what the program knows
// about values (the words a flag or an argument takes, a command that runs
// another command after "--") is passed in as Options.
//
// The scripts are static: completing a word runs no part of the program,
// so completion is instant and works where the program cannot reach its
// servers.
package complete

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/flagname"
)

// Shells lists the shells Generate writes for.
func Shells() []string { return []string{"bash", "zsh", "fish"} }

// Option adds what the command definitions cannot say.
type Option func(*config)

type config struct {
	flagValues  map[string][]string
	argValues   map[string][]string
	commandArgs map[string]bool
}

// FlagValues gives the words a valued flag takes (for example "color":
// auto, always, never). flag is a flag's name, for that flag wherever it
// appears, or a command path and a name separated by a space ("bench
// mode") for that command's flag alone. A valued flag without values
// completes nothing, rather than file names. Values, like names, must be
// plain words: no spaces, quotes, shell characters, ':' or '=' (bash
// splits words at those two).
func FlagValues(flag string, values ...string) Option {
	return func(c *config) { c.flagValues[flag] = values }
}

// ArgValues gives the words a command takes as arguments. The command is
// named by its path below the program, space-separated: "completion", or
// "cluster add".
func ArgValues(command string, values ...string) Option {
	return func(c *config) { c.argValues[command] = values }
}

// CommandArgs says that the command runs another command given after
// "--" (like `lockctl exec -- CMD ARGS`): the word after "--" completes
// as a command name, the later ones as files.
func CommandArgs(command string) Option {
	return func(c *config) { c.commandArgs[command] = true }
}

// Generate writes the completion script of app for shell (bash, zsh or
// fish). prog is the name the program is invoked by; it names the script's
// functions too. app is only read.
func Generate(w io.Writer, shell string, app *cli.App, prog string, opts ...Option) error {
	if prog == "" || strings.ContainsAny(prog, " \t\n'\"\\$`") {
		return fmt.Errorf("complete: program name %q cannot be used in a shell script", prog)
	}
	cfg := config{flagValues: map[string][]string{}, argValues: map[string][]string{}, commandArgs: map[string]bool{}}
	for _, o := range opts {
		o(&cfg)
	}
	root := buildTree(app, prog, &cfg)
	if err := check(root); err != nil {
		return err
	}
	var b strings.Builder
	switch shell {
	case "bash":
		writeBash(&b, root, prog)
	case "zsh":
		writeZsh(&b, root, prog)
	case "fish":
		writeFish(&b, root, prog)
	default:
		return fmt.Errorf("complete: no shell named %q; want one of %s", shell, strings.Join(Shells(), ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// node is one command (the program itself at the root).
type node struct {
	id          string   // shell-safe: prog_cmd_sub
	path        string   // "cmd sub", "" for the root
	names       []string // name and aliases
	usage       string
	flags       []flag
	subs        []*node
	args        []string // words it takes as arguments
	commandArgs bool     // runs a command given after "--"
}

type flag struct {
	names  []string // without dashes, long and short
	value  bool     // takes a value
	usage  string
	hint   string   // what the value is (its placeholder), for messages
	values []string // the words the value can be
}

// spelled is the flag as typed: --name, or -n for one letter.
func (f flag) spelled() []string {
	out := make([]string, len(f.names))
	for i, n := range f.names {
		out[i] = flagname.Dashed(n)
	}
	return out
}

var helpFlag = flag{names: []string{"help", "h"}, usage: "show help"}

func buildTree(app *cli.App, prog string, cfg *config) *node {
	root := &node{id: shellID(prog), names: []string{prog}, usage: app.Usage}
	root.flags = flagsOf("", app.Flags, cfg)
	if !app.HideHelp {
		root.flags = addFlag(root.flags, helpFlag)
	}
	if !app.HideVersion {
		root.flags = addFlag(root.flags, flag{names: []string{"version", "v"}, usage: "print the version"})
	}
	root.subs = commandsOf(root, app.Commands, cfg, app.HideHelp)
	if !app.HideHelp && !app.HideHelpCommand {
		root.subs = addHelpCommand(root)
	}
	root.args = cfg.argValues[""]
	return root
}

func commandsOf(parent *node, cmds []*cli.Command, cfg *config, hideHelp bool) []*node {
	var out []*node
	for _, c := range cmds {
		if c.Hidden || c.Name == "" {
			continue
		}
		path := strings.TrimSpace(parent.path + " " + c.Name)
		n := &node{
			id:          parent.id + "_" + shellID(c.Name),
			path:        path,
			names:       c.Names(),
			usage:       c.Usage,
			flags:       flagsOf(path, c.Flags, cfg),
			args:        cfg.argValues[path],
			commandArgs: cfg.commandArgs[path],
		}
		if !hideHelp && !c.HideHelp {
			n.flags = addFlag(n.flags, helpFlag)
		}
		n.subs = commandsOf(n, c.Subcommands, cfg, hideHelp || c.HideHelp)
		if len(n.subs) > 0 && !hideHelp && !c.HideHelp && !c.HideHelpCommand {
			n.subs = addHelpCommand(n)
		}
		out = append(out, n)
	}
	return out
}

// addHelpCommand adds the help command urfave/cli provides, unless the
// application defined one.
func addHelpCommand(parent *node) []*node {
	for _, s := range parent.subs {
		if slices.Contains(s.names, "help") {
			return parent.subs
		}
	}
	h := &node{id: parent.id + "_help", path: strings.TrimSpace(parent.path + " help"),
		names: []string{"help", "h"}, usage: "show a list of commands or help for one command"}
	for _, s := range parent.subs {
		h.args = append(h.args, s.names[0])
	}
	return append(parent.subs, h)
}

func flagsOf(path string, fs []cli.Flag, cfg *config) []flag {
	var out []flag
	for _, f := range fs {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		fl := flag{names: slices.Clone(f.Names())}
		if d, ok := f.(cli.DocGenerationFlag); ok {
			fl.value = d.TakesValue()
			fl.hint, fl.usage = placeholder(d.GetUsage())
		}
		if fl.value {
			fl.values = valuesOf(cfg, path, fl.names)
		}
		out = addFlag(out, fl)
	}
	return out
}

// valuesOf finds the values given for a flag of the command at path,
// the command's own first.
func valuesOf(cfg *config, path string, names []string) []string {
	for _, key := range []func(string) string{
		func(n string) string { return strings.TrimSpace(path + " " + n) },
		func(n string) string { return n },
	} {
		for _, n := range names {
			if v, ok := cfg.flagValues[key(n)]; ok {
				return v
			}
		}
	}
	return nil
}

// addFlag appends f unless a flag of the same name is there already (an
// application that urfave/cli has set up carries the help flag itself).
func addFlag(fs []flag, f flag) []flag {
	for _, g := range fs {
		for _, n := range f.names {
			if slices.Contains(g.names, n) {
				return fs
			}
		}
	}
	return append(fs, f)
}

// placeholder splits a urfave/cli usage string into the name between its
// first pair of backquotes, which names the flag's value, and the usage
// without the backquotes. The usage is cut to its first clause: a
// completion menu has one line for it.
func placeholder(usage string) (hint, text string) {
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			hint = usage[i+1 : i+1+j]
			usage = usage[:i] + hint + usage[i+1+j+1:]
		}
	}
	return hint, firstClause(usage)
}

func firstClause(s string) string {
	s = dropAsides(strings.Join(strings.Fields(s), " "))
	for _, sep := range []string{"; ", ". "} {
		if i := strings.Index(s, sep); i >= 4 {
			s = s[:i]
		}
	}
	if len(s) > 80 {
		cut := strings.LastIndexByte(s[:77], ' ')
		if cut < 40 {
			cut = 77
		}
		s = s[:cut] + "..."
	}
	return s
}

// dropAsides removes parenthesized asides, " (like this)", which a
// one-line description can do without.
func dropAsides(s string) string {
	for {
		i := strings.Index(s, " (")
		if i < 0 {
			return s
		}
		depth, j := 0, i+1
		for ; j < len(s); j++ {
			if s[j] == '(' {
				depth++
			} else if s[j] == ')' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if j == len(s) {
			return s
		}
		s = s[:i] + s[j+1:]
	}
}

// shellID makes a name usable in function names and case labels.
func shellID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// walk visits n and every node below it, parents first.
func walk(n *node, visit func(*node)) {
	visit(n)
	for _, s := range n.subs {
		walk(s, visit)
	}
}

// plainWord reports whether s can go into a script unquoted: the scripts
// use command names, flag names and values as bare words and case labels.
func plainWord(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`|&;<>()[]{}*?!#~=:")
}

// check refuses a tree with a word the scripts could not carry.
func check(root *node) error {
	var bad []string
	walk(root, func(n *node) {
		words := slices.Clone(n.names)
		words = append(words, n.args...)
		for _, f := range n.flags {
			words = append(words, f.names...)
			words = append(words, f.values...)
		}
		for _, w := range words {
			if !plainWord(w) {
				bad = append(bad, fmt.Sprintf("%q", w))
			}
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("complete: %s cannot be completed: names and values must be plain words, without spaces, quotes, shell characters, ':' or '='", strings.Join(bad, ", "))
	}
	return nil
}
