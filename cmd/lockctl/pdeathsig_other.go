//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent-death
// signal: there, a COMMAND outlives a lockctl killed with kill -9.
func setParentDeathSignal(cmd *exec.Cmd) {}
