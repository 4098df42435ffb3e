package main

// How lockctl prints its help: a command's help lists its own flags and
// names the global ones in one line (they are the same for every
// command, on a page of their own: lockctl help flags); and every line
// is wrapped at spaces to the terminal's width, 80 columns when not on a
// terminal, a flag's text hanging under its column, so that no word is
// broken where the terminal would wrap it.

import (
	"bytes"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"
)

// commandHelpTemplate is urfave/cli's command help, with OPTIONS holding
// the command's own flags only.
const commandHelpTemplate = `NAME:
   {{template "helpNameTemplate" .}}

USAGE:
   {{template "usageTemplate" .}}{{if .Description}}

DESCRIPTION:
   {{template "descriptionTemplate" .}}{{end}}{{with ownFlags .VisibleFlags}}

OPTIONS:{{range .}}
   {{.}}{{end}}{{end}}

GLOBAL OPTIONS:
   --addr, -o/--output, --json, --no-headers, --color, --timeout,
   --failure-timeout, --name, --tls and --tls-*, --secret-file, before or
   after the command: see lockctl help flags
`

// flagsHelpTemplate is the page of the global flags: lockctl help flags
// (and lockctl flags).
const flagsHelpTemplate = `GLOBAL OPTIONS:
   Every command takes these, before or after its name: lockctl --json
   status and lockctl status --json are the same. A value given after the
   command wins. Each shows its environment twin in brackets.
{{range globalFlags}}
   {{.}}{{end}}

   Durations are Go durations (500ms, 30s, 2m, 1h30m); --addr takes a bare
   PORT for 127.0.0.1:PORT.
`

// flagsCommand is the page of the global flags as a help topic: hidden
// from the command list, shown by lockctl help flags.
func flagsCommand() *cli.Command {
	return &cli.Command{
		Name:               "flags",
		Usage:              "the global flags every command takes",
		Hidden:             true,
		CustomHelpTemplate: flagsHelpTemplate,
		HideHelp:           true,
		Action: func(cCtx *cli.Context) error {
			printHelp(cCtx.App.Writer, flagsHelpTemplate, cCtx.Command)
			return nil
		},
	}
}

// printHelp is cli.HelpPrinter for lockctl: urfave/cli's printer with
// lockctl's template functions, its lines wrapped to the width of w.
func printHelp(w io.Writer, templ string, data any) {
	var b bytes.Buffer
	cli.HelpPrinterCustom(&b, templ, data, map[string]any{
		"ownFlags": ownFlags,
		"globalFlags": func() []cli.Flag {
			var out []cli.Flag
			for _, f := range globalFlags(true) {
				out = append(out, f)
			}
			return out
		},
	})
	io.WriteString(w, wrapHelp(b.String(), helpWidth(w)))
}

// ownFlags are the flags of a command that are not the global ones.
func ownFlags(flags []cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		if c, ok := f.(cli.CategorizableFlag); ok && c.GetCategory() == globalCategory {
			continue
		}
		out = append(out, f)
	}
	return out
}

// helpWidth is the width help is wrapped to: the terminal's when w is
// one, else $COLUMNS, else 80.
func helpWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return terminalWidth(f)
	}
	return terminalWidth(nil)
}

// wrapHelp wraps every line of help longer than width. A line of a list
// (a flag or a command, its text after a run of two or more spaces)
// hangs under that text; any other line under its own indent.
func wrapHelp(help string, width int) string {
	lines := strings.Split(help, "\n")
	for i, l := range lines {
		if textWidth(l) <= width {
			continue
		}
		hang := hangingIndent(l, width)
		lines[i] = wrapText(l, hang, width, strings.Repeat(" ", hang))
	}
	return strings.Join(lines, "\n")
}

// hangingIndent is where the continuation lines of l start: under the
// text of a list item (after its first run of two or more spaces past
// the indent), or at l's own indent; never so far right that less than
// half the width is left.
func hangingIndent(l string, width int) int {
	lead := len(l) - len(strings.TrimLeft(l, " "))
	if i := strings.Index(l[lead:], "  "); i > 0 {
		col := lead + i
		for col < len(l) && l[col] == ' ' {
			col++
		}
		if col < width/2 {
			return col
		}
	}
	return lead
}

// lineWidth is the width to wrap a message to when w is a terminal, 0
// when it is not: an error or a warning read in a pipe or a log stays on
// one line, for grep.
func lineWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return terminalWidth(f)
	}
	return 0
}
