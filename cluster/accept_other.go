//go:build !linux

package cluster

import (
	"net"
	"time"
)

// deferAccept: elsewhere a connection is taken as soon as its TCP
// handshake is done, and only the order in which strangers are evicted
// (connlimits.go) protects a client that has not spoken yet.
func deferAccept(net.Listener, time.Duration) error { return nil }
