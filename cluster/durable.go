package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockd-io/lockd/cluster/wal"
	"github.com/lockd-io/lockd/engine"
)

// The data directory (--data-dir).
//
// The core logs every change it applies with an ActLog, carried out once
// the node mutex is let go (carry.go): the record is copied into the
// log's buffer, and the syncer goroutine is woken once for all of a
// Ready's records, nothing more. Woken by each record instead, an idle
// syncer would fsync the first of a batch alone and leave the rest to
// the next fsync. The syncer writes and fsyncs
// everything buffered with one Sync, however many batches of however many
// connections appended meanwhile (group commit), then tells the core with
// Logged: the answers that waited for those records are written (as
// a reader writes a batch's, after letting go of the mutex), and a
// standby acknowledges them on its stream. While it fsyncs, the next
// records pile up for the next Sync, so the cost is one fsync per batch,
// not per request.
//
// When the log has grown past DefaultSnapshotAfter since the last
// snapshot, a goroutine writes a snapshot beside it a slice of keys at a
// time (core.SnapshotSlice), letting go of the mutex between slices, and
// the segments it covers are removed.

// DefaultSnapshotAfter is how much log a snapshot is taken after.
const DefaultSnapshotAfter = 64 << 20

// durable is a node's data directory.
type durable struct {
	log  *wal.Log
	wake chan struct{} // the syncer has records to write
	// failed is closed, with err set, when a write or fsync failed: the
	// node can no longer promise what it answers, and stops.
	failed  chan struct{}
	err     error
	flushes flushList
	// snapshotting is guarded by n.mu.
	snapshotting bool
	snapAfter    int64
}

// openDisk opens the data directory and replays it into the core.
func (n *Node) openDisk() error {
	// A lockd restarted at once after SIGTERM finds the one it replaces
	// still draining its clients after the handoff, for a failure
	// timeout at most: wait for it rather than refuse to start.
	wait := 3 * n.cfg.FailureTimeout
	l, err := wal.OpenWaiting(n.cfg.DataDir, n.cfg.Fsync, wait, func(owner string) {
		n.log.Info("waiting for the lockd that holds the data directory to stop", "dir", n.cfg.DataDir, "holder", owner, "up_to", wait)
	})
	if err != nil {
		return err
	}
	if n.cfg.DropCorrupt {
		l.DropCorrupt()
	}
	now := n.now()
	records := 0
	dropped, err := l.Replay(func(wall int64, rec []byte) error {
		records++
		if err := n.core.Recover(now, time.Unix(0, wall), rec); err != nil {
			return fmt.Errorf("record %d: %v", records, err)
		}
		return nil
	})
	if err != nil {
		l.Close()
		return fmt.Errorf("cannot read the data directory %s back: %v", n.cfg.DataDir, err)
	}
	if dropped != nil && dropped.Corrupt {
		n.log.Error("the data directory's log holds a damaged record that valid records follow: starting from the last good record, as --drop-after-corruption asks; the records after it are dropped, and the locks they granted are forgotten while their holders may still hold them",
			"file", dropped.File, "offset", dropped.Offset, "bytes_dropped", dropped.Bytes, "later_segments_dropped", dropped.Files, "why", dropped.Reason)
	} else if dropped != nil {
		n.log.Warn("the data directory's log ends in a torn or corrupt record (a crash in the middle of a write, or a damaged disk): starting from the last good record, the rest is dropped",
			"file", dropped.File, "offset", dropped.Offset, "bytes_dropped", dropped.Bytes, "later_segments_dropped", dropped.Files, "why", dropped.Reason)
	}
	holders := n.core.Recovered(now)
	// Carried out before the log is open: what recovery asked to log is
	// on disk already.
	n.mu.Lock()
	n.unlock(nil)
	n.log.Info("data directory opened", "dir", n.cfg.DataDir, "fsync", n.cfg.Fsync.String(), "records", records, "holders", holders)
	after := n.cfg.SnapshotAfter
	if after <= 0 {
		after = DefaultSnapshotAfter
	}
	n.disk = &durable{log: l, wake: make(chan struct{}, 1), failed: make(chan struct{}), snapAfter: after}
	return nil
}

// kick wakes the syncer.
func (d *durable) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// syncLoop writes what the core logged, tells the core, and writes the
// answers that waited for it.
func (n *Node) syncLoop() {
	defer n.wg.Done()
	d := n.disk
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-d.wake:
		}
		done, err := d.log.Sync()
		if err != nil {
			n.log.Error("cannot write the data directory: this node stops, since it can no longer promise what it answers; fix the disk, then start it again", "dir", n.cfg.DataDir, "err", err.Error())
			d.err = err
			close(d.failed)
			return
		}
		n.mu.Lock()
		now := n.now()
		n.core.Logged(now, done)
		// A standby acknowledges what its disk holds now.
		if target, _ := n.core.Following(); target != "" {
			n.core.StreamAck(now, target)
		}
		snap := !d.snapshotting && d.log.Size() >= d.snapAfter
		if snap {
			d.snapshotting = true
		}
		n.unlock(&carry{direct: &d.flushes})
		d.flushes.flush()
		if snap {
			n.wg.Add(1)
			go n.snapshotDisk()
		}
	}
}

// snapshotDisk writes a snapshot of the node's state to the data
// directory, a slice of keys at a time.
func (n *Node) snapshotDisk() {
	defer n.wg.Done()
	d := n.disk
	start := time.Now()
	n.mu.Lock()
	s, err := d.log.BeginSnapshot()
	if err == nil {
		at := n.now()
		s.Add(at.UnixNano(), n.core.DiskSnapshot(nil))
	}
	n.mu.Unlock()
	if err == nil {
		cursor := engine.ScanStart
		for cursor != 0 && n.ctx.Err() == nil {
			n.mu.Lock()
			at := n.now()
			cursor = n.core.DiskSnapshotSlice(at, cursor, func(rec []byte) { s.Add(at.UnixNano(), rec) })
			n.mu.Unlock()
			s.Flush()
		}
		if cursor != 0 {
			s.Abort()
			err = errors.New("the node stopped")
		} else {
			err = s.Commit()
		}
	}
	n.mu.Lock()
	d.snapshotting = false
	n.mu.Unlock()
	if err != nil {
		n.log.Warn("snapshot of the data directory failed: the log keeps growing until one succeeds", "dir", n.cfg.DataDir, "err", err.Error())
		return
	}
	n.log.Info("data directory snapshot written", "dir", n.cfg.DataDir, "took", time.Since(start).Round(time.Millisecond).String())
}

// closeDisk writes what is left and releases the directory.
func (n *Node) closeDisk() {
	d := n.disk
	if d == nil {
		return
	}
	if d.err == nil {
		d.log.Sync()
	}
	d.log.Close()
}

// diskFailed is closed when the data directory can no longer be written.
func (n *Node) diskFailed() <-chan struct{} {
	if n.disk == nil {
		return nil
	}
	return n.disk.failed
}

// Durability is what the node keeps across a restart, as its status says.
func (n *Node) Durability() string {
	if n.cfg.DataDir == "" {
		return "memory"
	}
	return "disk:" + n.cfg.Fsync.String()
}
