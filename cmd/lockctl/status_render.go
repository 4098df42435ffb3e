package main

// How status draws the cluster for a person and for a pipe.

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lockd-io/lockd/cmd/internal/survey"
)

// renderStatus draws the view: for a person, the active marked (and
// green), a summary line under the table; plain, one line per node, the
// ROLE column saying which is active. Wide adds each node's replication
// position, keys and waiters, as it reports them.
func renderStatus(w io.Writer, v survey.View, s renderStyle) error {
	p := newPalette(w, s.Color)
	t := grid{header: []string{"NODE", "PRIO", "ROLE", "REACHABLE", "LAG", "TOKEN", "UPTIME"},
		shrink: []int{0, 2}}
	if s.Wide {
		t.header = append(t.header, "SEQ", "KEYS", "WAITERS", "DURABILITY")
	}
	if s.Table {
		t.header = append([]string{""}, t.header...)
		t.shrink = []int{1, 3}
	}
	claims := make(map[string]bool)
	for _, a := range v.Claims {
		claims[a] = true
	}
	for _, n := range v.Nodes {
		// Escaped before anything measures them.
		addr, role := printable(n.Addr), printable(n.Role)
		if n.Sticky && !s.Table {
			// A person reads it in the summary line, in words.
			role += ",sticky"
		}
		if n.Degraded && !s.Table {
			role += ",degraded"
		}
		active := claims[n.Addr] || (len(v.Claims) == 0 && n.Addr == v.Active)
		reach := "yes"
		if !n.Reachable {
			reach = "no"
		}
		prio, lag, token, uptime := cellNone, cellNone, cellNone, cellNone
		if n.Priority > 0 {
			prio = strconv.Itoa(n.Priority)
		}
		if n.HasLag {
			lag = strconv.FormatUint(n.Lag, 10)
		}
		if n.HasToken {
			token = strconv.FormatUint(n.Token, 10)
		}
		if n.HasUptime {
			uptime = humanDuration(n.Uptime)
		}
		cells := []string{addr, prio, role, reach, lag, token, uptime}
		if s.Wide {
			seq, keys, waiters, dur := cellNone, cellNone, cellNone, cellNone
			if n.Reachable {
				seq, keys, waiters = strconv.FormatUint(n.Seq, 10), strconv.Itoa(n.Keys), strconv.Itoa(n.Waiters)
				dur = durabilityCell(n.Durability)
			}
			cells = append(cells, seq, keys, waiters, dur)
		}
		paint := make([]func(string) string, len(cells))
		nodeStyle := func(st style) func(string) string { return func(c string) string { return st.Render(c) } }
		switch {
		case active && len(v.Claims) > 1:
			paint[0], paint[2] = nodeStyle(p.bad), nodeStyle(p.bad)
		case active:
			paint[0], paint[2] = nodeStyle(p.good), nodeStyle(p.good)
		case !n.Reachable && (n.Role == survey.RoleDown || n.Role == survey.RoleUnresponsive):
			paint[2] = nodeStyle(p.bad)
		}
		if !n.Reachable {
			paint[3] = nodeStyle(p.bad)
		}
		if n.HasLag {
			paint[4] = nodeStyle(p.good)
			if n.Lag > 0 {
				paint[4] = nodeStyle(p.warn)
			}
		}
		paint[6] = nodeStyle(p.faint)
		if s.Table {
			marker := ""
			if active {
				marker = s.bullet()
			}
			cells = append([]string{marker}, cells...)
			paint = append([]func(string) string{paint[0]}, paint...)
		}
		t.add(cells, paint...)
	}
	if err := t.draw(w, s, p); err != nil || !s.Table {
		return err
	}
	_, err := io.WriteString(w, statusSummary(v, p, s))
	return err
}

