package core

import (
	"errors"
	"time"

	"github.com/lockd-io/lockd/engine"
	"github.com/lockd-io/lockd/proto"
)

// The data directory.
//
// A node with a data directory (Config.Durable) treats its disk as one
// more acknowledger. Every change it applies, as the active (what it
// streams: G, F) or as a standby (what it applies from the stream, and a
// whole new state at a synced mark), goes to the shell (ActLog) as it happens,
// with the instant it happened; the shell appends it to the write-ahead
// log and reports with Logged once it is on disk. An answer that depends
// on a change is held until the change is on disk, as sync replication
// holds it until the standbys in sync have it (sync.go), in every mode
// and on a single node; a standby acknowledges (V) only what is on its
// disk. So an answer a client got is on the disk of the node that gave it
// and of every standby in sync. Waiters are not logged: they belong to
// connections, which a restart closes.
//
// The records are the stream's lines, and three of the disk's own:
//
//	G key token leaseleft [limit=N] [id=ID] [mode=shared] [set=SET[,N]] [place=P] [value=V]
//	                                          a change (granted, renewed): SEQ + 1; the
//	                                          N records of a set's grant (set=SET,N),
//	                                          together, SEQ + 1, applied once all are read
//	F key token                               a change (freed): SEQ + 1
//	W - TOKEN SEQ                             the high-water mark moved
//	!W - TOKEN SEQ                            the state is replaced: no holder, the
//	                                          high-water mark, the position
//	=G key token leaseleft [limit=N] [id=ID]  a holder of that state
//	-F key token                              a release that state remembers: the
//	                                          same release sent again, its answer
//	                                          lost in a restart, is answered ok
//
// A lease left is as of the instant the record was appended: Recover
// takes the time since off it, so a lease that ended while the node was
// down has ended.

// Disk record prefixes of the disk's own records.
const (
	diskReset    = '!'
	diskHolder   = '='
	diskReleased = '-'
)

// disk is what the core knows of its data directory.
type disk struct {
	on   bool   // Config.Durable: the changes go to a write-ahead log (ActLog)
	n    uint64 // records logged
	done uint64 // records on disk (Logged)
	// seqs[head:] is the position after each record logged and not on
	// disk yet, for the acknowledgements.
	seqs    []uint64
	head    int
	doneSeq uint64 // the position as of the last record on disk
	resetAt uint64 // the record count after the last state replaced
	top     uint64 // the high-water mark last logged
	buf     []byte

	// restored: this node started from the state Recover read back and
	// has neither synced nor been active since (a beat flag).
	restored bool
	// Recovery: what Recover read back.
	recovered bool
	maxToken  uint64
	holders   int
}

// durable reports whether this node logs its changes.
func (c *Core) durable() bool { return c.disk.on }

// logRec logs rec, made after c.seq moved to its position.
func (c *Core) logRec(rec []byte) {
	d := &c.disk
	if !d.on {
		return
	}
	c.act(Action{Kind: ActLog, At: c.lastEvent}, rec)
	d.n++
	d.seqs = append(d.seqs, c.seq)
}

// logChange logs a G or F record of a change this node applied.
func (c *Core) logChange(rec proto.Record) {
	if !c.disk.on {
		return
	}
	c.disk.buf = proto.AppendRecord(c.disk.buf[:0], rec)
	c.logRec(c.disk.buf)
}

// logMark logs the high-water mark when it moved past the one logged, so
// that the tokens a restart issues are above every token this node knew.
func (c *Core) logMark() {
	d := &c.disk
	if !d.on || c.eng.HighWater() <= max(d.top, c.top) {
		return
	}
	d.top = c.eng.HighWater()
	d.buf = proto.AppendRecord(d.buf[:0], proto.Record{Kind: proto.RecMark, Token: d.top, Seq: c.seq})
	c.logRec(d.buf)
}

