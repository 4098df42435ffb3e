package lockd_test

// client.Hold against real lockd processes, frozen, restarted and killed
// as an operator's machines are: what an in-process node cannot show.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// freeAddrs picks n free loopback addresses, never one the scenarios of
// this run picked.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var addrs []string
	for len(addrs) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if portsUsed[port] {
			continue
		}
		portsUsed[port] = true
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(port))
	}
	return addrs
}

// lockdProc is one lockd process started by a test.
type lockdProc struct {
	addr string
	cmd  *exec.Cmd
	out  bytes.Buffer
}

// startLockd runs lockd --listen addr with args, until it is killed or
// the test ends, and waits until it answers S.
func startLockd(t *testing.T, addr string, args ...string) *lockdProc {
	t.Helper()
	p := newLockdProc(t, addr, args...)
	waitStatus(t, addr, "S ", 10*time.Second)
	return p
}

// newLockdProc starts lockd --listen addr with args, until it is killed
// or the test ends, without waiting for it to answer.
func newLockdProc(t *testing.T, addr string, args ...string) *lockdProc {
	t.Helper()
	p := &lockdProc{addr: addr}
	p.cmd = exec.Command(filepath.Join(binDir, "lockd"), append([]string{"--listen", addr}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.kill()
		}
		if t.Failed() {
			t.Logf("lockd %s:\n%s", addr, p.out.String())
		}
	})
	return p
}

func (p *lockdProc) kill() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// waitStatus waits until the node at addr answers S with a line that
// contains want.
func waitStatus(t *testing.T, addr, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.SetDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := c.Write([]byte("S -\n")); err == nil {
				last, _ = bufio.NewReader(c).ReadString('\n')
			}
			c.Close()
			if strings.Contains(last, want) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never answered S with %q; last %q", addr, want, last)
}

func holdClient(t *testing.T, addrs []string, ft time.Duration) *client.Client {
	t.Helper()
	c, err := client.New(addrs, client.Options{FailureTimeout: ft})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A node frozen past the lease: Done closes when the lease the last
// acknowledged renewal started ends (within 100 ms of it), not a tick
// later, and Err says the lock can no longer be proven held. The freeze
// comes right after a renewal, and again most of the way to the next
// one, where a Done checked on each renewal tick would close late.
func TestHoldNodeFrozen(t *testing.T) {
	const lease = 900 * time.Millisecond
	for _, tc := range []struct {
		name  string
		after time.Duration // from the last acknowledged renewal's send to the freeze
	}{
		{"right after a renewal", 0},
		{"within the renewal interval", lease / 3 * 6 / 10},
	} {
		t.Run(tc.name, func(t *testing.T) { holdNodeFrozen(t, lease, tc.after) })
	}
}

func holdNodeFrozen(t *testing.T, lease, after time.Duration) {
	addr := freeAddrs(t, 1)[0]
	node := startLockd(t, addr)
	c := holdClient(t, []string{addr}, 300*time.Millisecond)
	h, err := c.Hold(context.Background(), "frozen", lease)
	if err != nil {
		t.Fatal(err)
	}
	// Let a renewal or two go through first.
	first := h.Expires()
	deadline := time.Now().Add(5 * time.Second)
	for !h.Expires().After(first) {
		if time.Now().After(deadline) {
			t.Fatal("no renewal acknowledged in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Expires is the renewal's send plus the lease.
	renewed := h.Expires().Add(-lease)
	time.Sleep(time.Until(renewed.Add(after)))
	node.cmd.Process.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	select {
	case <-h.Done():
	case <-time.After(3 * lease):
		t.Fatalf("Done still open %s after the node froze (expires %s)", 3*lease, h.Expires())
	}
	at := time.Now()
	node.cmd.Process.Signal(syscall.SIGCONT)
	exp := h.Expires()
	if late := at.Sub(exp); late < 0 || late > 100*time.Millisecond {
		t.Errorf("Done closed %s after the last acknowledged renewal's lease ended, want 0 to 100ms", late)
	}
	// The last lease acknowledged began at most a renewal interval (and
	// a little) before the freeze, and no later than the freeze.
	if exp.After(frozen.Add(lease)) || exp.Before(frozen.Add(lease-lease/3-50*time.Millisecond)) {
		t.Errorf("the last lease ended %s after the freeze; want within a third of the lease of %s", exp.Sub(frozen), lease)
	}
	if since := frozen.Sub(exp.Add(-lease)); since < after {
		t.Errorf("froze %s after the last acknowledged renewal, want at least %s", since, after)
	}
	if err := h.Err(); !errors.Is(err, client.ErrExpired) || errors.Is(err, client.ErrNotHeld) {
		t.Errorf("Err %v, want ErrExpired", err)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, client.ErrExpired) {
		t.Errorf("Context's cause %v", cause)
	}
}

// A node restarted empty does not know the token: the next renewal hears
// notheld, and Done closes at once with an Err that says so.
func TestHoldNodeRestartedEmpty(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	node := startLockd(t, addr)
	c := holdClient(t, []string{addr}, 500*time.Millisecond)
	const lease = 3 * time.Second
	h, err := c.Hold(context.Background(), "restarted", lease)
	if err != nil {
		t.Fatal(err)
	}
	node.kill()
	startLockd(t, addr)
	restarted := time.Now()
	select {
	case <-h.Done():
	case <-time.After(lease):
		t.Fatalf("Done still open a lease after the restart (expires %s)", h.Expires())
	}
	if took := time.Since(restarted); took > lease/3+500*time.Millisecond {
		t.Errorf("noticed %s after the restart, want at the next renewal (every %s)", took, lease/3)
	}
	err = h.Err()
	if !errors.Is(err, client.ErrLost) || !errors.Is(err, client.ErrNotHeld) || !strings.Contains(err.Error(), "no longer holds the key") {
		t.Fatalf("Err %v, want ErrLost saying the token no longer holds the key", err)
	}
}

// A hold renewing through a kill -9 of the active of a 3-node cluster
// keeps its lock and its token on the node that took over.
func TestHoldAcrossFailover(t *testing.T) {
	addrs := freeAddrs(t, 3)
	peers := strings.Join(addrs, ",")
	var nodes []*lockdProc
	for _, a := range addrs {
		nodes = append(nodes, startLockd(t, a, "--peers", peers, "--heartbeat", "50ms", "--failure-timeout", "500ms"))
	}
	waitStatus(t, addrs[0], "role=active", 10*time.Second)
	waitStatus(t, addrs[1], "active="+addrs[0], 10*time.Second)
	waitStatus(t, addrs[2], "active="+addrs[0], 10*time.Second)
	c := holdClient(t, addrs, 500*time.Millisecond)
	const lease = 2 * time.Second
	h, err := c.Hold(context.Background(), "failover", lease)
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].kill()
	waitStatus(t, addrs[1], "role=active", 10*time.Second)
	// Renew for two leases more on the new active.
	select {
	case <-h.Done():
		t.Fatalf("the hold ended across the failover: %v", h.Err())
	case <-time.After(2 * lease):
	}
	q, err := c.Queue(context.Background(), "failover")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Held || q.Token != h.Token() {
		t.Fatalf("after the failover the key is %+v; want it held by token %d", q, h.Token())
	}
	if c.Active() != addrs[1] {
		t.Errorf("client's active %s, want %s", c.Active(), addrs[1])
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