// statusSummary is the line under the table that answers "is all well?".
func statusSummary(v survey.View, p *palette, s renderStyle) string {
	var parts []string
	switch {
	case len(v.Claims) > 1:
		claims := make([]string, len(v.Claims))
		for i, a := range v.Claims {
			claims[i] = printable(a)
		}
		parts = append(parts, p.bad.Render(fmt.Sprintf("%d nodes claim the active role (%s)",
			len(v.Claims), strings.Join(claims, ", ")))+
			": a partition is healing; the lower-priority one steps down on its own")
	case v.Active == "" && v.Silent != "":
		parts = append(parts, p.bad.Render("the active "+printable(v.Silent)+" does not answer")+
			" (frozen or overloaded): a standby takes over after the nodes' --failure-timeout")
	case v.Active == "":
		parts = append(parts, p.bad.Render("no active node")+": lock requests wait until one is promoted")
	case len(v.Claims) == 0:
		parts = append(parts, "active "+p.strong.Render(printable(v.Active))+" (as its peers say; lockctl could not reach it)")
	default:
		parts = append(parts, "active "+p.good.Render(printable(v.Active)))
	}
	reachable, standbys, known := 0, 0, 0
	var behind []string
	for _, n := range v.Nodes {
		if n.Reachable {
			reachable++
		}
		if n.Addr == v.Active || n.Role == survey.RoleDown || n.Role == survey.RoleUnresponsive {
			continue
		}
		standbys++
		if n.HasLag {
			known++
			if n.Lag > 0 {
				behind = append(behind, fmt.Sprintf("%s by %d", printable(n.Addr), n.Lag))
			}
		}
	}
	parts = append(parts, fmt.Sprintf("%d of %d nodes reachable", reachable, len(v.Nodes)))
	mode, degraded := "", false // the active's replication
	for _, n := range v.Nodes {
		if n.Addr == v.Active {
			mode, degraded = n.Replication, n.Degraded
		}
	}
	var sticky []string
	for _, n := range v.Nodes {
		if n.Sticky {
			sticky = append(sticky, printable(n.Addr))
		}
	}
	if len(sticky) > 0 {
		parts = append(parts, "sticky (gave the role up by hand): "+strings.Join(sticky, ", "))
	}
	switch {
	case len(behind) > 0:
		parts = append(parts, p.warn.Render("behind: "+strings.Join(behind, ", ")))
	case v.Active != "" && standbys > 0 && known == standbys:
		// Caught up with an active: without one, a standby's lag of 0
		// says nothing anyone can take over from.
		caught := "standbys caught up"
		if mode != "" && !degraded {
			caught += " (" + mode + ")"
		}
		parts = append(parts, caught)
	}
	if degraded {
		parts = append(parts, p.warn.Render("replication degraded")+": no standby in sync, a crash of the active may lose its last answers")
	}
	if d := durabilitySummary(v); d != "" {
		parts = append(parts, d)
	}
	return summaryLine(parts, s)
}

// durabilityWords is a node's durability for a person: "memory", or
// "disk fsync=MODE".
func durabilityWords(d string) string {
	if mode, ok := strings.CutPrefix(d, "disk:"); ok {
		return "disk fsync=" + printable(mode)
	}
	if d == "" {
		return cellNone
	}
	return printable(d)
}

// durabilityCell is a node's durability in one word: memory, or its
// data directory's fsync mode (fsync=MODE).
func durabilityCell(d string) string {
	if mode, ok := strings.CutPrefix(d, "disk:"); ok {
		return "fsync=" + printable(mode)
	}
	if d == "" {
		return cellNone
	}
	return printable(d)
}

// durabilitySummary says what the reachable nodes keep across a restart:
// one phrase when they agree, each node's words when they differ.
func durabilitySummary(v survey.View) string {
	seen := map[string][]string{}
	var order []string
	for _, n := range v.Nodes {
		if !n.Reachable || n.Durability == "" {
			continue
		}
		if seen[n.Durability] == nil {
			order = append(order, n.Durability)
		}
		seen[n.Durability] = append(seen[n.Durability], printable(n.Addr))
	}
	switch len(order) {
	case 0:
		return ""
	case 1:
		if order[0] == "memory" {
			return "state in memory (no --data-dir: a restart loses the locks)"
		}
		return "state on " + durabilityWords(order[0])
	}
	var parts []string
	for _, d := range order {
		w := "on " + durabilityWords(d)
		if d == "memory" {
			w = "in memory only"
		}
		parts = append(parts, w+": "+strings.Join(seen[d], ", "))
	}
	return "state " + strings.Join(parts, "; ")
}
