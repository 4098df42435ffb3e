//go:build linux

package cluster

import (
	"net"
	"syscall"
	"time"
)

// deferAccept has the kernel hold each connection to ln back until its
// client sends something, or until wait has passed (TCP_DEFER_ACCEPT):
// until then it is a half-open request of the kernel's, which costs the
// node no file, goroutine or place under its caps. The kernel counts the
// wait in SYN-ACK retransmissions, so it is rounded up to a second.
func deferAccept(ln net.Listener, wait time.Duration) error {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return err
	}
	secs := int((wait + time.Second - 1) / time.Second)
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, secs)
	}); err != nil {
		return err
	}
	return serr
}
