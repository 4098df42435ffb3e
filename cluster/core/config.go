package core

import (
	"log/slog"
	"time"

	"github.com/lockd-io/lockd/engine"
)

// Defaults of Config.
const (
	DefaultHeartbeat      = 100 * time.Millisecond
	DefaultFailureTimeout = time.Second
	// DefaultHandoffTimeout bounds how long an active waits for its
	// successor to confirm a handoff before it asks whether it was taken.
	DefaultHandoffTimeout = 3 * time.Second
)

// Bounds of what one connection, or the node, holds for clients.
const (
	// MaxConnWaiters bounds the waiting acquires of one connection.
	MaxConnWaiters = 100_000
	// maxParked bounds the lock requests held back (parks); later
	// ones are redirected at once.
	maxParked = 100_000
	// maxChanges is how many of its role changes a node tells in S.
	maxChanges = 8
	// SnapshotSlice is how many keys one SnapshotSlice call scans: small
	// enough that a slice holds the shell's mutex for well under a
	// millisecond with a million locks held, so requests keep flowing
	// while a standby syncs (BenchmarkSnapshotSlice measures it).
	SnapshotSlice = 1024
)

// Config describes one node.
type Config struct {
	Self           string   // this node as written in Peers
	Peers          []string // every node in priority order, Self included; empty for a single node
	Heartbeat      time.Duration
	FailureTimeout time.Duration
	HandoffTimeout time.Duration
	// Async answers a grant, release or renewal at once, before any
	// standby has it (--replication async); otherwise the
	// active answers only once every standby in sync has applied it.
	Async bool
	// SyncTimeout bounds how long an answer waits for a standby's
	// acknowledgement before that standby is dropped from the ones waited
	// for (default: half the failure timeout).
	SyncTimeout time.Duration
	Engine      engine.Config // lock limits; Node is set from Self's place in Peers
	// MaxWatches bounds the keys one connection watches (L), and
	// MaxTotalWatches the watches of the node; 0 takes
	// DefaultMaxWatches and DefaultMaxTotalWatches.
	MaxWatches      int
	MaxTotalWatches int
	// Durable logs every change to a data directory before answering
	// what depends on it (disk.go, ActLog).
	// Durability is how the node says so in its status ("disk:batch").
	Durable    bool
	Durability string
	Logger     *slog.Logger
}
