package core

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// stream is a standby's replication stream that this node feeds.
type stream struct {
	from    string // the standby's address
	version int    // the peer messages it reads
	syncing bool   // its snapshot is still being sent
	synced  uint64 // the seq of its synced mark
	acked   uint64 // the seq it has acknowledged applying
	inSync  bool   // answers wait for its acknowledgements
	cursor  int    // where the snapshot's scan stands
	held    int    // locks sent in the snapshot so far
	scanned bool   // the holders are sent
	started time.Time
}

// subscribe turns cn into a replication stream for a standby: the
// snapshot, sent a slice at a time (SnapshotSlice), the synced mark, then
// every change as it happens. A standby has one stream: a new one from
// the same node replaces the old.
func (c *Core) subscribe(now time.Time, cn *conn, m *proto.PeerMessage) {
	if c.role != Active || !c.pausedSince.IsZero() {
		c.sendNow(cn, record, proto.AppendMoved(c.buf[:0], m.From, c.redirectTarget(now)))
		return
	}
	if cn.stream != nil {
		c.sendNow(cn, record, proto.AppendError(c.buf[:0], m.From, proto.OpSync, "this connection is a replication stream already"))
		return
	}
	c.observe(now, m.Token, m.From)
	for _, s := range c.streams {
		if s.stream.from == m.From {
			c.act(Action{Kind: ActClose, Conn: s.id}, nil)
		}
	}
	c.streams = slices.DeleteFunc(c.streams, func(s *conn) bool {
		if s.stream.from == m.From {
			s.stream = nil
			return true
		}
		return false
	})
	c.advance(now)
	version := proto.PeerVersion // never heard: a node that does not speak it fails to read the stream, and subscribes again once its heartbeat said so
	if p := c.peerByAddr(m.From); p != nil && p.version > 0 {
		version = min(p.version, proto.PeerVersion)
	}
	cn.stream = &stream{from: m.From, version: version, syncing: true, cursor: engine.ScanStart, started: now}
	switch {
	case version < 2:
		c.log.Warn("standby speaks older peer messages: semaphore keys, acquire ids and waiters do not reach it, and it does not acknowledge; upgrade it", "standby", m.From, "its_version", version, "this_version", proto.PeerVersion)
	case version < proto.PeerVersion:
		c.log.Warn("standby speaks older peer messages: the waiters' places do not reach it, so a failover to it does not keep the queue order; upgrade it", "standby", m.From, "its_version", version, "this_version", proto.PeerVersion)
	}
	c.streams = append(c.streams, cn)
	c.log.Info("standby subscribed", "standby", m.From, "remote", cn.remote, "seq", c.seq)
	c.act(Action{Kind: ActFeed, Conn: cn.id}, nil)
}

// SnapshotSlice sends the next slice of the snapshot of stream id: the
// held locks of SnapshotSlice keys. Changes made between slices go down
// the same stream as they happen (replicate), so every record of a key
// reflects its state when written, and the last one the standby reads is
// the latest: the standby applies them in order and, at the synced mark,
// holds this node's state (engine.Scan visits every key held for the
// whole scan at least once). While the snapshot is not complete it asks
// for the next slice with Out.Feed.
func (c *Core) SnapshotSlice(now time.Time, id ConnID) {
	cn := c.conns[id]
	if cn == nil || cn.stream == nil || !cn.stream.syncing {
		return
	}
	c.noteTime(now)
	if c.role != Active {
		// A snapshot is this node's state as an active: a standby that
		// did not get all of it must subscribe again wherever the role is.
		c.dropStream(cn)
		return
	}
	s := cn.stream
	buf := c.buf[:0]
	if !s.scanned {
		s.cursor = c.eng.Scan(now, s.cursor, SnapshotSlice, func(h engine.Holder, held bool) {
			if !held {
				return
			}
			rec, ok := proto.RecordFor(s.version, holderRecord(h))
			if !ok {
				return // a semaphore: an older standby cannot hold it
			}
			buf = proto.AppendRecord(buf, rec)
			s.held++
		})
		if s.cursor == 0 {
			s.scanned = true
		}
	}
	if s.scanned {
		if s.version >= 4 {
			// The last releases, remembered on the standby too: a
			// release sent again after a failover to it, its answer lost
			// in the move, is answered ok. The ones a client may send
			// again are the latest (those made after the snapshot come
			// on the stream), so one slice's worth is enough, and the
			// sync costs no more under a heavy churn of locks.
			for _, r := range c.eng.Releases(now, SnapshotSlice) {
				buf = proto.AppendRecord(buf, proto.Record{Kind: proto.RecFree, Key: r.Key, Token: r.Token})
			}
		}
		if s.version >= 3 {
			buf = c.snapshotWaiters(now, buf)
		}
		synced, _ := proto.RecordFor(s.version, proto.Record{Kind: proto.RecSynced, From: s.from, Token: c.eng.HighWater(), Seq: c.seq, Top: c.top})
		buf = proto.AppendRecord(buf, synced)
		s.syncing, s.synced = false, c.seq
		c.fresh = false // a standby now holds this node's state: it is the cluster's
		c.count.SnapshotsSent++
		c.count.SnapshotDuration += now.Sub(s.started)
		c.log.Info("snapshot sent", "standby", s.from, "holders", s.held, "took", now.Sub(s.started).Round(time.Microsecond).String())
	}
	if len(buf) > 0 {
		c.send(cn, record, buf)
	} else {
		c.buf = buf
	}
	if s.syncing {
		c.act(Action{Kind: ActFeed, Conn: id}, nil)
		return
	}
	c.retryWaitingHandoff(now)
}

