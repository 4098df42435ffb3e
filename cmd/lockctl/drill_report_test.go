package main

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cmd/internal/drill"
)

// drill --report writes a page a browser shows: a real drill (a handoff
// on a three-node cluster) rendered by headless Chromium, whose DOM holds
// the marks of the action, the gap and the takeover and a lane of grants
// for each of the two actives, and whose screenshot shows the three marks
// in their colours.
func TestDrillReportInABrowser(t *testing.T) {
	chromium := needChromium(t)
	tc := startCluster(t, 3)
	report := filepath.Join(t.TempDir(), "drill.html")
	code, stdout, stderr := lockctl(t, "--addr", tc.addrList(), "drill", "--workers", "4", "--keys", "8",
		"--duration", "3s", "--at", "1s", "--expect-failover", "--report", report)
	if code != 0 {
		t.Fatalf("drill: exit %d\n%s%s", code, stdout, stderr)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	before, after := tc.addrs[0], drillLine(stdout, "active")
	if !strings.Contains(string(page), `data-node="`+before+`"`) {
		t.Errorf("the report has no lane for the active before, %s", before)
	}

	dom := runChromium(t, chromium, "--dump-dom", "file://"+report)
	for _, want := range []string{`data-mark="action"`, `data-mark="gap"`, `data-mark="takeover"`, `data-mark="verdict"`, `data-lane="grants"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page Chromium loaded has no %s", want)
		}
	}
	if !strings.Contains(dom, ">PASS</span>") {
		t.Errorf("the page does not say PASS")
	}
	t.Logf("drill: %s; the page is %d bytes", after, len(page))

	shot := filepath.Join(t.TempDir(), "drill.png")
	runChromium(t, chromium, "--screenshot="+shot, "--window-size=1200,1000", "--hide-scrollbars", "file://"+report)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	for name, color := range map[string]string{"action": colorAction, "gap": colorGap, "takeover": colorTakeover} {
		if n := pixelsOf(img, color); n < 40 {
			t.Errorf("the screenshot shows %d pixels of the %s mark's colour %s, want a mark of 4x14 at least", n, name, color)
		}
	}
}

// The report escapes what it quotes (keys, commands, addresses, errors),
// and a failed drill says FAIL and why.
func TestDrillReportEscapesAndSaysWhy(t *testing.T) {
	p := drill.Plan{Workers: 2, Keys: 2, Lease: 5 * time.Second, Duration: 2 * time.Second, At: time.Second,
		Action: drill.ActionRun, Command: `kill -9 $(cat <a.pid>)`, MaxLost: 0}
	r := &drill.Report{Start: time.Unix(0, 0), ActiveBefore: "10.0.0.1:7070", ActiveAfter: "10.0.0.2:7070",
		ActionAt: time.Second, ActionEnd: 1100 * time.Millisecond, ActionOK: true, ActionDetail: "command exited 0",
		Grants: 3, Cycles: 2, Errors: 1, ErrorKinds: map[string]int{"unavailable": 1},
		ErrorsAt:   []drill.ErrorEvent{{At: 1050 * time.Millisecond, Kind: "unavailable"}},
		FirstError: "no node <b>", LostGrants: 1, LostAt: []drill.Span{{From: 1500 * time.Millisecond, To: 1510 * time.Millisecond}},
		Gap: 400 * time.Millisecond, GapFrom: 900 * time.Millisecond, GapTo: 1300 * time.Millisecond,
		TookOver: true, TakeoverFrom: 900 * time.Millisecond, Takeover: 400 * time.Millisecond,
		Timeline:   []drill.Grant{{At: 100 * time.Millisecond, Token: 1 << 40}, {At: 900 * time.Millisecond, Token: 1<<40 + 1}, {At: 1300 * time.Millisecond, Token: 2 << 40}},
		Violations: []drill.FenceViolation{{Key: "<k>", Token: 5, At: 1400 * time.Millisecond, After: 6}}, ViolationCount: 1,
		Failures: []string{"lost 1 (1 grant, 0 releases) is over --max-lost 0"}}
	var b bytes.Buffer
	if err := writeDrillReport(&b, r, p); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<a.pid>", "<b>", "<k>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	for _, want := range []string{">FAIL</span>", "<li>lost 1 (1 grant, 0 releases) is over --max-lost 0</li>", `data-mark="lost"`,
		`data-mark="error"`, `data-mark="violation"`, `data-node="10.0.0.1:7070"`, `data-node="10.0.0.2:7070"`, "&lt;a.pid&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %q", want)
		}
	}
}

// drillLine is the value of a labelled line of drill's text report.
func drillLine(out, label string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, label+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// needChromium returns Debian's Chromium, installed by scripts/need.sh
// when it is missing; without it the test fails, it does not skip.
func needChromium(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join("..", "..", "scripts", "need.sh"), "chromium").CombinedOutput()
	if err != nil {
		t.Fatalf("this test needs Chromium: %v\n%s", err, out)
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// runChromium runs headless Chromium with a profile of its own and
// without the background connections this machine's network refuses,
// and returns what it printed on stdout. A Chromium that crashes (seen
// now and then on a loaded machine, inside its crash reporter) is started
// again, twice at most: the crash is the browser's, not the page's.
func runChromium(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir()}
		cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return stdout.String()
		case errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() && ctx.Err() == nil && attempt < 3:
			t.Logf("chromium %s crashed (%v); starting it again", strings.Join(args, " "), err)
			continue
		}
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// pixelsOf counts the pixels of img within 3 of the colour #rrggbb in
// each channel.
func pixelsOf(img image.Image, hex string) int {
	v, _ := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	want := [3]int{int(v >> 16 & 0xff), int(v >> 8 & 0xff), int(v & 0xff)}
	near := func(a, b int) bool { return a-b <= 3 && b-a <= 3 }
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if near(int(r>>8), want[0]) && near(int(g>>8), want[1]) && near(int(b>>8), want[2]) {
				n++
			}
		}
	}
	return n
}
