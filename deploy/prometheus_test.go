package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The alert rules and the dashboard on a real Prometheus (Debian's)
// scraping a real three-node cluster, every second:
//
//   - a cold start of the three nodes fires nothing, though the node that
//     becomes active counts that as a promotion;
//   - every query of every dashboard panel returns data;
//   - kill -9 of the active fires LockdFailover within its for: plus two
//     scrape intervals of the promotion, on the new active, and it
//     resolves once the failover leaves its one-minute window.
func TestAlertsAndDashboardOnARealPrometheus(t *testing.T) {
	need(t, "prometheus")
	const scrape = time.Second
	addrs := freeAddrs(t, 7)
	nodes, metrics, promAddr := addrs[:3], addrs[3:6], addrs[6]
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join("prometheus", "lockd.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
rule_files: [%[2]q]
scrape_configs:
  - job_name: lockd
    static_configs:
      - targets: ["%[3]s"]
`, scrape, rules, strings.Join(metrics, `", "`))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := &promAPI{base: "http://" + promAddr}
	start(t, "prometheus", "prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr, "--log.level=warn")
	waitFor(t, "prometheus ready", 60*time.Second, 100*time.Millisecond, func() bool {
		code, _, err := httpGet(context.Background(), prom.base+"/-/ready")
		return err == nil && code == 200
	})

	// A cold start, scraped from its first second.
	peers := strings.Join(nodes, ",")
	lockd := filepath.Join(binDir, "lockd")
	lockctl := filepath.Join(binDir, "lockctl")
	procs := make([]*proc, 3)
	coldStart := time.Now()
	for i := range nodes {
		procs[i] = start(t, fmt.Sprintf("lockd-%d", i+1), lockd, "--listen", nodes[i], "--peers", peers,
			"--metrics-listen", metrics[i], "--log-level", "warn")
	}
	run(t, "", nil, lockctl, "--addr", peers, "status", "--wait-active", nodes[0])
	// Lock traffic for the dashboard's rates, and a lock held.
	run(t, "", nil, lockctl, "--addr", peers, "bench", "--workers", "4", "--duration", "2s")
	run(t, "", nil, lockctl, "--addr", peers, "acquire", "--key", "held", "--lease", "10m")
	waitFor(t, "prometheus scraping the three nodes", 30*time.Second, 200*time.Millisecond, func() bool {
		v, err := prom.query(`sum(up{job="lockd"})`)
		return err == nil && len(v) == 1 && v[0].Value[1] == "3"
	})
	// Long enough for every rule to see the start in its window several
	// times over; rules with a longer for: than this cannot fire in it.
	for time.Since(coldStart) < 20*time.Second {
		alerts, err := prom.alerts()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if a.State == "firing" || a.Labels["alertname"] == "LockdFailover" {
				t.Fatalf("a cold start of three nodes %s %s (%v)", a.State, a.Labels["alertname"], a.Labels)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}

	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, prom) })

	// kill -9 of the active; a standby takes over.
	procs[0].kill()
	var promoted time.Time
	var newActive string
	waitFor(t, "a standby promoted", 30*time.Second, 20*time.Millisecond, func() bool {
		for i := 1; i < 3; i++ {
			code, body, err := httpGet(context.Background(), "http://"+metrics[i]+"/readyz")
			if err == nil && code == 200 && strings.HasPrefix(string(body), "ready: active") {
				promoted, newActive = time.Now(), metrics[i]
				return true
			}
		}
		return false
	})
	// The failover alert fires within its for: (none) plus two scrape
	// intervals: one for the scrape that sees the promotion, one for the
	// evaluation after it.
	const forDuration = 0
	var fired alert
	waitFor(t, "LockdFailover firing", 30*time.Second, 200*time.Millisecond, func() bool {
		alerts, err := prom.alerts()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == "LockdFailover" && a.State == "firing" {
				fired = a
				return true
			}
		}
		return false
	})
	if fired.Labels["instance"] != newActive {
		t.Errorf("LockdFailover fired on %s, want the new active %s", fired.Labels["instance"], newActive)
	}
	if late := fired.ActiveAt.Sub(promoted); late > forDuration+2*scrape {
		t.Errorf("LockdFailover fired %s after the promotion was seen: more than its for: plus two scrape intervals (%s)", late, forDuration+2*scrape)
	}
	t.Logf("promoted %s; LockdFailover active %s after", newActive, fired.ActiveAt.Sub(promoted).Round(time.Millisecond))

	// It resolves once the promotion leaves the rule's one-minute window.
	waitFor(t, "LockdFailover resolved", 90*time.Second, time.Second, func() bool {
		alerts, err := prom.alerts()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == "LockdFailover" {
				return false
			}
		}
		return true
	})
	if took := time.Since(promoted); took > time.Minute+10*scrape {
		t.Errorf("LockdFailover resolved %s after the promotion: past its minute", took)
	}
}

// checkDashboard runs the query of every target of every panel of the
// dashboard, as Grafana would with the job variable set to lockd, and
// wants data from each.
func checkDashboard(t *testing.T, prom *promAPI) {
	b, err := os.ReadFile(filepath.Join("grafana", "lockd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana/lockd.json: %v", err)
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			q := strings.NewReplacer(`$job`, "lockd", `$__rate_interval`, "15s").Replace(target.Expr)
			v, err := prom.query(q)
			switch {
			case err != nil:
				t.Errorf("panel %q: %s: %v", p.Title, q, err)
			case len(v) == 0:
				t.Errorf("panel %q: %s: no data", p.Title, q)
			}
			queries++
		}
	}
	t.Logf("%d panels, %d queries", len(dash.Panels), queries)
}

// promAPI is the little of Prometheus's HTTP API the test needs.
type promAPI struct{ base string }

type alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (p *promAPI) get(path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, body, err := httpGet(ctx, p.base+path)
	if err != nil {
		return err
	}
	var resp struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("HTTP %d: %v: %s", code, err, body)
	}
	if resp.Status != "success" {
		return fmt.Errorf("HTTP %d: %s", code, resp.Error)
	}
	return json.Unmarshal(resp.Data, out)
}

func (p *promAPI) alerts() ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	err := p.get("/api/v1/alerts", &data)
	return data.Alerts, err
}

func (p *promAPI) query(q string) ([]sample, error) {
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []sample `json:"result"`
	}
	err := p.get("/api/v1/query?query="+url.QueryEscape(q), &data)
	return data.Result, err
}
