package main

// drill --report: the drill as a page a person looks at, one HTML file
// with nothing to fetch (inline CSS and SVG, no script), fit to attach to
// a CI run. A timeline shows the grants per node over time (the node
// that granted is told by the token's epoch: the active before the drill
// has the first, the active after it the last), the action, the longest
// time without a grant, the takeover, the errors and the releases in
// doubt or lost, and the fencing violations; a second one zooms on the
// action. The verdict and the text report follow.
//
// Every mark is an element with a data-mark attribute (action, gap,
// takeover, error, in-doubt, lost, violation), in a colour of its own, so
// that a test, or a person with a DOM inspector, finds it.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lockd-io/lockd/cmd/internal/drill"
	"github.com/lockd-io/lockd/engine"
)

// Colours of the marks: solid, and distinct from the lanes' bars.
const (
	colorAction   = "#1565c0"
	colorGap      = "#e65100"
	colorTakeover = "#6a1b9a"
	colorError    = "#c62828"
	colorInDoubt  = "#f9a825"
	colorPass     = "#2e7d32"
)

// laneColors are the bars of the nodes' lanes, in the order the nodes
// first granted.
var laneColors = []string{"#455a64", "#00897b", "#8d6e63", "#5c6bc0", "#7cb342"}

// writeDrillReport writes the HTML report of a drill.
func writeDrillReport(w io.Writer, r *drill.Report, p drill.Plan) error {
	var b strings.Builder
	verdict, verdictColor := "PASS", colorPass
	if len(r.Failures) > 0 {
		verdict, verdictColor = "FAIL", colorError
	}
	fmt.Fprintf(&b, `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>lockd drill: %s</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #212121; }
h1 { font-size: 20px; margin: 0 0 4px; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 4px; color: #fff; font-weight: bold; }
ul.failures { color: %s; }
svg { display: block; margin: 12px 0 4px; }
svg text { font: 12px system-ui, sans-serif; fill: #212121; }
.legend span { display: inline-block; margin-right: 16px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
pre { background: #f5f5f5; padding: 12px; overflow-x: auto; }
</style></head><body>
`, verdict, colorError)
	fmt.Fprintf(&b, "<h1>lockd failover drill <span class=\"verdict\" data-mark=\"verdict\" style=\"background:%s\">%s</span></h1>\n", verdictColor, verdict)
	fmt.Fprintf(&b, "<p>%s; %s. Active %s.</p>\n", htmlEscape(planWords(p)), htmlEscape(r.Start.UTC().Format(time.RFC3339)), htmlEscape(activeWords(r)))
	if len(r.Failures) > 0 {
		b.WriteString("<ul class=\"failures\">\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "<li>%s</li>\n", htmlEscape(oneLine(f)))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString(`<p class="legend">`)
	for _, l := range [][2]string{{colorAction, "action"}, {colorGap, "longest gap without a grant"}, {colorTakeover, "takeover: last grant by the old active to the first by the new"},
		{colorError, "errors, lost grants, fencing violations"}, {colorInDoubt, "releases in doubt"}} {
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s</span>`, l[0], htmlEscape(l[1]))
	}
	b.WriteString("</p>\n")
	end := p.Duration
	b.WriteString(timelineSVG(r, p, 0, end, "the whole drill"))
	if from, to, ok := zoomWindow(r, p); ok {
		b.WriteString(timelineSVG(r, p, from, to, "around the action"))
	}
	var text strings.Builder
	if err := renderDrill(&text, r, p, false); err != nil {
		return err
	}
	fmt.Fprintf(&b, "<pre>%s</pre>\n</body></html>\n", htmlEscape(text.String()))
	_, err := io.WriteString(w, b.String())
	return err
}

// planWords is the drill's plan in a line.
func planWords(p drill.Plan) string {
	action := p.Action + " at " + p.At.String()
	switch p.Action {
	case drill.ActionNone:
		action = "no action"
	case drill.ActionRun:
		action = fmt.Sprintf("command at %s: %s", p.At, p.Command)
	}
	return fmt.Sprintf("%s, %s, %s, %s", countOf(p.Workers, "worker", "workers"), countOf(p.Keys, "key", "keys"), p.Duration, action)
}

func activeWords(r *drill.Report) string {
	if r.ActiveBefore == r.ActiveAfter {
		return nameOrNone(r.ActiveBefore) + ", unchanged"
	}
	return nameOrNone(r.ActiveBefore) + " before, " + nameOrNone(r.ActiveAfter) + " after"
}

// zoomWindow is the time around the action, its gap and its takeover,
// when the drill took one and that time is a small part of the drill.
func zoomWindow(r *drill.Report, p drill.Plan) (from, to time.Duration, ok bool) {
	if p.Action == drill.ActionNone || r.ActionEnd == 0 {
		return 0, 0, false
	}
	lo, hi := r.ActionAt, r.ActionEnd
	if r.GapTo > 0 && r.GapFrom >= r.ActionAt-time.Second {
		lo, hi = min(lo, r.GapFrom), max(hi, r.GapTo)
	}
	if r.TookOver {
		lo, hi = min(lo, r.TakeoverFrom), max(hi, r.TakeoverFrom+r.Takeover)
	}
	pad := max((hi-lo)/4, 50*time.Millisecond)
	from, to = max(lo-pad, 0), min(hi+pad, p.Duration)
	return from, to, to-from < p.Duration/2
}

// lane is the grants of one token epoch: one node's time as the active.
type lane struct {
	epoch  uint64
	label  string
	grants []time.Duration
}

// lanesOf sorts the grants by the epoch of their token, in the order the
// epochs first granted, and names each after its node where the drill
// knows it: the first epoch is the active before the drill's, the last
// the active after it.
func lanesOf(r *drill.Report) []*lane {
	var lanes []*lane
	byEpoch := make(map[uint64]*lane)
	for _, g := range r.Timeline {
		e := g.Token >> engine.CounterBits
		l := byEpoch[e]
		if l == nil {
			l = &lane{epoch: e}
			byEpoch[e] = l
			lanes = append(lanes, l)
		}
		l.grants = append(l.grants, g.At)
	}
	for i, l := range lanes {
		switch {
		case i == 0 && r.ActiveBefore != "":
			l.label = r.ActiveBefore
		case i == len(lanes)-1 && r.ActiveAfter != "":
			l.label = r.ActiveAfter
		default:
			l.label = fmt.Sprintf("epoch %d", l.epoch)
		}
	}
	return lanes
}

// timelineSVG draws the drill from from to to: a lane of grants per
// node, a lane of errors, a lane of releases answered notheld, fencing
// violations, and the marks of the action, the gap and the takeover.
func timelineSVG(r *drill.Report, p drill.Plan, from, to time.Duration, title string) string {
	const (
		width, left, right = 1100, 200, 20
		laneH, laneGap     = 34, 6
		markH              = 14
	)
	plot := float64(width - left - right)
	span := float64(max(to-from, time.Millisecond))
	x := func(t time.Duration) float64 { return float64(left) + float64(t-from)/span*plot }
	// A mark is at least 4 pixels wide, so that a gap of a millisecond on
	// a ten-second line can still be seen (and clicked for its title).
	band := func(a, z time.Duration) (float64, float64) {
		x0, x1 := x(max(a, from)), x(min(z, to))
		if x1-x0 < 4 {
			mid := (x0 + x1) / 2
			x0, x1 = mid-2, mid+2
		}
		return x0, x1 - x0
	}
	in := func(t time.Duration) bool { return t >= from && t <= to }
	lanes := lanesOf(r)
	bins := int(plot / 3)
	binOf := func(t time.Duration) int { return min(int(float64(t-from)/span*float64(bins)), bins-1) }

	var b strings.Builder
	y := 0
	marksTop := 20
	rows := []string{"action", "gap", "takeover"}
	lanesTop := marksTop + len(rows)*(markH+4) + 6
	height := lanesTop + (len(lanes)+3)*(laneH+laneGap) + 30
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="timeline, %s">`+"\n",
		width, height, width, height, htmlEscape(title))
	fmt.Fprintf(&b, `<text x="0" y="14" font-weight="bold">%s (%s to %s)</text>`+"\n", htmlEscape(title), shortDuration(from), shortDuration(to))

	// The marks, a row each, and a light band of each across the lanes.
	y = marksTop
	lanesBottom := lanesTop + (len(lanes)+3)*(laneH+laneGap)
	mark := func(name, color, label string, a, z time.Duration, ok bool) {
		fmt.Fprintf(&b, `<text x="0" y="%d">%s</text>`+"\n", y+markH-3, name)
		if ok && z >= from && a <= to {
			x0, w := band(a, z)
			fmt.Fprintf(&b, `<rect data-mark="%s" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				name, x0, y, w, markH, color, htmlEscape(label))
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.12"/>`+"\n",
				x0, lanesTop, w, lanesBottom-lanesTop, color)
			// The label goes right of the mark, or left of it when it
			// would run past the edge (about 7 pixels a character).
			lx, anchor := x0+w+4, "start"
			if lx+7*float64(len(label)) > width && x0-4-7*float64(len(label)) >= left {
				lx, anchor = x0-4, "end"
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="%s" text-anchor="%s">%s</text>`+"\n", lx, y+markH-3, color, anchor, htmlEscape(label))
		}
		y += markH + 4
	}
	actionName := p.Action
	if p.Action == drill.ActionRun {
		actionName = "command"
	}
	mark("action", colorAction, fmt.Sprintf("%s at %s, took %s: %s", actionName, shortDuration(r.ActionAt), shortDuration(r.ActionEnd-r.ActionAt), oneLine(r.ActionDetail)),
		r.ActionAt, r.ActionEnd, p.Action != drill.ActionNone && r.ActionEnd > 0)
	mark("gap", colorGap, fmt.Sprintf("gap %s without a grant, %s to %s", shortDuration(r.Gap), shortDuration(r.GapFrom), shortDuration(r.GapTo)),
		r.GapFrom, r.GapTo, r.Gap > 0)
	mark("takeover", colorTakeover, fmt.Sprintf("takeover %s: last grant by the old active at %s, first by the new at %s",
		shortDuration(r.Takeover), shortDuration(r.TakeoverFrom), shortDuration(r.TakeoverFrom+r.Takeover)),
		r.TakeoverFrom, r.TakeoverFrom+r.Takeover, r.TookOver)

	// Grants per node: bars of grants per bin, scaled to the busiest bin
	// of any lane.
	counts := make([][]int, len(lanes))
	peak := 1
	for i, l := range lanes {
		counts[i] = make([]int, bins)
		for _, t := range l.grants {
			if in(t) {
				counts[i][binOf(t)]++
				peak = max(peak, counts[i][binOf(t)])
			}
		}
	}
	y = lanesTop
	binW := plot / float64(bins)
	for i, l := range lanes {
		color := laneColors[i%len(laneColors)]
		fmt.Fprintf(&b, `<g data-lane="grants" data-node="%s">`+"\n", htmlEscape(l.label))
		fmt.Fprintf(&b, `<text x="0" y="%d">%s</text>`+"\n", y+14, htmlEscape(truncateWidth(l.label, 28)))
		fmt.Fprintf(&b, `<text x="0" y="%d" fill="#757575">%s</text>`+"\n", y+29, htmlEscape(countOf(len(l.grants), "grant", "grants")))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%d" fill="#fafafa" stroke="#e0e0e0"/>`+"\n", left, y, plot, laneH)
		for k, n := range counts[i] {
			if n == 0 {
				continue
			}
			h := max(float64(n)/float64(peak)*float64(laneH-2), 1.5)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, float64(left)+float64(k)*binW, float64(y+laneH)-h, binW, h, color)
		}
		b.WriteString("\n</g>\n")
		y += laneH + laneGap
	}

	// Errors, releases in doubt and lost grants, violations: a tick each
	// (one per bin, the count in its title).
	ticks := func(name, label string, events []time.Duration, color, kind string) {
		fmt.Fprintf(&b, `<g data-lane="%s">`+"\n", name)
		fmt.Fprintf(&b, `<text x="0" y="%d">%s</text>`+"\n", y+laneH/2+4, label)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%d" fill="#fafafa" stroke="#e0e0e0"/>`+"\n", left, y, plot, laneH)
		perBin := make(map[int]int)
		var order []int
		for _, t := range events {
			if !in(t) {
				continue
			}
			k := binOf(t)
			if perBin[k] == 0 {
				order = append(order, k)
			}
			perBin[k]++
		}
		for _, k := range order {
			fmt.Fprintf(&b, `<rect data-mark="%s" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`,
				kind, float64(left)+float64(k)*binW, y+4, max(binW, 2), laneH-8, color, htmlEscape(countOf(perBin[k], kind, kind+"s")))
		}
		b.WriteString("\n</g>\n")
		y += laneH + laneGap
	}
	var errs []time.Duration
	for _, e := range r.ErrorsAt {
		errs = append(errs, e.At)
	}
	ticks("errors", htmlEscape(countOf(r.Errors, "error", "errors")), errs, colorError, "error")
	var doubt, lost []time.Duration
	for _, s := range r.InDoubtAt {
		doubt = append(doubt, s.To)
	}
	for _, s := range r.LostAt {
		lost = append(lost, s.To)
	}
	fmt.Fprintf(&b, `<g data-lane="releases">`)
	ticksY := y
	ticks("in-doubt", fmt.Sprintf("%d in doubt, %d lost", len(doubt), len(lost)), doubt, colorInDoubt, "in-doubt")
	y = ticksY
	for _, t := range lost {
		if in(t) {
			fmt.Fprintf(&b, `<rect data-mark="lost" x="%.1f" y="%d" width="3" height="%d" fill="%s"><title>a lost grant: its release said notheld</title></rect>`,
				x(t), y+4, laneH-8, colorError)
		}
	}
	b.WriteString("</g>\n")
	y += laneH + laneGap
	violations := slices.Clone(r.Violations)
	fmt.Fprintf(&b, `<text x="0" y="%d">%s</text>`+"\n", y+laneH/2+4, htmlEscape(countOf(r.ViolationCount, "fencing violation", "fencing violations")))
	for _, v := range violations {
		if in(v.At) {
			cx, cy := x(v.At), float64(y+laneH/2)
			fmt.Fprintf(&b, `<path data-mark="violation" d="M%.1f %.1fl6 6l-6 6l-6 -6z" fill="%s"><title>%s</title></path>`,
				cx, cy-6, colorError, htmlEscape(fmt.Sprintf("key %s got token %d after %d", v.Key, v.Token, v.After)))
		}
	}
	y += laneH + laneGap

	// The time axis.
	step := axisStep(to - from)
	for t := (from + step - 1) / step * step; t <= to; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#bdbdbd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			x(t), lanesTop-4, x(t), y, x(t), y+16, shortDuration(t))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// axisStep is a round interval giving five to twelve ticks over d.
func axisStep(d time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
		5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute} {
		if d/s <= 12 {
			return s
		}
	}
	return 10 * time.Minute
}

// htmlEscape makes text safe inside an element or a quoted attribute.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}
