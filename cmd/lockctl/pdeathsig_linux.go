package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel send COMMAND SIGKILL when lockctl
// dies without stopping it (kill -9, the OOM killer): nothing renews the
// lock from then on, and flock's child, which holds the lock's file
// itself, never runs on without it either. The signal comes when the
// thread that started COMMAND ends; Go keeps its threads for the life of
// the process unless a goroutine locked to one exits, which lockctl's
// never do.
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
