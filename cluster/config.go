package cluster

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/cluster/wal"
	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto/auth"
)

// Defaults of Config.
const (
	DefaultListen         = "127.0.0.1:7070"
	DefaultHeartbeat      = core.DefaultHeartbeat
	DefaultFailureTimeout = core.DefaultFailureTimeout
	// maxStreamBuffer bounds a replication stream's backlog: live
	// records for a standby that fell this far behind are dropped with
	// the stream, and it syncs again. A snapshot is sent a slice at a
	// time as the standby reads it, so it never needs this much.
	maxStreamBuffer = 256 << 20
)

// Config describes one node.
type Config struct {
	Listen         string        // address to listen on
	Advertise      string        // this node as written in Peers; default Listen
	Peers          []string      // every node in priority order; empty for a single node
	Heartbeat      time.Duration // interval between heartbeats to each peer
	FailureTimeout time.Duration // a peer silent this long is down
	// Async answers before any standby applied the change (--replication
	// async); the default waits for the standbys in sync.
	Async bool
	// SyncTimeout bounds how long an answer waits for a standby before
	// the standby is dropped from the ones answers wait for; 0: half the
	// failure timeout.
	SyncTimeout time.Duration
	// MaxWatches bounds the keys one connection watches, MaxTotalWatches
	// the watches of the node; 0 takes the defaults (core.DefaultMaxWatches,
	// core.DefaultMaxTotalWatches).
	MaxWatches      int
	MaxTotalWatches int
	Engine          engine.Config // lock limits
	// DataDir, when set, keeps the lock state across restarts in a
	// write-ahead log there (durable.go); Fsync says when it is fsynced,
	// SnapshotAfter how much log a snapshot is taken after (0: the
	// default).
	DataDir       string
	Fsync         wal.Mode
	SnapshotAfter int64
	// DropCorrupt starts from the last good record before a damaged one
	// that valid records follow, dropping them, where the node would
	// refuse to start (--drop-after-corruption).
	DropCorrupt bool
	Security    Security // TLS, secrets
	Limits      Limits   // connections and buffers
	Logger      *slog.Logger
}

// Security is who may reach a node and what each caller may do.
type Security struct {
	// TLS, when set, serves every connection over TLS and dials peers
	// with it, verifying their node certificates.
	TLS *auth.TLS
	// Secrets of the client, admin and peer roles. With no admin secret
	// the client secret proves the admin role too.
	Secrets auth.Secrets
	// Insecure allows serving clients without authentication on an
	// address other than loopback.
	Insecure bool
	// ClientAddrs are HOST:PORT addresses clients dial to reach this
	// node besides Listen, Advertise and the address a connection
	// arrives at (a DNS name, a NAT or load balancer's address): a
	// client's handshake without TLS names the address it dialled, and
	// one naming an address that is not this node's is refused.
	ClientAddrs []string
}

// Limits bound what one client, or all of them together, can make a node
// hold. A zero field takes its default.
type Limits struct {
	MaxConns      int           // connections open at once
	MaxConnsPerIP int           // connections from one IP address; negative: no cap
	AuthTimeout   time.Duration // a connection must authenticate within this, where it must
	LineTimeout   time.Duration // a line that has begun must end within this
	MaxConnOutput int           // unread answers of one connection, in bytes
	MaxOutput     int64         // unread answers of every connection together, in bytes
	// DeferAccept: where connections must authenticate, one is taken
	// from the kernel once it has sent something, or after this has
	// passed (whole seconds, Linux; see connlimits.go); negative: at
	// once.
	DeferAccept time.Duration
}

// DefaultLimits are the limits lockd uses unless told otherwise.
var DefaultLimits = Limits{
	MaxConns: 10_000,
	// A tenth of MaxConns: one machine, even one holding the client
	// secret, cannot take every connection. An official client keeps
	// one or two per address; a thousand is a fleet of them behind one
	// NAT.
	MaxConnsPerIP: 1000,
	AuthTimeout:   10 * time.Second,
	LineTimeout:   10 * time.Second,
	MaxConnOutput: 8 << 20,
	MaxOutput:     512 << 20,
	// The first SYN-ACK retransmission: the shortest the kernel holds a
	// connection back.
	DeferAccept: time.Second,
}

func (l *Limits) fill() {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultLimits.MaxConns
	}
	if l.MaxConnsPerIP == 0 {
		l.MaxConnsPerIP = DefaultLimits.MaxConnsPerIP
	}
	if l.AuthTimeout <= 0 {
		l.AuthTimeout = DefaultLimits.AuthTimeout
	}
	if l.LineTimeout <= 0 {
		l.LineTimeout = DefaultLimits.LineTimeout
	}
	if l.MaxConnOutput <= 0 {
		l.MaxConnOutput = DefaultLimits.MaxConnOutput
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultLimits.MaxOutput
	}
	if l.DeferAccept == 0 {
		l.DeferAccept = DefaultLimits.DeferAccept
	}
}

// byteSize writes a size the way the flags take it: 8MiB, 512MiB, 1GiB.
func byteSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return strconv.FormatInt(b>>30, 10) + "GiB"
	case b >= 1<<20:
		return strconv.FormatInt(b>>20, 10) + "MiB"
	case b >= 1<<10:
		return strconv.FormatInt(b>>10, 10) + "KiB"
	}
	return strconv.FormatInt(b, 10) + "B"
}
