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
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// renderStyle is how output is drawn.
type renderStyle struct {
	// Table draws the view for a person: aligned columns with a bold
	// header, the active marked, a queue's key once above its waiters,
	// a summary line under it. Without it, output is plain columns
	// separated by spaces, one record per line, every cell filled, ready
	// for grep, awk and cut.
	Table bool
	// Color adds ANSI colour and bold.
	Color bool
	// Width, when not 0, is the width a table must fit: long keys and
	// addresses are cut (with an ellipsis) until it does.
	Width int
	// ASCII draws with ASCII only: for a terminal that cannot show the
	// bullet, the middle dot or the ellipsis (TERM=dumb, a non-UTF-8
	// locale).
	ASCII bool
	// NoHeaders leaves out the header line.
	NoHeaders bool
	// Wide adds the columns a narrow view leaves out, and cuts nothing.
	Wide bool
}

// Output formats of -o/--output.
const (
	outputText  = "text"
	outputTable = "table"
	outputJSON  = "json"
	outputWide  = "wide"
)

// styleOf decides the look from the global flags, already resolved by
// globalsOf. The layout follows -o, or the terminal when -o is not given:
// a table on a terminal, plain text into a pipe. Colour follows --color
// alone (auto: on a terminal, unless NO_COLOR is set or TERM is dumb), so
// `--color always` colours plain text too and never changes its layout.
func styleOf(g *globals) renderStyle {
	s := renderStyle{Color: g.Color, NoHeaders: g.NoHeaders, ASCII: asciiOnly()}
	switch g.Output {
	case outputTable:
		s.Table = true
	case outputWide:
		s.Table, s.Wide = g.TTY, true
	case outputText:
	default:
		s.Table = g.TTY
	}
	if s.Table && !s.Wide {
		s.Width = terminalWidth(g.Stdout)
	}
	return s
}

// asciiOnly reports whether the terminal may lack the few non-ASCII
// glyphs lockctl draws: TERM=dumb, or a locale that is not UTF-8.
func asciiOnly() bool {
	if os.Getenv("TERM") == "dumb" {
		return true
	}
	for _, v := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if loc := os.Getenv(v); loc != "" {
			loc = strings.ToUpper(loc)
			return !strings.Contains(loc, "UTF-8") && !strings.Contains(loc, "UTF8")
		}
	}
	return false
}

// terminalWidth is the width of the terminal w draws on, else $COLUMNS,
// else 80.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}

// Glyphs a person's view uses, and their ASCII stand-ins.
func (s renderStyle) bullet() string {
	if s.ASCII {
		return "*"
	}
	return "●"
}

func (s renderStyle) dot() string {
	if s.ASCII {
		return " - "
	}
	return " · "
}

func (s renderStyle) ellipsis() string {
	if s.ASCII {
		return "..."
	}
	return "…"
}

// palette holds the styles of one output. With colour off every style
// renders its text unchanged.
type palette struct {
	color bool

	good   style // the active node, caught-up standbys, PASS
	warn   style // lag, long waits
	bad    style // down nodes, FAIL, violations
	strong style // names worth finding at a glance
	faint  style // secondary detail
}

// style is the SGR parameters of a look: "1;32" bold green. The 16 basic
// colours read on every terminal, light or dark, and give the same bytes
// in every environment (the golden tests rely on that); nothing is
// detected, since lockctl has already decided whether colour is wanted
// (--color, NO_COLOR, isatty).
type style struct{ sgr string }

// Render wraps s in the style's escape codes, or returns it as it is for
// no style or nothing to draw.
func (st style) Render(s string) string {
	if st.sgr == "" || s == "" {
		return s
	}
	return "\x1b[" + st.sgr + "m" + s + sgrReset
}

func newPalette(_ io.Writer, color bool) *palette {
	if !color {
		return &palette{}
	}
	return &palette{
		color:  true,
		good:   style{"1;32"},
		warn:   style{"33"},
		bad:    style{"1;31"},
		strong: style{"1"},
		faint:  style{"2"},
	}
}

// grid is a table to draw. Cells are plain text, already escaped for the
// terminal (printable); paint, where set, colours a cell after it has
// been measured and cut to fit.
type grid struct {
	header []string
	rows   [][]string
	paint  [][]func(string) string
	// shrink lists the columns that may be cut to fit a width, in the
	// order they are cut; each keeps at least minCut cells, or lastCut
	// when that is not enough. A cut takes out a cell's middle (see
	// cutMiddle): the end of an address is its port, the end of a
	// holder's name its pid, the end of a key often its number, and the
	// start says whose or where.
	shrink []int
}

