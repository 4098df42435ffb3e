package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Snapshot is a snapshot being written: the state as of its
// BeginSnapshot, in records added one slice at a time.
type Snapshot struct {
	l      *Log
	seg    uint64
	f      *os.File
	buf    []byte
	frames int64
	err    error
}

// BeginSnapshot starts a snapshot of the state as of now: the caller
// adds records to it that, replayed, rebuild that state (later changes
// may show in them too: they are replayed again from the log), and the
// records appended from now on go to a new segment, which the snapshot
// precedes.
func (l *Log) BeginSnapshot() (*Snapshot, error) {
	l.mu.Lock()
	if !l.replayed || l.cut >= 0 {
		l.mu.Unlock()
		return nil, errors.New("wal: a snapshot is already under way")
	}
	l.lastSeg++
	seg := l.lastSeg
	l.cut, l.cutSeg, l.size = len(l.pending), seg, 0
	l.mu.Unlock()
	s := &Snapshot{l: l, seg: seg}
	f, err := openFile(l.snapName(seg)+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		s.err = fmt.Errorf("cannot create a snapshot in %s: %v", l.dir, err)
	}
	s.f = f
	return s, nil
}

// Add appends a record to the snapshot, in memory: Flush writes it, so
// that a caller adding under a lock writes outside it.
func (s *Snapshot) Add(wall int64, rec []byte) {
	if len(rec) == 0 {
		return // an empty record is the trailer's
	}
	s.buf = AppendFrame(s.buf, wall, rec)
	s.frames++
}

// Flush writes the records added so far to the snapshot's file.
func (s *Snapshot) Flush() {
	if s.err == nil && len(s.buf) > 0 {
		if _, err := s.f.Write(s.buf); err != nil {
			s.err = fmt.Errorf("cannot write the snapshot %s: %v", s.f.Name(), err)
		}
	}
	s.buf = s.buf[:0]
}

// Commit completes the snapshot: written, fsynced, renamed into place
// and the directory fsynced, then the segments and snapshots it replaces
// are removed.
func (s *Snapshot) Commit() error {
	l := s.l
	s.buf = AppendFrame(s.buf, s.frames, nil)
	s.Flush()
	if s.err == nil {
		if err := s.f.Sync(); err != nil {
			s.err = fmt.Errorf("cannot fsync the snapshot %s: %v", s.f.Name(), err)
		}
	}
	if s.f != nil {
		s.f.Close()
	}
	if s.err != nil {
		os.Remove(l.snapName(s.seg) + ".tmp")
		return s.err
	}
	if err := os.Rename(l.snapName(s.seg)+".tmp", l.snapName(s.seg)); err != nil {
		return fmt.Errorf("cannot put the snapshot in place in %s: %v", l.dir, err)
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	// The records before the cut must be on disk in the old segment, or
	// in the new snapshot, before the old segment goes: they are (the
	// snapshot holds a state at least as new), and the segment swap is
	// made here if no Sync made it yet.
	l.io.Lock()
	defer l.io.Unlock()
	if l.seg < s.seg {
		if _, err := l.syncLocked(); err != nil {
			return err
		}
	}
	snaps, segs, err := l.files()
	if err != nil {
		return err
	}
	for _, n := range segs {
		if n < s.seg {
			os.Remove(l.segName(n))
		}
	}
	for _, n := range snaps {
		if n < s.seg {
			os.Remove(l.snapName(n))
		}
	}
	return syncDir(l.dir)
}

// Abort gives the snapshot up; the log keeps everything.
func (s *Snapshot) Abort() {
	if s.f != nil {
		s.f.Close()
	}
	os.Remove(s.l.snapName(s.seg) + ".tmp")
}

func truncate(name string, size int64) error {
	f, err := openFile(name, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cannot truncate the torn end off %s: %v", name, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("cannot truncate the torn end off %s: %v", name, err)
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open data directory %s to fsync it: %v", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("cannot fsync data directory %s: %v", dir, err)
	}
	return nil
}
