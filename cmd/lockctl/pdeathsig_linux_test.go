package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kill -9 of lockctl exec ends its command: nothing renews the lock any
// more, so the command must not run on without it.
func TestExecCommandDiesWithLockctl(t *testing.T) {
	f := startFake(t)
	cmd, stdout, stderr := startLockctl(t, "--addr", f.addr, "exec", "--key", "job", "--",
		"sh", "-c", `echo $$; exec sleep 60`)
	line, err := stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("the command printed no pid: %v; stderr %q", err, stderr)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if !alive(pid) {
		t.Fatalf("command %d not running", pid)
	}
	cmd.Process.Kill()
	cmd.Process.Wait() // not cmd.Wait: the command holds the stdout pipe
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("command %d still runs 5s after lockctl exec was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs: it exists and is not a zombie waiting
// for whichever process adopted it.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