// logState logs this node's whole state, replacing the one on disk: a
// standby's at its synced mark.
func (c *Core) logState(now time.Time) {
	d := &c.disk
	if !d.on {
		return
	}
	d.buf = c.appendReset(d.buf[:0])
	c.logRec(d.buf)
	for cursor := engine.ScanStart; ; {
		cursor = c.eng.Scan(now, cursor, SnapshotSlice, func(h engine.Holder, held bool) {
			if held {
				d.buf = appendHolder(d.buf[:0], h)
				c.logRec(d.buf)
			}
		})
		if cursor == 0 {
			break
		}
	}
	for _, r := range c.eng.Releases(now, SnapshotSlice) {
		d.buf = appendReleased(d.buf[:0], r)
		c.logRec(d.buf)
	}
	d.resetAt = d.n
}

// appendReleased appends a release the state remembers (engine.Releases).
func appendReleased(b []byte, r engine.Released) []byte {
	b = append(b, diskReleased)
	return proto.AppendRecord(b, proto.Record{Kind: proto.RecFree, Key: r.Key, Token: r.Token})
}

func (c *Core) appendReset(b []byte) []byte {
	c.disk.top = max(c.disk.top, c.eng.HighWater())
	b = append(b, diskReset)
	return proto.AppendRecord(b, proto.Record{Kind: proto.RecMark, Token: c.eng.HighWater(), Seq: c.seq})
}

func appendHolder(b []byte, h engine.Holder) []byte {
	b = append(b, diskHolder)
	return proto.AppendRecord(b, holderRecord(h))
}

// Logged says the first n records logged since the node started are on
// disk: the answers that waited for them are written, and a standby may
// acknowledge them (StreamAck).
func (c *Core) Logged(now time.Time, n uint64) {
	c.noteTime(now)
	d := &c.disk
	if n <= d.done || !d.on {
		return
	}
	n = min(n, d.n)
	k := int(n - d.done)
	d.doneSeq = d.seqs[d.head+k-1]
	d.head += k
	if d.head == len(d.seqs) {
		d.seqs, d.head = d.seqs[:0], 0
	} else if d.head > 1024 && d.head > len(d.seqs)/2 {
		d.seqs = d.seqs[:copy(d.seqs, d.seqs[d.head:])]
		d.head = 0
	}
	d.done = n
	if c.cfg.Async {
		c.release(c.releasable)
		return
	}
	c.commit(now)
}

// onDisk reports whether every change made so far is on disk.
func (c *Core) onDisk() bool { return c.disk.done >= c.disk.n }

// releasable reports whether a held answer may be written: its changes
// are on disk and, in sync mode on an active, on every standby in sync.
func (c *Core) releasable(h heldAnswer) bool {
	if h.needLog > c.disk.done {
		return false
	}
	return c.cfg.Async || c.role != Active && c.role != HandingOff || h.need <= c.committed
}

// ackPos is the position a standby may acknowledge: what it applied, or
// with a data directory what is on disk; false while the state it synced
// last is not all on disk.
func (c *Core) ackPos() (uint64, bool) {
	d := &c.disk
	if !d.on {
		return c.seq, true
	}
	if d.done < d.resetAt {
		return 0, false
	}
	if d.done == d.n {
		return c.seq, true
	}
	return d.doneSeq, true
}

// Durability is what this node keeps across a restart: "memory", or the
// data directory's words the shell gave (Config.Durability).
func (c *Core) Durability() string {
	if !c.disk.on {
		return "memory"
	}
	if c.cfg.Durability == "" {
		return "disk"
	}
	return c.cfg.Durability
}

