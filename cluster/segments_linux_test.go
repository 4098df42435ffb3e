//go:build linux

package cluster

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// smallSegments dials with a small TCP segment size, as a client that
// never reads may: the node's kernel sizes its send buffer from the
// segment size, so little of what the node answers such a client fits
// there and the rest waits in the node's own memory. Over loopback's
// 64 KiB segments, a send buffer holds megabytes of answers, and a test
// of what the node buffers would see nothing.
func smallSegments() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG, 1024)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
}
