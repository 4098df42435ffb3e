package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/lockd-io/lockd/cmd/internal/drill"
)

// renderDrill writes the report as a few labelled lines, the verdict last.
// Addresses and keys are escaped with printable; the details, errors and
// failures, which may quote a server or a command line, with printableText.
func renderDrill(w io.Writer, r *drill.Report, p drill.Plan, color bool) error {
	pal := newPalette(w, color)
	var b strings.Builder
	line := func(label, value string) {
		if label != "" {
			label += ":"
		}
		fmt.Fprintf(&b, "%-10s%s\n", label, value)
	}
	action := p.Action + " at " + p.At.String()
	switch p.Action {
	case drill.ActionNone:
		action = "no action"
	case drill.ActionRun:
		action = fmt.Sprintf("command at %s: %s", p.At, printableText(p.Command))
	}
	line("drill", fmt.Sprintf("%s, %s, %s, %s", countOf(p.Workers, "worker", "workers"), countOf(p.Keys, "key", "keys"), p.Duration, action))
	if p.Action != drill.ActionNone {
		detail := printableText(r.ActionDetail)
		if !r.ActionOK {
			detail = pal.bad.Render(detail)
		}
		line("action", detail)
	}
	active := nameOrNone(r.ActiveBefore) + " -> " + nameOrNone(r.ActiveAfter)
	if r.ActiveBefore == r.ActiveAfter {
		active = nameOrNone(r.ActiveBefore) + " (unchanged)"
	}
	line("active", active)
	line("cycles", fmt.Sprintf("%d completed (%d grants)", r.Cycles, r.Grants))
	errs := strconv.Itoa(r.Errors)
	if r.Errors > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(r.ErrorKinds)) {
			kinds = append(kinds, fmt.Sprintf("%d %s", r.ErrorKinds[k], k))
		}
		errs = pal.warn.Render(errs) + " (" + strings.Join(kinds, ", ") + "); first: " + printableText(oneLine(r.FirstError))
	}
	line("errors", errs+boundNote(p.MaxErrors >= 0, strconv.Itoa(p.MaxErrors)))
	lost := strconv.Itoa(r.Lost())
	if r.Lost() > 0 {
		var what []string
		if r.LostGrants > 0 {
			what = append(what, countOf(r.LostGrants, "grant", "grants")+" (release said notheld)")
		}
		if n := len(r.LostReleases); n > 0 {
			what = append(what, countOf(n, "release", "releases")+" (answered ok, then still held on the active)")
		}
		lost = pal.warn.Render(lost) + ": " + strings.Join(what, ", ")
	}
	if r.Unchecked > 0 {
		lost += fmt.Sprintf("; %s could not be asked about at the end", countOf(r.Unchecked, "key", "keys"))
	}
	line("lost", lost+boundNote(p.MaxLost >= 0, strconv.Itoa(p.MaxLost)))
	if r.InDoubt > 0 {
		line("in doubt", countOf(r.InDoubt, "release", "releases")+" in flight during the action came back notheld: "+
			"applied by the old active and answered too late, or their grants were lost (not counted as lost)")
	}
	if n := len(r.Ghosts); n > 0 {
		line("ghosts", pal.warn.Render(countOf(n, "key", "keys"))+" held by a grant no worker received: its answer was lost, "+
			"and the acquire sent again waited behind it")
	}
	if h, ok := r.LongestStall(); ok {
		freed := "released at " + shortDuration(h.FreedAt)
		if h.Ghost {
			freed = "freed at " + shortDuration(h.FreedAt)
		}
		until := "still held at the drill's end"
		if h.Regranted {
			until = "granted again at " + shortDuration(h.FreedAt+h.Stall)
		}
		line("stall", fmt.Sprintf("%s on key %s by a %s: %s, %s", pal.strong.Render(shortDuration(h.Stall)),
			printable(h.Key), h.Cause(), freed, until))
	}
	line("gap", fmt.Sprintf("%s without a grant, from %s to %s%s", pal.strong.Render(shortDuration(r.Gap)),
		shortDuration(r.GapFrom), shortDuration(r.GapTo), boundNote(p.MaxGap >= 0, p.MaxGap.String())))
	if p.Action != drill.ActionNone && r.ActionOK {
		switch {
		case r.TookOver:
			line("takeover", pal.strong.Render(shortDuration(r.Takeover))+" from the last grant by the old active to the first by the new one")
		case r.RemovedActive(p):
			line("takeover", pal.bad.Render("none")+": no new active granted a lock after the action removed the active")
		default:
			line("takeover", "none: no new active granted a lock during the drill")
		}
	}
	if r.ViolationCount == 0 {
		line("fencing", pal.good.Render("ok"))
	} else {
		label := "fencing"
		for _, v := range r.Violations {
			line(label, pal.bad.Render(fmt.Sprintf("VIOLATED key %s: %d after %d", printable(v.Key), v.Token, v.After))+
				fmt.Sprintf(" (granted at %s, %s after it)", shortDuration(v.At), shortDuration(v.At-v.AfterAt)))
			label = ""
		}
		if more := r.ViolationCount - len(r.Violations); more > 0 {
			line("", fmt.Sprintf("and %d more", more))
		}
	}
	if len(r.Failures) == 0 {
		line("result", pal.good.Render("PASS"))
	} else {
		line("result", pal.bad.Render("FAIL")+": "+printableText(strings.Join(r.Failures, "; ")))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func boundNote(set bool, bound string) string {
	if !set {
		return ""
	}
	return " (limit " + bound + ")"
}

// nameOrNone is a node address as printed, or "none" when there is none.
func nameOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return printable(s)
}
