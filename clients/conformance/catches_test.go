package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHarnessCatches runs cases on Go drivers broken on purpose
// (LOCKD_GODRIVER_BREAK, see godriver: through the client's public
// Options where they can break the rule, in the driver's results where
// they cannot), and checks that the cases naming the broken rule fail: a
// suite that passes a client breaking a rule proves nothing.
func TestHarnessCatches(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite's cases in child processes")
	}
	breaks := []struct {
		brk   string
		fails []string
	}{
		{"conns1", []string{"two_conns_single_addr"}},
		{"norelease", []string{"release_resent_200ms_5s", "release_while_down"}},
		{"noredial", []string{"redial_every_3s"}},
		{"deaf", []string{"frozen_node_failure_timeout"}},
		{"fifo", []string{"pipelined_out_of_order"}},
		{"nomove", []string{"acquire_moves_on_drop", "error_only_when_all_tried"}},
		{"nofollow", []string{"follows_moved"}},
		{"noroundrobin", []string{"round_robin"}},
		{"lostrelease", []string{"release_answer_lost"}},
		{"nostale", []string{"watch_stale_current"}},
		{"impatient", []string{"wait_through_outage"}},
		{"anylease", []string{"hold_lease_too_short"}},
		{"quickdisagree", []string{"redirects_while_nodes_settle"}},
		{"textstatus", []string{"status_typed"}},
	}
	for _, b := range breaks {
		t.Run(b.brk, func(t *testing.T) {
			t.Parallel()
			run := "^TestConformance$/^clients$/^go$/^(" + strings.Join(b.fails, "|") + ")$"
			cmd := exec.Command(os.Args[0], "-test.run", run, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(),
				"LOCKD_GODRIVER_BREAK="+b.brk,
				"LOCKD_CONFORMANCE_CLIENTS=go",
				binDirEnv+"="+filepath.Dir(lockdBin))
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a Go driver broken by LOCKD_GODRIVER_BREAK=%s; the cases %v should fail:\n%s", b.brk, b.fails, out)
			}
			for _, name := range b.fails {
				if !regexp.MustCompile(`--- FAIL: TestConformance/clients/go/` + name + ` `).Match(out) {
					t.Errorf("case %s did not fail with LOCKD_GODRIVER_BREAK=%s:\n%s", name, b.brk, out)
				}
			}
		})
	}
}
