package core

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// BenchmarkSnapshotSlice measures one slice of a new standby's snapshot
// with a million locks held (an op is one slice). The shell holds the
// node mutex for one slice at a time: this is how long a client request
// can wait behind a sync. p99-µs is the 99th percentile of the slices
// timed one by one.
//
//	go test -run '^$' -bench SnapshotSlice -benchtime 2000x ./cluster/core
func BenchmarkSnapshotSlice(b *testing.B) {
	const held = 1_000_000
	now := time.Unix(1_700_000_000, 0)
	out := &recOut{}
	c, err := New(Config{Self: "10.0.0.1:7070", Peers: []string{"10.0.0.1:7070", "10.0.0.2:7070"}}, now)
	if err != nil {
		b.Fatal(err)
	}
	step := func() { drain(c, out.apply) }
	c.promote(now, "benchmark")
	c.ConnOpened(now, 1, "10.0.0.9:5000")
	for i := range held {
		c.Request(now, 1, proto.Request{Op: proto.OpAcquire, Key: "key-" + strconv.Itoa(i), Lease: time.Hour})
		if i%1024 == 0 {
			step()
		}
	}
	step()
	if c.eng.Held() != held {
		b.Fatalf("%d held, want %d", c.eng.Held(), held)
	}
	id := ConnID(100)
	subscribe := func() {
		id++
		c.ConnOpened(now, id, "10.0.0.2:7070")
		c.Request(now, id, proto.Request{Op: proto.OpSync, Key: "10.0.0.2:7070", Peer: &proto.PeerMessage{From: "10.0.0.2:7070"}})
		step()
	}
	subscribe()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		feeds := out.feeds
		start := time.Now()
		c.SnapshotSlice(now, id)
		times = append(times, time.Since(start))
		step()
		if out.feeds == feeds { // no more slices asked for: sent
			c.ConnClosed(now, id)
			subscribe()
		}
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(SnapshotSlice), "keys/slice")
}
