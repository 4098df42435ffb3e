package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Every alert of the rules has a unit test that sees it fire (a test
// case with exp_alerts not empty), so a new rule cannot ship untested.
// promtool itself checks what the tests say.
func TestEveryAlertHasAUnitTest(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join("prometheus", "lockd.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("prometheus", "lockd.rules.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)$`).FindAllSubmatch(rules, -1)
	if len(alerts) == 0 {
		t.Fatal("no alert in lockd.rules.yml")
	}
	fired := make(map[string]bool)
	for _, m := range regexp.MustCompile(`(?m)^\s*alertname: (\w+)\n\s*exp_alerts:\n\s*- exp_labels`).FindAllSubmatch(tests, -1) {
		fired[string(m[1])] = true
	}
	for _, a := range alerts {
		if !fired[string(a[1])] {
			t.Errorf("alert %s has no unit test that sees it fire in lockd.rules.test.yml", a[1])
		}
	}
}
