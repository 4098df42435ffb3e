package main

// How status shows the cluster's last role changes: when the role moved,
// from which node to which, and why, under the nodes.

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// changesHeading opens the section, on a terminal and piped: piped, it
// follows a blank line, which is where the nodes' lines end.
const changesHeading = "recent role changes:"

// stampMillis is a time to the millisecond lockd records role changes in,
// in UTC: piped and in --json, where scripts and logs of several machines
// read it.
const stampMillis = "2006-01-02T15:04:05.000Z07:00"

// renderChanges draws the role changes, oldest first, after a blank line
// and a heading; nothing when there are none. On a terminal a change's
// time is local, with the date when it is not today's; piped, it is UTC
// to the millisecond (RFC 3339), and every line has the same shape:
// TIME FROM -> TO REASON.
func renderChanges(w io.Writer, changes []proto.RoleChange, s renderStyle, now time.Time) error {
	if len(changes) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("\n" + changesHeading + "\n")
	indent := ""
	if s.Table {
		indent = "  "
	}
	for _, line := range changeLines(changes, s, now) {
		text := indent + line.text
		if s.Table && s.Width > 0 {
			// The reason is what may not fit: wrapped at spaces, under
			// itself.
			text = wrapText(text, len(indent)+len(line.lead), s.Width, strings.Repeat(" ", textWidth(indent+line.lead)))
		}
		b.WriteString(text + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// minReason is the room a change's reason keeps on a line before the
// addresses are cut: a few words, the rest wrapped under them.
const minReason = 16

// changeLine is one change drawn: text is the whole line, lead what
// comes before the reason.
type changeLine struct {
	text, lead string
}

// changeLines draws each change with its columns aligned: time, FROM,
// TO, then the reason. A FROM of none (the node took the role when it
// knew no active) reads "-". Addresses and reasons come from the nodes
// and are escaped.
func changeLines(changes []proto.RoleChange, s renderStyle, now time.Time) []changeLine {
	arrow := "->"
	if s.Table && !s.ASCII {
		arrow = "→"
	}
	type cells struct{ at, from, to, reason string }
	rows := make([]cells, len(changes))
	var wAt, wFrom, wTo int
	for i, c := range changes {
		r := cells{from: cellNone, to: printable(c.To), reason: printableText(c.Reason)}
		if c.From != "" {
			r.from = printable(c.From)
		}
		if r.reason == "" {
			r.reason = cellNone
		}
		if s.Table {
			r.at = localTime(c.At, now)
		} else {
			r.at = c.At.UTC().Format(stampMillis)
		}
		rows[i] = r
		wAt = max(wAt, textWidth(r.at))
		wFrom, wTo = max(wFrom, textWidth(r.from)), max(wTo, textWidth(r.to))
	}
	// A person's view fits the terminal as the node table does: the
	// addresses are cut in the middle until the reason has room, but not
	// below minCut, where they would no longer say which node: past that
	// the reason wraps narrower.
	if s.Table && s.Width > 0 {
		fixed := 2 + wAt + 2 + 1 + textWidth(arrow) + 1 + 2 + minReason
		for fixed+wFrom+wTo > s.Width && (wFrom > minCut || wTo > minCut) {
			if wFrom >= wTo && wFrom > minCut {
				wFrom--
			} else {
				wTo--
			}
		}
	}
	pad := func(c string, w int) string {
		if textWidth(c) > w {
			c = cutTo(c, w, s)
		}
		return c + strings.Repeat(" ", max(0, w-textWidth(c)))
	}
	out := make([]changeLine, len(rows))
	for i, r := range rows {
		lead := pad(r.at, wAt) + "  " + pad(r.from, wFrom) + " " + arrow + " " + pad(r.to, wTo) + "  "
		out[i] = changeLine{text: lead + r.reason, lead: lead}
	}
	return out
}

// localTime is when a change happened as a person reads it on this
// machine: the time of day when it was today, with the month and day
// when this year, else the whole date.
func localTime(at, now time.Time) string {
	at = at.In(now.Location())
	y, m, d := at.Date()
	ny, nm, nd := now.Date()
	switch {
	case y == ny && m == nm && d == nd:
		return at.Format("15:04:05")
	case y == ny:
		return at.Format("Jan 02 15:04:05")
	}
	return at.Format("2006-01-02 15:04:05")
}

// changesSeen is what status --watch has written of the role changes
// into a pipe: each change is written once, as it turns up, not with
// every survey.
type changesSeen map[changeKey]bool

type changeKey struct {
	ms               int64
	from, to, reason string
}

// maxChangesSeen bounds what --watch remembers of the changes it wrote;
// past it, only the current view's are remembered (an older change that
// turns up again, from a node back after an outage, is written again).
const maxChangesSeen = 4096

// fresh is the changes of a view not written yet, which it marks
// written.
func (seen changesSeen) fresh(changes []proto.RoleChange) []proto.RoleChange {
	if len(seen) > maxChangesSeen {
		clear(seen)
		for _, c := range changes {
			seen[keyOf(c)] = true
		}
		return nil
	}
	var out []proto.RoleChange
	for _, c := range changes {
		if k := keyOf(c); !seen[k] {
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

func keyOf(c proto.RoleChange) changeKey {
	return changeKey{c.At.UnixMilli(), c.From, c.To, c.Reason}
}

// watchChangeLines is the role changes a piped status --watch writes
// after a survey's nodes: one line each, starting with the survey's
// time, then "role change" and the change as status writes it piped.
func watchChangeLines(stamp string, changes []proto.RoleChange, s renderStyle) string {
	var b strings.Builder
	for _, l := range changeLines(changes, s, time.Time{}) {
		fmt.Fprintf(&b, "%s  role change  %s\n", stamp, l.text)
	}
	return b.String()
}

// statusChangeJSON is a role change in status --json.
type statusChangeJSON struct {
	At     string  `json:"at"`
	From   *string `json:"from"`
	To     string  `json:"to"`
	Reason string  `json:"reason"`
}

func changesJSONOf(changes []proto.RoleChange) []statusChangeJSON {
	out := []statusChangeJSON{}
	for _, c := range changes {
		j := statusChangeJSON{At: c.At.UTC().Format(stampMillis), To: c.To, Reason: c.Reason}
		if c.From != "" {
			j.From = ptrTo(c.From)
		}
		out = append(out, j)
	}
	return out
}
