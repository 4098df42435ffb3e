// Package cluster runs a lockd node: the shell around package core that
// owns the sockets, goroutines and timers. It accepts connections on the
// listener (TLS and the authentication gate included), reads and parses
// their lines, keeps a heartbeat link to every peer, keeps the
// replication stream the core follows, runs the one-off requests the core
// asks for (settling a handoff, a take-back), and hands every one of
// these events to the core under one mutex, with the time. What the core
// decides comes back as a core.Ready, carried out once the mutex is let
// go: answers and stream records to write, heartbeats to send, streams
// to open or close.
//
// It knows no cluster rule (roles, promotion, handoff, replication are
// package core's) and no lock rule (package engine's); it knows the wire
// grammar only through package proto, and who may say what through
// package proto/auth.
//
// # Concurrency
//
// Each accepted connection has a reader goroutine, which parses lines
// outside any lock and applies every complete line it has buffered under
// one acquisition of the node mutex, and a writer (outWriter, outwriter.go)
// that owns everything written to it: the bytes queued, their limits,
// the reader's pause while its client reads too little, and the close;
// the replication stream a standby follows (followstream.go) writes its
// replies through one too, never while a Ready is carried out; the
// heartbeat link a node dials to each peer writes its one line per beat
// from its own goroutine (heartbeats.go).
// The reader that applied a batch writes what the batch produced itself
// once it let go of the mutex, the other connections' answers first (a
// release's grant to a waiter) and then its own, each with one
// non-blocking write; only while a connection has bytes nobody else
// writes (what a socket did not accept at once, an answer outside any
// batch, every answer over TLS) does a writer goroutine run, which
// writes them with one write however many piled up meanwhile. On Linux
// a plain TCP connection's reader reads inside one RawRead: after a read
// that emptied the socket it waits on the poller without reading again,
// and after a read of several requests it reads again at once, writing
// the answers of both reads together (push, rawio_linux.go). No
// goroutine is started per request (but over TLS: one starts for an
// answer to an idle connection), and no lock is held across I/O. A
// waiting acquire registers in the engine and costs nothing until it is
// answered, so it never delays later requests on its connection. A key
// listing and a new standby's snapshot are scanned a slice at a time, so
// no client waits behind them for more than a slice.
//
// # Consistency
//
// By default (--replication sync) the active answers a change only once
// every standby in sync has applied it, so a crash of the active loses
// nothing a client was told while one of those standbys lives; with
// --replication async, or an active with no standby in sync (degraded),
// the last answers can be lost with the node that made them. With
// --data-dir every change is also in a write-ahead log before it is
// answered (durable.go, package cluster/wal), so a restart, of one node
// or of all, keeps the locks. Promotion is
// not consensus: during a partition two nodes can grant the same key, and
// the side that yields loses the grants it made meanwhile. Tokens stay
// strictly increasing across all of it (see package engine), so a resource
// that refuses tokens smaller than the last it saw stays safe. The rules
// that decide roles, and what each guarantees, are in package core, whose
// deterministic simulator checks them over thousands of seeded histories.
package cluster
