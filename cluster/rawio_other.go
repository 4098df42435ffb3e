//go:build !linux

package cluster

import (
	"net"
	"syscall"
)

// newRawIO: raw reads and writes are for Linux; elsewhere a connection
// reads and writes through net.Conn.
func newRawIO(net.Conn, syscall.RawConn) *rawIO { return nil }

// push: elsewhere the reader pulls its lines through net.Conn.
func (b *batcher) push() bool { return b.pull() }

// unread: never called, as newRawIO returns nil.
func (r *rawIO) unread() int { return 0 }
