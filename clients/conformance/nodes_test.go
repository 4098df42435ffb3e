package conformance

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// freePort returns a 127.0.0.1 address nothing listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

// node is one real lockd process of this repository.
type node struct {
	t    *testing.T
	addr string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	log  bytes.Buffer
	done chan struct{}
	// statusOpts is how the harness itself reaches the node (TLS, secret).
	statusOpts client.Options
}

// startNode starts lockd on a free port with args added to --listen.
func startNode(t *testing.T, args ...string) *node {
	t.Helper()
	return startNodeWith(t, client.Options{}, args...)
}

// startNodeWith starts lockd with args; the harness reaches it as opts says.
func startNodeWith(t *testing.T, opts client.Options, args ...string) *node {
	t.Helper()
	n := &node{t: t, addr: freePort(t), args: args, statusOpts: opts}
	n.start()
	t.Cleanup(n.kill)
	n.waitRole("active", "")
	return n
}

func (n *node) start() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	args := append([]string{"--listen", n.addr}, n.args...)
	cmd := exec.Command(lockdBin, args...)
	cmd.Env = append(os.Environ(), "LOCKD_LOG_LEVEL=warn")
	cmd.Stdout = &n.log
	cmd.Stderr = &n.log
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start lockd: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
}

// kill ends the node at once (SIGKILL), as a crash would.
func (n *node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGCONT)
	n.cmd.Process.Kill()
	<-n.done
	if n.t.Failed() {
		n.t.Logf("lockd %s log:\n%s", n.addr, n.log.String())
	}
	n.cmd = nil
}

func (n *node) signal(s syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.cmd.Process.Signal(s)
	}
}

// freeze stops the process (SIGSTOP): its sockets stay open, it answers
// nothing. It returns once every thread of the process has stopped: each
// takes the signal in its own time, and one still running for a moment
// would serve the next request. thaw resumes it.
func (n *node) freeze() {
	n.signal(syscall.SIGSTOP)
	n.mu.Lock()
	pid := n.cmd.Process.Pid
	n.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); !stopped(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			n.t.Fatalf("node %s did not stop within 5 s of SIGSTOP", n.addr)
		}
	}
}

func (n *node) thaw() { n.signal(syscall.SIGCONT) }

// stopped reports whether every thread of process pid is stopped, as
// /proc says (state T, after the command's closing parenthesis).
func stopped(pid int) bool {
	stats, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/stat")
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// restart kills the node and starts it again on the same address.
func (n *node) restart() {
	n.kill()
	n.start()
}

// status asks the node how it sees itself.
func (n *node) status() (proto.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return client.StatusWith(ctx, n.addr, n.statusOpts)
}

// waitRole waits up to 15 s until the node says it has role (and, when
// active is not "", that the active is there).
func (n *node) waitRole(role, active string) {
	n.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		st, err := n.status()
		if err == nil && st.Role == role && (active == "" || st.Active == active) {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = st.Role + " active=" + st.Active
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.t.Fatalf("lockd %s is not %s (active %q) after 15 s: %s\n%s", n.addr, role, active, last, n.log.String())
}

// cluster is three lockd nodes, the first preferred as active.
type cluster struct {
	nodes []*node
}

// Timing of the clusters the cases start: fast, so a failover fits a case.
const (
	clusterHeartbeat = 100 * time.Millisecond
	clusterFT        = 600 * time.Millisecond
)

func startCluster(t *testing.T) *cluster {
	t.Helper()
	var addrs []string
	for range 3 {
		addrs = append(addrs, freePort(t))
	}
	c := &cluster{}
	for _, a := range addrs {
		n := &node{t: t, addr: a, args: []string{"--peers", strings.Join(addrs, ","), "--heartbeat", clusterHeartbeat.String(), "--failure-timeout", clusterFT.String()}}
		n.start()
		t.Cleanup(n.kill)
		c.nodes = append(c.nodes, n)
	}
	c.nodes[0].waitRole("active", "")
	for _, n := range c.nodes[1:] {
		n.waitRole("standby", addrs[0])
	}
	return c
}

// active is the node that says it is active now: the first one, unless
// a loaded machine made the others miss its heartbeats and one of them
// took over.
func (c *cluster) active(t *testing.T) *node {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, n := range c.nodes {
			if st, err := n.status(); err == nil && st.Role == "active" {
				return n
			}
		}
	}
	t.Fatal("no node of the cluster says it is active after 15 s")
	return nil
}

func (c *cluster) addrs() []string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.addr)
	}
	return a
}

// writeFile writes a file of the case's temporary directory.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// lockdTLS makes a CA and certificates with `lockd tls` in dir.
func lockdTLS(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(lockdBin, append([]string{"tls"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("lockd tls %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