// replicate appends the state change of ev to every standby's stream.
func (c *Core) replicate(ev engine.Event) {
	if ev.Kind == engine.TimedOut {
		return
	}
	batch := c.sets.batch(ev)
	if batch <= 1 || c.sets.repl == batch-1 {
		c.seq++ // a set's grant is one change
	}
	c.top = max(c.top, ev.Token)
	if len(c.streams) == 0 && !c.durable() {
		return
	}
	rec := heldRecord(ev, batch)
	if ev.Kind == engine.Freed {
		rec = proto.Record{Kind: proto.RecFree, Key: ev.Key, Token: ev.Token, Expired: ev.Expired}
	}
	c.logChange(rec)
	if len(c.streams) == 0 {
		return
	}
	b := proto.AppendRecord(c.buf[:0], rec)
	var older [proto.PeerVersion][]byte // the record as each older version reads it
	for _, s := range c.streams {
		v := s.stream.version
		if v >= proto.PeerVersion {
			c.write(s.id, record, b)
			continue
		}
		if older[v] == nil {
			r, ok := proto.RecordFor(v, rec)
			if !ok {
				continue
			}
			older[v] = proto.AppendRecord(nil, r)
		}
		c.write(s.id, record, older[v])
	}
	c.buf = b[:0]
}

// markStreams writes a W mark to every stream: the standbys learn the
// high-water mark and position, and that the active is alive.
func (c *Core) markStreams() {
	if len(c.streams) == 0 {
		return
	}
	b := proto.AppendRecord(c.buf[:0], proto.Record{Kind: proto.RecMark, Token: c.eng.HighWater(), Seq: c.seq})
	for _, s := range c.streams {
		c.write(s.id, record, b)
	}
	c.buf = b[:0]
}

// closeStreams ends every replication stream this node feeds, telling
// each standby where the role went so it follows the new active without
// waiting to hear it from heartbeats (and without promoting itself in the
// meantime).
func (c *Core) closeStreams(to string) {
	for _, s := range c.streams {
		s.stream = nil
		c.write(s.id, record, proto.AppendMoved(nil, proto.WordNone, to))
		c.act(Action{Kind: ActClose, Conn: s.id}, nil)
	}
	c.streams = nil
}

// dropStream ends a stream this node feeds, telling the standby where to
// go.
func (c *Core) dropStream(cn *conn) {
	inSync := cn.stream.inSync
	cn.stream = nil
	defer func() {
		if inSync {
			c.commit(c.lastEvent)
		}
	}()
	c.streams = slices.DeleteFunc(c.streams, func(s *conn) bool { return s == cn })
	c.write(cn.id, record, proto.AppendMoved(nil, proto.WordNone, c.active))
	c.act(Action{Kind: ActClose, Conn: cn.id}, nil)
}

// streamClosed forgets a stream whose connection closed.
func (c *Core) streamClosed(now time.Time, cn *conn) {
	from := cn.stream.from
	inSync := cn.stream.inSync
	cn.stream = nil
	c.streams = slices.DeleteFunc(c.streams, func(s *conn) bool { return s == cn })
	c.log.Info("standby stream closed", "standby", from)
	if inSync {
		c.commit(now)
	}
	if h := c.handoff; h != nil && h.to == from {
		c.handoffUnconfirmed(now, "the successor's stream closed")
	}
}

// follower is the replication stream this standby reads from the active.
type follower struct {
	target string
	open   bool // the shell has a stream open (StreamOpened)
	// ending: the core ended the open stream (ActStreamEnd); the
	// records the shell read before it carried that out are not applied.
	ending  bool
	syncing bool
	// Until the synced mark, the snapshot and the changes made while it
	// was sent arrive interleaved, each record the state of its key when
	// written: they build the new state here, by key, and replace the old
	// one at the mark.
	staged  map[string][]stagedHold
	top     uint64 // the newest token staged
	acked   uint64 // the position last acknowledged (StreamAck)
	ackDue  bool   // the snapshot is applied and not acknowledged yet
	live    bool   // snapshot applied, stream running
	started time.Time
}

