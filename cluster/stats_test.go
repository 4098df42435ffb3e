package cluster

import (
	"testing"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
)

// TestSeqRingAge: the age of the oldest record a standby lacks is bounded
// by the samples around its position.
func TestSeqRingAge(t *testing.T) {
	var r seqRing
	t0 := time.Unix(1000, 0)
	if _, ok := r.age(t0, 1, 2); ok {
		t.Error("no samples, and an age")
	}
	// Position 10 at t0, 20 at t0+1s, 30 at t0+2s; a sample 5 ms after
	// another is skipped.
	r.sample(t0, 10)
	r.sample(t0.Add(5*time.Millisecond), 11)
	r.sample(t0.Add(time.Second), 20)
	r.sample(t0.Add(2*time.Second), 30)
	now := t0.Add(3 * time.Second)
	for _, tc := range []struct {
		seq, head uint64
		want      time.Duration
	}{
		{30, 30, 0},               // caught up
		{35, 30, 0},               // ahead of what this node heard: caught up
		{30, 31, time.Second},     // lacks a record newer than the last sample
		{25, 31, 2 * time.Second}, // lacks records made after the sample at 20
		{10, 31, 3 * time.Second},
		{5, 31, 3 * time.Second}, // older than every sample: at least their span
	} {
		if got, ok := r.age(now, tc.seq, tc.head); !ok || got != tc.want {
			t.Errorf("age(seq %d, head %d) = %v, want %v", tc.seq, tc.head, got, tc.want)
		}
	}
	// A new role starts over: a standby's samples say nothing of when
	// this node produced its records as the active.
	r.reset()
	r.sample(now, 30)
	if got, _ := r.age(now.Add(time.Second), 29, 31); got != time.Second {
		t.Errorf("after a role change, age %v, want 1s", got)
	}
}

// BenchmarkCountRequest is what counting adds to a client that sends one
// request at a time, per cycle of two requests (an acquire granted at
// once, then its release), each a batch of its own: the shell's steps
// around the core's work, one batch in timedBatches timed. The clock read
// the node makes per batch anyway (n.now) is left out: BenchmarkClock.
func BenchmarkCountRequest(b *testing.B) {
	n := &Node{base: time.Now()}
	n.stats.init()
	c := &conn{n: n}
	grant := &core.Send{Op: proto.OpAcquire, Outcome: core.Granted, Key: "bench-17", AtOnce: true, Line: []byte("A bench-17 7532796687534784513\n")}
	ok := &core.Send{Op: proto.OpRelease, Outcome: core.OK, Key: "bench-17", AtOnce: true, Line: []byte("R bench-17 ok\n")}
	batch := func(op proto.Op, answer *core.Send) {
		if c.batches%timedBatches == 0 {
			c.readAt, c.timed = time.Since(n.base), true
		}
		c.batches++
		timed := c.timed
		c.timed = false
		k := carry{by: c}
		n.countAnswer(c, answer, &k)
		if timed && k.atOnce > 0 {
			n.stats.latency.add(time.Since(n.base)-c.readAt, k.atOnce)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		batch(proto.OpAcquire, grant)
		batch(proto.OpRelease, ok)
	}
	if n.stats.requests[0][outGranted] == 0 || n.stats.atOnce == 0 {
		b.Fatal("not counted as answered at once")
	}
}

// BenchmarkClock is the price of the clock read the node already makes
// per batch (n.now), for comparison with BenchmarkCountRequest.
func BenchmarkClock(b *testing.B) {
	n := &Node{base: time.Now()}
	var t time.Time
	for b.Loop() {
		t = n.now()
	}
	_ = t
}
