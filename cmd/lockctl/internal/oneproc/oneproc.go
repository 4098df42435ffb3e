// Package oneproc gives lockctl one processor from the start of its
// package initialisation, unless GOMAXPROCS is set: a lock command is a
// few requests and a child process, and a second processor costs every
// run the threads the runtime starts and wakes to use it. Setting it here,
// before the other packages' init functions allocate, is cheaper than in
// main: the processor given up then holds no memory to hand back.
// Commands that generate load (bench, drill) call Restore.
package oneproc

import (
	"runtime"
	"syscall"
)

// limited reports whether init set one processor.
var limited bool

func init() {
	if _, set := syscall.Getenv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
		limited = true
	}
}

// Restore gives the program the runtime's default processors again, if
// init limited them.
func Restore() {
	if limited {
		runtime.SetDefaultGOMAXPROCS()
		limited = false
	}
}
