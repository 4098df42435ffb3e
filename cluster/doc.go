// Package cluster runs a lockd node: the TCP listener that serves the line
// protocol to clients and peers, the peer links and their heartbeats, the
// node's role (active, standby), replication of the lock state from the
// active to its standbys, promotion on failure, handoff on shutdown or on
// command, priority take-back and demotion after a partition, and the
// redirects (M answers) that send clients to the active.
//
// It knows how to move the lock state between nodes but not how a lock is
// granted: every lock rule lives in package engine, which this package
// drives under one mutex, passing the time in. It knows the wire grammar
// only through package proto.
//
// # Concurrency
//
// Each connection has a reader goroutine, which parses lines outside any
// lock and applies every complete line it has buffered under one
// acquisition of the node mutex, and a writer goroutine, which flushes the
// connection's answer buffer with one write however many answers piled up
// meanwhile. No goroutine is started per request and no lock is held across
// I/O. A waiting acquire registers in the engine and costs nothing until it
// is answered, so it never delays later requests on its connection.
//
// # Roles
//
// The order of --peers is the promotion priority. Every node dials every
// other node and sends a heartbeat (P) every --heartbeat; the answers say
// each peer's role, token high-water mark, replication position and flags.
// A peer is live while its answers keep coming within --failure-timeout
// (or, faster, until a dial is refused: a process that died leaves a closed
// port behind). The highest-priority live node that is eligible becomes
// active; a node that gave the role away by command (sticky) or that has
// never synced is eligible only when no better node is live. A standby
// follows the active's replication stream (Y) and answers every lock
// request with M and the active's address. A restarted node of higher
// priority joins as a standby, syncs, and then asks the active for a
// handoff (take-back). Two actives that see each other resolve by
// priority: the lower one demotes itself, and the higher one moves its
// token epoch above every token it has heard of. One exception: an active
// that started empty (it never synced and no standby has synced from it
// yet) gives way to an active that holds the cluster's state, whatever
// their priorities, so a node restarted in the middle of a failover cannot
// erase the replicated locks.
//
// # Consistency
//
// Replication is asynchronous and promotion is not consensus: during a
// failover or a partition two nodes can grant the same key, and grants not
// yet replicated are lost with the node that made them. Tokens stay
// strictly increasing across all of it (see package engine), so a resource
// that refuses tokens smaller than the last it saw stays safe.
package cluster
