//go:build !linux

package cluster

import "net"

// smallSegments is a plain dialer where the segment size is not set
// (segments_linux_test.go says why it is on Linux).
func smallSegments() *net.Dialer { return &net.Dialer{} }
