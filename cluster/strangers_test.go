package cluster

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockd-io/lockd/proto/auth"
)

// A stranger that shares a node's address and sends wrong peer secrets
// as fast as it can never pauses the handshakes of a peer that proves
// itself from that address: every one is served, however long the
// stranger's run of wrong secrets.
func TestWrongPeerSecretsNeverPauseARealPeer(t *testing.T) {
	addr := freeAddrs(t, 1)[0]
	startNodeWith(t, addr, nil, func(c *Config) {
		c.Security.Secrets = auth.Secrets{Client: clientSecret, Peer: peerSecret}
	})
	var wrong atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				continue
			}
			nc.Write([]byte("I peer not-the-peer-secret-0123456789\n"))
			line, _ := bufio.NewReader(nc).ReadString('\n')
			nc.Close()
			if strings.HasPrefix(line, "E peer I: ") {
				wrong.Add(1)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "the stranger's first wrong secrets", func() bool { return wrong.Load() > authFreeFailures+1 })
	for i := range 20 {
		// Each try comes after another wrong secret: a pause, if any,
		// has just begun again.
		seen := wrong.Load()
		waitFor(t, "another wrong secret", func() bool { return wrong.Load() > seen })
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		role, err := auth.Authenticate(nc, bufio.NewReader(nc), auth.Peer, peerSecret, addr, true)
		nc.Close()
		if err != nil || role != auth.Peer {
			t.Fatalf("peer handshake %d, after %d wrong peer secrets from its address: %s %v", i+1, wrong.Load(), role, err)
		}
	}
}
