package lockd_test

// Three lockd processes of one --peers list started together, as a deploy
// of the whole cluster starts them: exactly one of them takes the role.

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Twenty cold starts of three nodes: in each, exactly one node promotes
// itself (lockd_promotions_total sums to 1 over the nodes: an alert on
// promotions stays quiet at a deploy), none is ever demoted, and the
// cluster settles with the first node active and the others following it.
func TestColdStartOneActive(t *testing.T) {
	starts := 20
	if testing.Short() {
		starts = 5
	}
	for i := range starts {
		addrs := freeAddrs(t, 6)
		nodes, metrics := addrs[:3], addrs[3:]
		peers := strings.Join(nodes, ",")
		procs := make([]*lockdProc, 3)
		for j := range nodes {
			procs[j] = newLockdProc(t, nodes[j], "--peers", peers, "--heartbeat", "50ms", "--failure-timeout", "500ms", "--metrics-listen", metrics[j])
		}
		waitStatus(t, nodes[0], " role=active ", 10*time.Second)
		waitStatus(t, nodes[1], " role=standby active="+nodes[0]+" ", 10*time.Second)
		waitStatus(t, nodes[2], " role=standby active="+nodes[0]+" ", 10*time.Second)
		total := 0
		for j, m := range metrics {
			n := scrapeCounter(t, "http://"+m+"/metrics", "lockd_promotions_total")
			total += n
			if j > 0 && n > 0 {
				t.Errorf("start %d: node %s promoted itself %d times", i, nodes[j], n)
			}
		}
		for _, p := range procs {
			p.kill()
			if log := p.out.String(); strings.Contains(log, "msg=demoted") {
				t.Errorf("start %d: a node was demoted, so two were active:\n%s", i, log)
			}
		}
		if total != 1 {
			t.Fatalf("start %d: lockd_promotions_total sums to %d over the three nodes, want 1", i, total)
		}
	}
}

// scrapeCounter reads a counter's value from a Prometheus text page.
func scrapeCounter(t *testing.T, url, name string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q", url, line)
			}
			return int(n)
		}
	}
	t.Fatalf("%s has no %s", url, name)
	return 0
}
