package core

import (
	"time"
)

// Ready is what the core's events since the last Ready ask the shell to
// do, in the order the core decided it: sends, heartbeats, streams to
// open and close, questions to peers, records to log, and when to call
// Tick next. The shell takes it with Core.TakeReady after the events
// (under its mutex), and carries it out in that order, after letting go
// of the mutex; the lines it holds are the shell's until it takes the
// next Ready into the same value, which gives the core their room.
type Ready struct {
	Actions []Action
	// Wake is when the core next needs Tick (NextWake).
	Wake time.Time
	buf  []byte // the bytes of the actions' lines
	// sharedCopy is the copy of Core.shared in buf, once made.
	sharedCopy []byte
}

// ActionKind says what an Action asks.
type ActionKind uint8

const (
	// ActSend: queue Send.Line for Send.Conn. A Send of a grant to a
	// connection the shell no longer has is reported with Undelivered,
	// so that the lock is released rather than held by no one.
	ActSend ActionKind = iota
	// ActScan: call KeysSlice(now, Conn) once, letting other events in
	// before it. Each slice that leaves more to scan asks again.
	ActScan
	// ActFeed: Conn is a new standby's replication stream with a
	// snapshot to send: call SnapshotSlice(now, Conn) once the stream has
	// room for more, letting other events in before it.
	ActFeed
	// ActClose: close Conn once what was sent to it has been written.
	ActClose
	// ActBeat: send heartbeat Line on the link to Peer, if it is up; its
	// answer comes back as HeardBeat, a failure as PeerDown or
	// PeerDenied.
	ActBeat
	// ActFollow: keep a replication stream from Peer open, re-opening it
	// after a failure, or close it when Peer is "". The shell reports on
	// it with StreamOpened, StreamRecord, StreamAck and StreamEnded.
	ActFollow
	// ActStreamReply: write Line on the open stream from Peer (its
	// hello, acknowledgements, a handoff's confirmation).
	ActStreamReply
	// ActStreamEnd: end the open stream from Peer because of Err: feed
	// the core no more of its lines, close it once the replies are
	// written, and report StreamEnded.
	ActStreamEnd
	// ActRoleChanged: this node's role (Role), or the active it knows
	// (Active), changed.
	ActRoleChanged
	// ActAsk: send request Line to Peer on a connection of its own and
	// report the answer, or why there is none (no answer within
	// Timeout, or ErrRefused when nothing listens there), with
	// Answered(ID, ...).
	ActAsk
	// ActStopped: a shutdown begun with Shutdown may complete.
	ActStopped
	// ActLog: with Config.Durable, append Line, one record that happened
	// at At, to the write-ahead log; answers that depend on it wait for
	// Logged.
	ActLog
	// ActWatchDrain: Conn was sent watch news: call WatchSlice(now,
	// Conn) once it has written what it holds, for the next.
	ActWatchDrain
)

// Action is one thing Ready asks. Only the fields of its Kind are set.
type Action struct {
	Kind    ActionKind
	Conn    ConnID
	Send    Send   // ActSend
	Peer    string // the peer, or the stream's target
	Line    []byte // valid until the Ready is handed back
	Err     error
	Role    Role
	Active  string
	ID      uint64
	Timeout time.Duration
	At      time.Time
}

// act appends a, with a copy of line, to the Ready being built. The line
// sent to many connections (Core.shared: a watch's news) is copied once.
func (c *Core) act(a Action, line []byte) {
	r := &c.ready
	if line != nil {
		if len(line) > 0 && len(line) == len(c.shared) && &line[0] == &c.shared[0] && r.sharedCopy != nil {
			a.Line = r.sharedCopy
		} else {
			start := len(r.buf)
			r.buf = append(r.buf, line...)
			a.Line = r.buf[start:len(r.buf):len(r.buf)]
			if len(line) > 0 && len(line) == len(c.shared) && &line[0] == &c.shared[0] {
				r.sharedCopy = a.Line
			}
		}
		if a.Kind == ActSend {
			a.Send.Line = a.Line
		}
	}
	r.Actions = append(r.Actions, a)
}

// TakeReady moves what the events since the last call asked into r,
// and gives the core r's room for the next: r is one carried out (its
// lines are no longer used), or a zero Ready. The shell keeps one Ready
// and takes into it after every hold of its mutex.
func (c *Core) TakeReady(r *Ready) {
	spare := *r
	*r = c.ready
	r.Wake = c.NextWake()
	clear(spare.Actions)
	if cap(spare.buf) > maxSpareBuf {
		spare.buf = nil
	}
	c.ready = Ready{Actions: spare.Actions[:0], buf: spare.buf[:0]}
}

// Pending reports whether the events since the last TakeReady asked
// anything: a shell with nothing to carry out need not take.
func (c *Core) Pending() bool { return len(c.ready.Actions) > 0 }

// maxSpareBuf bounds the line room a Ready keeps for the next: a burst
// (a snapshot slice, a listing of keys) does not pin its memory.
const maxSpareBuf = 1 << 20

// Undelivered says a grant the core sent (an ActSend whose outcome is
// Granted) found its connection gone: the lock is released at once
// rather than held by no one until its lease ends.
func (c *Core) Undelivered(now time.Time, s Send) {
	c.noteTime(now)
	if s.Outcome != Granted || s.Token == 0 || !c.serving() {
		return
	}
	c.releaseOrphan(now, s.Key, s.Token)
}

// NextWake is when the core next needs Tick: heartbeats, lease and wait
// deadlines, a handoff's timeout.
func (c *Core) NextWake() time.Time {
	t := c.nextBeat
	if !c.Paused() {
		// (While paused, the heartbeats' answers end the pause.)
		if d, ok := c.heldDeadline(); ok && d.Before(t) {
			t = d
		}
		if len(c.expect) > 0 && c.expectUntil.Before(t) {
			t = c.expectUntil
		}
	}
	if w := c.waiting; w != nil && w.until.Before(t) {
		t = w.until
	}
	if c.serving() {
		if d, ok := c.eng.NextDeadline(); ok && d.Before(t) {
			t = d
		}
	}
	if h := c.handoff; h != nil && !h.resolving && h.deadline.Before(t) {
		t = h.deadline
	}
	return t
}
