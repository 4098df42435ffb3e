package main

// How lockctl draws what it shows a person: tables and colour on a
// terminal, plain aligned columns when piped, never an escape code a
// script did not ask for.
//
// Every render function takes the io.Writer to draw on and a renderStyle,
// so tests can force either look without a terminal.

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// renderStyle is how output is drawn.
type renderStyle struct {
	// Table draws boxed tables (tablewriter) and summary lines for a
	// person; without it, output is plain columns separated by spaces,
	// ready for grep, awk and cut.
	Table bool
	// Color adds ANSI colour and bold.
	Color bool
}

// styleOf decides the look from the global flags, already resolved by
// globalsOf: colour with --color always, or with auto when stdout is a
// terminal and NO_COLOR is unset; tables whenever stdout is a terminal or
// colour was asked for, so that `lockctl --color always status | less -R`
// looks like the terminal does.
func styleOf(g *globals) renderStyle {
	return renderStyle{Table: g.TTY || g.Color, Color: g.Color}
}

// palette holds the styles of one output. With colour off every style
// renders its text unchanged.
type palette struct {
	color bool

	good   lipgloss.Style // the active node, caught-up standbys, PASS
	warn   lipgloss.Style // lag, long waits
	bad    lipgloss.Style // down nodes, FAIL, violations
	strong lipgloss.Style // names worth finding at a glance
	faint  lipgloss.Style // secondary detail
}

func newPalette(w io.Writer, color bool) *palette {
	r := lipgloss.NewRenderer(w)
	// The profile is set, never detected: lockctl has already decided
	// whether colour is wanted (--color, NO_COLOR, isatty), and the 16
	// basic colours read on every terminal, light or dark, and give the
	// same bytes in every environment (the golden tests rely on that).
	if color {
		r.SetColorProfile(termenv.ANSI)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	// Known, so lipgloss never queries the terminal for its background.
	r.SetHasDarkBackground(true)
	return &palette{
		color:  color,
		good:   r.NewStyle().Foreground(lipgloss.Color("2")).Bold(true),
		warn:   r.NewStyle().Foreground(lipgloss.Color("3")),
		bad:    r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		strong: r.NewStyle().Bold(true),
		faint:  r.NewStyle().Faint(true),
	}
}

// newTable is a boxed table with left-aligned headers written as given.
// Cells may hold colour: tablewriter measures them without their escape
// codes.
func newTable(w io.Writer, header ...string) *tablewriter.Table {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Symbols: tw.NewSymbols(tw.StyleRounded),
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	)
	t.Header(toAny(header)...)
	return t
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// writeColumns writes rows as plain columns, aligned with spaces (two
// between columns, none at line ends), for output that is piped.
func writeColumns(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(cells []string) {
		io.WriteString(tw, strings.Join(cells, "\t"))
		io.WriteString(tw, "\n")
	}
	if header != nil {
		line(header)
	}
	for _, r := range rows {
		line(r)
	}
	return tw.Flush()
}

// cellNone is how an unknown or empty cell reads in plain and table output.
const cellNone = "-"

// humanDuration is a duration as a person reads it at a glance: 0.4s,
// 29.5s, 4m05s, 2h13m, 3d04h. Precision falls as the value grows, since
// nobody cares about the seconds of a three-day uptime.
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		d = d.Truncate(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		d = d.Truncate(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		d = d.Truncate(time.Hour)
		return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}

// shortDuration is a measured interval, such as a handoff gap: 840µs,
// 12.4ms, 1.25s. Millisecond precision is what a gap is judged by.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 100*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// secondsJSON is a duration in seconds for JSON, to the millisecond, so
// that 1.574 prints as such and not as 1.5739999999999998.
func secondsJSON(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond).Milliseconds()) / 1000
}

// millis is a duration in milliseconds for JSON, to the microsecond.
func millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// clearScreen moves the cursor home and clears the terminal, for output
// that redraws in place (status --watch).
const clearScreen = "\x1b[H\x1b[2J"
