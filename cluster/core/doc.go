// Package core is a lockd node's cluster logic without I/O: its role
// (joining, standby, active, handing off), what it knows of its peers from
// their heartbeats, promotion, demotion, take-back, handoff and its
// settling, the replication streams it feeds as the active and the one it
// follows as a standby, and the answers to clients' requests. It drives
// the lock state machine of package engine and speaks the wire only
// through package proto's encoders.
//
// It has no sockets, goroutines, timers, mutexes or clock: the same calls
// with the same arguments always produce the same actions. It holds no
// test hook: the bugs the simulator plants to prove it finds them are
// mutations of these files, which a test compiles into a build of its
// own (sim_plant_test.go). Package cluster is the shell that owns the
// sockets and goroutines, feeds the core events under one mutex and
// carries its actions out; the
// deterministic simulator in this package's tests drives several cores
// over a simulated network and clock instead.
//
// # Events (methods of Core)
//
// Every event carries the time it happens at, and returns nothing: all
// it causes comes out as actions. (Status, Role and the other readers
// answer questions about the state and change nothing; DiskSnapshot and
// DiskSnapshotSlice read the state out for a snapshot of the data
// directory.)
//
//	Tick(now)                          time passed: fire deadlines; every heartbeat,
//	                                   send heartbeats and re-evaluate the role (NextWake says when)
//	ConnOpened(now, id, remote)        a connection was accepted
//	Request(now, id, req)              a request read on a connection (authorised by the shell)
//	RequestError(now, id, pe)          a line that is no request
//	Refuse(now, id, op, key, msg)      a request the shell refuses (authentication)
//	ConnClosed(now, id)                the connection closed: its waiters leave
//	KeysSlice(now, id)                 scan the next slice of id's key listing (after Scan)
//	SnapshotSlice(now, id)             send the next slice of a new standby's snapshot (after Feed)
//	HeardBeat(now, peer, beat)         a peer answered this node's heartbeat
//	PeerDown(now, peer, why)           the heartbeat link to a peer failed
//	StreamOpened(now, target)          the replication stream to follow is open
//	StreamRecord(now, target, a)       a record read on it
//	StreamAck(now, target)             a batch of records was read on it
//	StreamEnded(now, target, err)      it ended
//	Answered(now, id, answer, err)     the answer to an Ask (a take-back, or C)
//	Shutdown(now)                      stop gracefully: hand off first
//	Recover(now, at, rec), Recovered   with a data directory: its records, read back before serving
//	Logged(now, n)                     the first n records logged are on disk (disk.go)
//
// # Actions (methods of Out)
//
// The core calls Out synchronously, in the order its actions happen; a
// method of Out must not call back into the core.
//
//	Send(Send) bool                    lines for a connection, and what they say: the
//	                                   request's op and key, its Outcome (Granted, TimedOut,
//	                                   OK, NotHeld, Moved, Refused, or NoOutcome for
//	                                   replication records and answers to peers) and, for a
//	                                   refused acquire, the Limit it hit; false when the
//	                                   connection is gone
//	Scan(conn)                         call KeysSlice once more for conn's key listing
//	Feed(conn)                         call SnapshotSlice once more for conn's snapshot,
//	                                   when the stream has room
//	Close(conn)                        close it once written
//	Beat(peer, line)                   a heartbeat on the link to peer
//	Follow(target)                     keep a replication stream from target open ("" none)
//	StreamReply(target, line)          write on that stream (its hello Y, acknowledgements V,
//	                                   a handoff's confirmation O)
//	StreamEnd(target, err)             end that stream: feed no more of it (StreamEnded follows)
//	RoleChanged(role, active)          this node's role, or the active it knows, changed
//	Ask(id, peer, line, timeout)       a request on a connection of its own (C, H takeback)
//	Stopped()                          a shutdown may complete
//	Log(at, rec)                       with Config.Durable (a DiskOut): append rec to the
//	                                   write-ahead log; answers that depend on it wait for Logged
//
// The shell counts requests, their outcomes and the limits hit from what
// each Send says, never from its bytes. A new kind of answer is a new
// Outcome (or a field of Send) set where the core makes the line.
//
// # Roles
//
// The order of --peers is the promotion priority. Every heartbeat a node
// sends P to every other node; the answers say each peer's role, token
// high-water mark, replication position and flags. A peer is live while
// its answers keep coming within the failure timeout (or until its link
// fails). The highest-priority live node that is eligible becomes active;
// a node that gave the role away by command (sticky) or that has never
// synced is eligible only when no better node is live. A standby follows
// the active's replication stream and answers every lock request with M.
// A restarted node of higher priority joins as a standby, syncs, and then
// asks the active for a handoff (take-back). Two actives that see each
// other resolve by priority; an active that started empty gives way to one
// that holds the cluster's state.
//
// # Handoff
//
// The active appends an H record to the successor's stream and holds lock
// requests back; the successor applies everything before it, promotes,
// and confirms with O on the stream. Without the confirmation in time (or
// when the stream closes first) the old active does not guess: it asks
// the successor with C whether it took the role, and follows it (taken),
// serves again (cancelled: the successor will ignore the record), or,
// when the successor cannot be reached for a failure timeout, steps back
// and lets the usual rules pick the active.
package core