// stagedHold is a place of a key received while a stream syncs: its
// token, when its lease ends, the key's limit, the acquire's id.
type stagedHold struct {
	token uint64
	until time.Time
	rec   proto.Record // the rest of it
}

// stageHeld records a G record while syncing, as ApplyHeld would: the
// holder with its token is updated or added; a lock's new holder replaces
// the old one.
func (f *follower) stageHeld(now time.Time, rec proto.Record) {
	hs := f.staged[rec.Key]
	h := stagedHold{token: rec.Token, until: now.Add(rec.Lease), rec: rec}
	for i := range hs {
		if hs[i].token == rec.Token {
			if h.rec.ID == "" {
				h.rec.ID = hs[i].rec.ID
			}
			if h.rec.Set == 0 {
				h.rec.Set = hs[i].rec.Set
			}
			hs[i] = h
			return
		}
	}
	if rec.Limit <= 1 {
		// A writer replaces every holder of a lock, a reader its writer.
		hs = slices.DeleteFunc(hs, func(o stagedHold) bool { return !rec.Shared || !o.rec.Shared })
	}
	f.staged[rec.Key] = append(hs, h)
}

// stageFree records an F record while syncing.
func (f *follower) stageFree(rec proto.Record) {
	hs := f.staged[rec.Key]
	for i := range hs {
		if hs[i].token == rec.Token {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(f.staged, rec.Key)
		return
	}
	f.staged[rec.Key] = hs
}

func (c *Core) ensureFollow(target string) {
	if c.follow != nil && c.follow.target == target {
		return
	}
	c.follow = &follower{target: target}
	c.act(Action{Kind: ActFollow, Peer: target}, nil)
}

func (c *Core) stopFollow() {
	if c.follow != nil {
		c.follow = nil
		c.act(Action{Kind: ActFollow}, nil)
	}
}

// StreamOpened says the shell opened a replication stream from target:
// the core replies its hello (Y) on it, or ends it (Out.StreamEnd) when
// this node no longer follows target.
func (c *Core) StreamOpened(now time.Time, target string) {
	c.noteTime(now)
	f := c.follow
	if f == nil || f.target != target {
		c.act(Action{Kind: ActStreamEnd, Peer: target, Err: errors.New("no longer following " + target)}, nil)
		return
	}
	// A handoff cancelled on the stream before this one is settled.
	delete(c.cancelled, target)
	f.open, f.ending, f.syncing, f.live, f.started, f.top, f.acked, f.ackDue = true, false, true, false, now, 0, 0, false
	f.staged = make(map[string][]stagedHold)
	c.sets.pending = c.sets.pending[:0] // a row the last stream cut short is not this one's
	c.rwait, c.rwaitKey = nil, nil      // the snapshot lists them again
	c.act(Action{Kind: ActStreamReply, Peer: target}, proto.AppendSync(c.buf[:0], c.self, c.eng.HighWater()))
}

// StreamRecord applies one line read on the stream from target. A line
// that cannot be applied ends the stream (Out.StreamEnd): the shell
// feeds no more of it, closes it and reports StreamEnded.
func (c *Core) StreamRecord(now time.Time, target string, a proto.Answer) {
	c.noteTime(now)
	if err := c.streamRecord(now, target, a); err != nil {
		if f := c.follow; f != nil && f.target == target && f.open {
			if f.ending {
				return
			}
			f.ending = true
		}
		c.act(Action{Kind: ActStreamEnd, Peer: target, Err: err}, nil)
	}
}

func (c *Core) streamRecord(now time.Time, target string, a proto.Answer) error {
	f := c.follow
	if f == nil || f.target != target || !f.open || f.ending {
		return errors.New("no longer following " + target)
	}
	if a.Kind == proto.KindMoved && a.Key != proto.WordNone {
		// The answer to Y: that node is not active, and names the one
		// it follows. Trust that for a failure timeout, as a handoff
		// record: promoting past it while the named active is only
		// not heard yet would make two actives.
		if len(a.Fields) > 0 && a.Fields[0] != c.self && a.Fields[0] != target && a.Fields[0] != proto.WordNone {
			c.hint, c.hintFrom = a.Fields[0], target
			c.hintUntil = now.Add(c.cfg.FailureTimeout)
		}
		return fmt.Errorf("%s is not active (it points to %s)", target, answerText(a))
	}
	rec, err := proto.ParseRecord(a)
	if err != nil {
		return fmt.Errorf("replication stream from %s: %w", target, err)
	}
	if !c.eng.Plausible(now, rec.Token) {
		c.log.Warn("replication stream refused: a token too far ahead of this node's clock; check the clocks (NTP)", "self", c.self, "active", target, "token", rec.Token, "max_clock_skew", c.eng.Config().MaxEpochAhead.String())
		return fmt.Errorf("replication stream from %s: token %d is further ahead of this node's clock than --max-clock-skew", target, rec.Token)
	}
	switch rec.Kind {
	case proto.RecJoined:
		c.applyJoined(now, rec)
	case proto.RecLeft:
		c.forgetWaiter(rec.ID)
	case proto.RecHeld:
		if rec.ID != "" {
			c.forgetWaiter(rec.ID) // granted
		}
		if f.syncing {
			f.stageHeld(now, rec)
			f.top = max(f.top, rec.Token)
			return nil
		}
		return c.applyHeld(now, rec)
	case proto.RecFree:
		if len(c.sets.pending) > 0 {
			return errors.New("a set's grant broken by an F record")
		}
		if f.syncing {
			f.stageFree(rec)
			f.top = max(f.top, rec.Token)
			if !rec.Expired {
				// Remembered now: the synced state replaces the holders,
				// not the releases.
				c.eng.ApplyReleased(now, rec.Key, rec.Token)
			}
			return nil
		}
		if rec.Expired {
			c.eng.ApplyFree(rec.Key, rec.Token)
		} else {
			c.eng.ApplyReleased(now, rec.Key, rec.Token)
		}
		c.seq++
		c.top = max(c.top, rec.Token)
		c.logChange(rec)
	case proto.RecMark:
		c.observe(now, rec.Token, target)
		c.activeSeq = rec.Seq
	case proto.RecSynced:
		return c.applySynced(now, f, target, rec)
	case proto.RecHandoff:
		return c.handoffRecord(now, f, rec)
	case proto.RecMoved:
		if rec.Addr != c.self {
			// The role moved: trust the hint for a failure timeout,
			// until heartbeats confirm it.
			c.hint, c.hintFrom = rec.Addr, target
			c.hintUntil = now.Add(c.cfg.FailureTimeout)
		}
		return fmt.Errorf("%s is not active (it points to %s)", target, rec.Addr)
	}
	return nil
}

// applySynced applies the synced mark: the state staged from the
// snapshot replaces this node's.
func (c *Core) applySynced(now time.Time, f *follower, target string, rec proto.Record) error {
	if !f.syncing {
		return errors.New("a second synced mark from " + target)
	}
	snap := engine.Snapshot{Token: rec.Token, Holders: make([]engine.Holder, 0, len(f.staged))}
	for _, hs := range f.staged {
		for _, h := range hs {
			snap.Holders = append(snap.Holders, recordHolder(h.rec, max(h.until.Sub(now), 0)))
		}
	}
	// Restore's order must not depend on map order: the same stream
	// must leave the same state on every run.
	slices.SortFunc(snap.Holders, func(x, y engine.Holder) int {
		return cmp.Or(cmp.Compare(x.Key, y.Key), cmp.Compare(x.Token, y.Token))
	})
	f.staged = nil
	c.observe(now, rec.Token, target)
	c.eng.Restore(now, snap, nil)
	// The synced state is the active's: its top replaces this node's.
	// The snapshot's holders may all be older than the newest token the
	// active granted and freed (top=T): a restored node that weighs its
	// own state against this one's compares tops (stateAge).
	c.top = max(f.top, rec.Top)
	c.seq = rec.Seq
	c.activeSeq = rec.Seq
	f.syncing = false
	f.live = true
	c.synced = true
	c.disk.restored = false
	f.ackDue = true // acknowledge the snapshot at once, even an empty one
	c.logState(now)
	c.log.Info("synced", "self", c.self, "active", target, "holders", len(snap.Holders), "seq", rec.Seq, "took", now.Sub(f.started).Round(time.Microsecond).String())
	c.supervise(now)
	return nil
}

// StreamEnded says the stream from target ended, with err when it failed.
// The shell opens a new one a heartbeat later while Follow still names
// target.
func (c *Core) StreamEnded(now time.Time, target string, err error) {
	c.noteTime(now)
	f := c.follow
	if f == nil || f.target != target {
		return
	}
	f.open, f.ending, f.live, f.staged = false, false, false, nil
	if err != nil {
		c.log.Debug("replication stream ended", "self", c.self, "active", target, "err", err.Error())
	}
	c.supervise(now)
}