// Recover applies one record read back from the data directory, logged
// at at, before the node serves: the shell calls it for every record of
// the snapshot and the log in order, then Recovered. now is the wall
// clock: a lease left is shortened by the time since at.
func (c *Core) Recover(now, at time.Time, line []byte) error {
	d := &c.disk
	prefix := byte(0)
	if len(line) > 0 && (line[0] == diskReset || line[0] == diskHolder || line[0] == diskReleased) {
		prefix, line = line[0], line[1:]
	}
	a, err := proto.ParseAnswer(line)
	if err != nil {
		return err
	}
	rec, err := proto.ParseRecord(a)
	if err != nil {
		return err
	}
	d.recovered = true
	lease := rec.Lease - max(now.Sub(at), 0)
	if rec.Kind != proto.RecHeld || prefix != 0 {
		c.dropPartSet()
	}
	switch {
	case prefix == diskReset && rec.Kind == proto.RecMark:
		c.eng.Restore(now, engine.Snapshot{}, nil)
		c.eng.Raise(rec.Token)
		c.seq = rec.Seq
		d.maxToken = max(d.maxToken, rec.Token)
	case prefix == diskHolder && rec.Kind == proto.RecHeld:
		c.eng.ApplyHolder(now, recordHolder(rec, lease))
	case prefix == diskReleased && rec.Kind == proto.RecFree:
		c.eng.ApplyReleased(at, rec.Key, rec.Token)
	case prefix == 0 && rec.Kind == proto.RecHeld:
		c.recoverHeld(now, at, rec)
	case prefix == 0 && rec.Kind == proto.RecFree && rec.Expired:
		c.eng.ApplyFree(rec.Key, rec.Token)
		c.seq++
	case prefix == 0 && rec.Kind == proto.RecFree:
		// A release, remembered from when it was made: a client that
		// lost its answer in the restart sends it again.
		c.eng.ApplyReleased(at, rec.Key, rec.Token)
		c.seq++
	case prefix == 0 && rec.Kind == proto.RecMark:
		c.eng.Raise(rec.Token)
		c.seq = max(c.seq, rec.Seq)
	default:
		return errors.New("not a record of the data directory: " + string(line))
	}
	d.maxToken = max(d.maxToken, rec.Token)
	return nil
}

// Recovered ends the recovery: the node starts as the state it read
// back, its next token above every token on disk whatever the clock
// says. It reports the holders recovered.
func (c *Core) Recovered(now time.Time) int {
	d := &c.disk
	c.dropPartSet()
	c.eng.Raise(d.maxToken)
	c.top = max(c.top, d.maxToken)
	d.top = c.eng.HighWater()
	d.holders = c.eng.Held()
	if d.recovered {
		// The state read back is this node's as the cluster left it:
		// it is not an empty node.
		c.synced = true
		d.restored = c.role != Active
	}
	if c.role == Active {
		c.eng.Succeed(now)
		c.base = c.top
	}
	c.log.Info("state recovered from the data directory", "self", c.self, "holders", d.holders, "seq", c.seq, "token_floor", c.eng.HighWater())
	return d.holders
}

// DiskSnapshot begins a snapshot of this node's state for the data
// directory, under the same serialisation as the records logged: it
// returns the record that replaces the state, to write first; then
// DiskSnapshotSlice adds the holders a slice at a time. Changes made
// meanwhile are logged as usual (after the snapshot's cut) and replayed
// after it.
func (c *Core) DiskSnapshot(b []byte) []byte {
	return c.appendReset(b)
}

// DiskSnapshotSlice appends to the snapshot the holders of the next
// SnapshotSlice keys from cursor (engine.ScanStart first), calling add
// for each record; it returns the next cursor, 0 when done.
func (c *Core) DiskSnapshotSlice(now time.Time, cursor int, add func(rec []byte)) int {
	if cursor == engine.ScanStart {
		// The releases the state remembers, with its first slice.
		for _, r := range c.eng.Releases(now, SnapshotSlice) {
			c.disk.buf = appendReleased(c.disk.buf[:0], r)
			add(c.disk.buf)
		}
	}
	return c.eng.Scan(now, cursor, SnapshotSlice, func(h engine.Holder, held bool) {
		if held {
			c.disk.buf = appendHolder(c.disk.buf[:0], h)
			add(c.disk.buf)
		}
	})
}

// stateAge is how recent a node's state is, to choose who serves first
// when a node restored from its data directory is a candidate: the newest
// token of its state, then its position.
type stateAge struct {
	restored bool
	top, seq uint64
}

func (c *Core) stateAge() stateAge { return stateAge{c.disk.restored, c.top, c.seq} }

// newer reports whether a is more recent than b.
func (a stateAge) newer(b stateAge) bool {
	return a.top > b.top || a.top == b.top && a.seq > b.seq
}
