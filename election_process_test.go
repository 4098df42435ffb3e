package lockd_test

// An election of three candidate processes on one lockd node: this test
// binary re-run as a candidate (see init), killed with kill -9 as a
// crashed leader would be.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// envCandidate makes this binary a candidate: LOCKD_TEST_CANDIDATE=ADDR,KEY,VALUE,LEASE.
const envCandidate = "LOCKD_TEST_CANDIDATE"

func init() {
	if spec := os.Getenv(envCandidate); spec != "" {
		os.Exit(runCandidate(spec))
	}
}

// runCandidate campaigns, prints "leading TOKEN" once it leads, resigns
// when a line comes on stdin (printing "resigned"), and prints "lost"
// if the leadership ends otherwise.
func runCandidate(spec string) int {
	f := strings.Split(spec, ",")
	lease, err := time.ParseDuration(f[3])
	if err != nil {
		fmt.Println("bad lease:", err)
		return 2
	}
	// A lease this short renews across a failover only with a failure
	// timeout of half of it at most (the client refuses it otherwise).
	c, err := client.New([]string{f[0]}, client.Options{FailureTimeout: lease / 2})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer c.Close()
	e := client.NewElection(c, f[1])
	e.Lease = lease
	ctx := context.Background()
	h, err := e.Campaign(ctx, f[2])
	if err != nil {
		fmt.Println("campaign:", err)
		return 1
	}
	fmt.Println("leading", h.Token())
	resign := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		close(resign)
	}()
	select {
	case <-resign:
		if err := e.Resign(ctx); err != nil {
			fmt.Println("resign:", err)
			return 1
		}
		fmt.Println("resigned")
	case <-h.Done():
		fmt.Println("lost", h.Err())
	}
	return 0
}

type candidate struct {
	value string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan candidateLine
}

type candidateLine struct {
	text string
	at   time.Time
}

func startCandidate(t *testing.T, addr, key, value string, lease time.Duration) *candidate {
	t.Helper()
	cd := &candidate{value: value, lines: make(chan candidateLine, 8)}
	cd.cmd = exec.Command(os.Args[0], "-test.run=^$")
	cd.cmd.Env = append(os.Environ(), envCandidate+"="+strings.Join([]string{addr, key, value, lease.String()}, ","))
	cd.cmd.Stderr = os.Stderr
	out, err := cd.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cd.stdin, err = cd.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cd.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(cd.lines)
				return
			}
			cd.lines <- candidateLine{strings.TrimSpace(line), time.Now()}
		}
	}()
	t.Cleanup(func() {
		cd.cmd.Process.Kill()
		cd.cmd.Wait()
	})
	return cd
}

// Three candidate processes: one leads; after kill -9 of the leader's
// process the next leads within the lease; after that one resigns the
// last leads within 100 ms.
func TestElectionOfThreeProcesses(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startLockd(t, addr)
	const lease = time.Second
	var cands []*candidate
	for i := 1; i <= 3; i++ {
		cands = append(cands, startCandidate(t, addr, "leader", fmt.Sprintf("candidate-%d", i), lease))
	}
	// next waits for one of the candidates still running to lead.
	next := func(what string, among []*candidate, within time.Duration) (*candidate, candidateLine) {
		t.Helper()
		deadline := time.After(within)
		for {
			for _, cd := range among {
				select {
				case l, ok := <-cd.lines:
					if !ok {
						t.Fatalf("%s: %s ended", what, cd.value)
					}
					if !strings.HasPrefix(l.text, "leading ") {
						t.Fatalf("%s: %s said %q", what, cd.value, l.text)
					}
					return cd, l
				default:
				}
			}
			select {
			case <-deadline:
				t.Fatalf("%s: nobody leads after %s", what, within)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	without := func(list []*candidate, cd *candidate) []*candidate {
		var out []*candidate
		for _, c := range list {
			if c != cd {
				out = append(out, c)
			}
		}
		return out
	}

	first, _ := next("first", cands, 10*time.Second)
	rest := without(cands, first)
	time.Sleep(200 * time.Millisecond)
	for _, cd := range rest {
		select {
		case l := <-cd.lines:
			t.Fatalf("%s said %q while %s leads", cd.value, l.text, first.value)
		default:
		}
	}

	killed := time.Now()
	first.cmd.Process.Signal(syscall.SIGKILL)
	second, l := next("after kill -9 of the leader", rest, 3*lease)
	if took := l.at.Sub(killed); took > lease+200*time.Millisecond {
		t.Errorf("the next leader led %s after kill -9 of the leader, want within the lease, %s", took, lease)
	}
	last := without(rest, second)

	fmt.Fprintln(second.stdin, "resign")
	r, ok := <-second.lines
	if !ok || r.text != "resigned" {
		t.Fatalf("%s after resign: %q", second.value, r.text)
	}
	_, l = next("after the leader resigned", last, 2*time.Second)
	if took := l.at.Sub(r.at); took > 100*time.Millisecond {
		t.Errorf("the last leader led %s after the resign, want within 100ms", took)
	}
}
