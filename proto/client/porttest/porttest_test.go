package porttest

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// A reserved port refuses dials and other listeners until Listen, then
// takes connections.
func TestReservedRefusesUntilListen(t *testing.T) {
	r := Reserve(t)
	if _, err := net.Dial("tcp", r.Addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial of a reserved port: %v, want connection refused", err)
	}
	if ln, err := net.Listen("tcp", r.Addr); err == nil {
		ln.Close()
		t.Fatal("another listener took the reserved port")
	}
	ln := r.Listen()
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatalf("dial once it listens: %v", err)
	}
	c.Close()
}