// minCut is the narrowest a column is cut to while others can give room,
// and lastCut the narrowest when the table still does not fit: a few
// characters and the ellipsis, enough to tell rows apart.
const (
	minCut  = 10
	lastCut = 6
)

// cutTo shortens c to width cells, taking out its middle and marking the
// cut with s's ellipsis.
func cutTo(c string, width int, s renderStyle) string {
	return cutMiddle(c, width, s.ellipsis())
}

func (t *grid) add(cells []string, paint ...func(string) string) {
	t.rows = append(t.rows, cells)
	t.paint = append(t.paint, paint)
}

// draw writes the grid: in a person's view, columns two spaces apart with
// a bold header, cut to s.Width; in plain text, columns two spaces apart
// as well (so one cell never runs into the next), nothing cut, nothing
// painted unless colour was asked for. No line ends in spaces.
func (t *grid) draw(w io.Writer, s renderStyle, p *palette) error {
	n := len(t.header)
	width := make([]int, n)
	measure := func(cells []string) {
		for i, c := range cells {
			width[i] = max(width[i], textWidth(c))
		}
	}
	if !s.NoHeaders {
		measure(t.header)
	}
	for _, r := range t.rows {
		measure(r)
	}
	cut := make([]bool, n)
	if s.Table && s.Width > 0 {
		total := func() int {
			sum := 2 * (n - 1)
			for _, x := range width {
				sum += x
			}
			return sum
		}
		// Each column is cut to minCut first, in turn; when that is not
		// enough, to lastCut.
		for _, floor := range []int{minCut, lastCut} {
			for _, col := range t.shrink {
				over := total() - s.Width
				if over <= 0 {
					break
				}
				if by := min(over, width[col]-floor); by > 0 {
					width[col] -= by
					cut[col] = true
				}
			}
		}
	}
	var b strings.Builder
	line := func(cells []string, paint []func(string) string, header bool) {
		var out strings.Builder
		pending := 0 // spaces owed before the next non-empty cell
		for i := 0; i < n; i++ {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			if cut[i] {
				c = cutTo(c, width[i], s)
			}
			pad := width[i] - textWidth(c)
			switch {
			case header && s.Table && c != "":
				c = p.strong.Render(c)
			case c != "" && i < len(paint) && paint[i] != nil:
				c = paint[i](c)
			}
			if c != "" {
				out.WriteString(strings.Repeat(" ", pending))
				out.WriteString(c)
				pending = 0
			}
			pending += pad
			if i < n-1 {
				pending += 2
			}
		}
		b.WriteString(out.String())
		b.WriteByte('\n')
	}
	if !s.NoHeaders {
		line(t.header, nil, true)
	}
	for i, r := range t.rows {
		line(r, t.paint[i], false)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// summaryLine joins the parts of a summary with s's middle dot, starting
// a new line rather than running past s.Width, and wrapping at spaces a
// part longer than a line.
func summaryLine(parts []string, s renderStyle) string {
	var b strings.Builder
	col := 0
	for i, part := range parts {
		w := textWidth(part)
		if i > 0 {
			sep := s.dot()
			if s.Width > 0 && col+textWidth(sep)+w > s.Width {
				b.WriteString("\n")
				col = 0
			} else {
				b.WriteString(sep)
				col += textWidth(sep)
			}
		}
		if s.Width > 0 && col+w > s.Width {
			part = wrapText(part, 0, s.Width-col, "")
			w = textWidth(part[strings.LastIndexByte(part, '\n')+1:])
			if strings.Contains(part, "\n") {
				col = 0
			}
		}
		b.WriteString(part)
		col += w
	}
	b.WriteString("\n")
	return b.String()
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

// roundedDuration is a duration as a person reads it in a sentence, to
// three significant digits: 667ms, 1.67s, 10s, 3m20s.
func roundedDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// seconds is a duration as JSON gives it, a number of seconds, to the
// millisecond lockd counts in, so that 1.574 prints as such and not as
// 1.5739999999999998.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond).Milliseconds()) / 1000
}

// millis is a duration in milliseconds for JSON, to the microsecond.
func millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// clearScreen moves the cursor home and clears the terminal, for output
// that redraws in place (status --watch).
const clearScreen = "\x1b[H\x1b[2J"
