// Package porttest reserves loopback ports for tests of what a client
// does where no node listens yet. A port picked free and closed again can
// be taken by any listener started meanwhile, such as another test's
// node, which then answers a client that was to find nothing there; a
// socket bound to the port and not listening holds it: a dial there is
// refused, as at a node not started, and nothing else can listen there
// until the test listens or ends.
package porttest

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

// Reserved is a loopback port bound and not listening.
type Reserved struct {
	// Addr is the port's HOST:PORT.
	Addr string
	t    testing.TB
	f    *os.File
}

// Reserve binds a socket to a free port of 127.0.0.1 without listening,
// and closes it when the test ends unless Listen took it.
func Reserve(t testing.TB) *Reserved {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// No SO_REUSEADDR: a listener that sets it (net.Listen does) could
	// otherwise bind the port beside this socket.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	r := &Reserved{
		Addr: fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port),
		t:    t,
		f:    os.NewFile(uintptr(fd), "reserved port"),
	}
	t.Cleanup(func() { r.f.Close() })
	return r
}

// Listen makes the reserved socket listen, as a node started at Addr
// does, and returns it as a listener.
func (r *Reserved) Listen() net.Listener {
	r.t.Helper()
	if err := syscall.Listen(int(r.f.Fd()), syscall.SOMAXCONN); err != nil {
		r.t.Fatal(err)
	}
	ln, err := net.FileListener(r.f)
	if err != nil {
		r.t.Fatal(err)
	}
	r.f.Close() // the listener holds a copy
	return ln
}
