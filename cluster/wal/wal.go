package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Mode is when Sync makes what it writes durable.
type Mode uint8

const (
	// Batch fsyncs once per Sync: every record appended since the last.
	Batch Mode = iota
	// Always fsyncs after every record: one fsync per record.
	Always
	// Never writes without fsync: the records survive the process, not
	// a power cut the kernel has not flushed before.
	Never
)

// ParseMode reads the --fsync words.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "batch":
		return Batch, nil
	case "always":
		return Always, nil
	case "never":
		return Never, nil
	}
	return 0, fmt.Errorf("--fsync %q is not always, batch or never", s)
}

func (m Mode) String() string {
	switch m {
	case Always:
		return "always"
	case Never:
		return "never"
	}
	return "batch"
}

const (
	headerSize = 8 // length, crc
	wallSize   = 8
	// MaxRecord bounds one record: a longer frame length is corruption.
	MaxRecord = 1 << 20
	dirMode   = 0o700
	fileMode  = 0o600
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame appends the frame of record rec appended at wall (unix
// nanoseconds) to b.
func AppendFrame(b []byte, wall int64, rec []byte) []byte {
	n := wallSize + len(rec)
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(wall))
	b = append(b, rec...)
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+headerSize:], castagnoli))
	return b
}

// errTorn is a frame cut short: the file ends inside it.
var errTorn = errors.New("a frame cut short")

// ReadFrames calls fn for every frame of data in order and returns how
// many bytes of whole, valid frames precede the first bad one (all of
// data when none is), and why that one is bad. fn's rec aliases data.
func ReadFrames(data []byte, fn func(wall int64, rec []byte) error) (int, error) {
	off := 0
	for off < len(data) {
		if len(data)-off < headerSize {
			return off, errTorn
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n < wallSize || n > wallSize+MaxRecord {
			return off, fmt.Errorf("a frame length of %d bytes", n)
		}
		if len(data)-off-headerSize < n {
			return off, errTorn
		}
		p := data[off+headerSize : off+headerSize+n]
		if crc32.Checksum(p, castagnoli) != sum {
			return off, errors.New("a checksum mismatch")
		}
		if err := fn(int64(binary.LittleEndian.Uint64(p)), p[wallSize:]); err != nil {
			return off, err
		}
		off += headerSize + n
	}
	return off, nil
}

// Dropped is what Replay cut off the end of the log.
type Dropped struct {
	File   string // the segment where the bad frame is
	Offset int64  // where in it
	Bytes  int64  // bytes removed, in that segment and the later ones
	Files  int    // later segments removed whole
	Reason string // what was wrong with the frame
}

// Log is an open data directory. Append and BeginSnapshot may be called
// from any goroutine; Sync from one at a time (it serialises itself with
// a snapshot's Commit).
type Log struct {
	dir  string
	mode Mode
	lock *os.File

	mu       sync.Mutex // guards the fields below
	pending  []byte     // frames appended, not written yet
	npending int        // frames in pending
	cut      int        // offset in pending where the next segment starts, -1 none
	cutSeg   uint64     // that segment's number
	lastSeg  uint64     // the newest segment number handed out
	appended uint64     // frames appended since Open
	size     int64      // bytes of log since the newest snapshot began
	replayed bool

	io      sync.Mutex // serialises writes to the files
	seg     uint64     // the segment f is
	f       *os.File
	spare   []byte // the buffer Sync swaps with pending
	written uint64 // frames made durable (or written, in mode Never)
	closed  bool
	fsyncs  atomic.Uint64
}

// Open locks and opens the data directory dir, creating it (0700) if
// needed. Call Replay before appending.
func Open(dir string, mode Mode) (*Log, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("cannot create data directory %s: %v; create it (mode 0700) or pick another --data-dir", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %v", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("--data-dir %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("data directory %s is writable by other users (mode %04o): they could plant records lockd would replay; run chmod 700 %s", dir, st.Mode().Perm(), dir)
	}
	lf, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, mode: mode, lock: lf, cut: -1}
	return l, nil
}

// Dir is the data directory.
func (l *Log) Dir() string { return l.dir }

// Mode is the fsync mode the log was opened with.
func (l *Log) Mode() Mode { return l.mode }

// files lists the snapshots and segments of the directory by number,
// removing the temporary files of a snapshot never completed.
func (l *Log) files() (snaps, segs []uint64, err error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read data directory %s: %v", l.dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(l.dir, name))
			continue
		}
		kind, num, ok := strings.Cut(name, "-")
		if !ok {
			continue
		}
		n, perr := strconv.ParseUint(num, 16, 64)
		if perr != nil || len(num) != 16 {
			continue
		}
		switch kind {
		case "snap":
			snaps = append(snaps, n)
		case "log":
			segs = append(segs, n)
		}
	}
	slices.Sort(snaps)
	slices.Sort(segs)
	return snaps, segs, nil
}

func (l *Log) snapName(n uint64) string { return filepath.Join(l.dir, fmt.Sprintf("snap-%016x", n)) }
func (l *Log) segName(n uint64) string  { return filepath.Join(l.dir, fmt.Sprintf("log-%016x", n)) }

// Replay calls fn for every record of the newest snapshot, then of the
// log, in order. A torn or corrupt frame in the log ends it: Replay
// truncates it and everything after it off the files and reports it in
// dropped (nil when the log was whole). A corrupt snapshot, or an error
// of fn, is returned. Replay then opens the log for appending.
func (l *Log) Replay(fn func(wall int64, rec []byte) error) (dropped *Dropped, err error) {
	l.io.Lock()
	defer l.io.Unlock()
	if l.replayed {
		return nil, errors.New("wal: Replay called twice")
	}
	snaps, segs, err := l.files()
	if err != nil {
		return nil, err
	}
	var from uint64
	if len(snaps) > 0 {
		from = snaps[len(snaps)-1]
		if err := l.replaySnapshot(l.snapName(from), fn); err != nil {
			return nil, err
		}
	}
	segs = slices.DeleteFunc(segs, func(n uint64) bool { return n < from })
	var size int64
	for i, n := range segs {
		name := l.segName(n)
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %v", name, err)
		}
		good, ferr := ReadFrames(data, func(wall int64, rec []byte) error {
			if err := fn(wall, rec); err != nil {
				return callerErr{err}
			}
			return nil
		})
		size += int64(good)
		if ferr == nil {
			continue
		}
		if !isCallerErr(ferr) {
			d := &Dropped{File: name, Offset: int64(good), Bytes: int64(len(data) - good), Reason: ferr.Error()}
			if err := truncate(name, int64(good)); err != nil {
				return nil, err
			}
			for _, later := range segs[i+1:] {
				ln := l.segName(later)
				if st, err := os.Stat(ln); err == nil {
					d.Bytes += st.Size()
				}
				if err := os.Remove(ln); err != nil {
					return nil, fmt.Errorf("cannot remove %s after the corrupt frame in %s: %v", ln, name, err)
				}
				d.Files++
			}
			segs = segs[:i+1]
			dropped = d
			break
		}
		return nil, fmt.Errorf("%s: %w", name, ferr)
	}
	// Appends go to the newest segment, or to a new one after the
	// snapshot.
	seg := from
	if len(segs) > 0 {
		seg = segs[len(segs)-1]
	}
	f, err := os.OpenFile(l.segName(seg), os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s for appending: %v", l.segName(seg), err)
	}
	if len(segs) == 0 {
		if err := syncDir(l.dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	l.f, l.seg = f, seg
	l.mu.Lock()
	l.lastSeg, l.size, l.replayed = seg, size, true
	l.mu.Unlock()
	return dropped, nil
}

// callerErr marks an error of Replay's fn, told apart from a bad frame.
type callerErr struct{ err error }

func (e callerErr) Error() string { return e.err.Error() }
func (e callerErr) Unwrap() error { return e.err }

func isCallerErr(err error) bool {
	var ce callerErr
	return errors.As(err, &ce)
}

func (l *Log) replaySnapshot(name string, fn func(wall int64, rec []byte) error) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("cannot read snapshot %s: %v", name, err)
	}
	frames, ended := int64(0), false
	good, ferr := ReadFrames(data, func(wall int64, rec []byte) error {
		if ended {
			return errors.New("frames after the trailer")
		}
		if len(rec) == 0 {
			if wall != frames {
				return fmt.Errorf("a trailer counting %d frames after %d", wall, frames)
			}
			ended = true
			return nil
		}
		frames++
		if err := fn(wall, rec); err != nil {
			return callerErr{err}
		}
		return nil
	})
	if ferr == nil && !ended {
		ferr = errors.New("no trailer: the snapshot is cut short")
	}
	if ferr != nil {
		if isCallerErr(ferr) {
			return fmt.Errorf("snapshot %s: %w", name, ferr)
		}
		return fmt.Errorf("snapshot %s is corrupt at byte %d (%v): lockd cannot tell which locks it held. To start from the records logged after it (the locks only it holds are lost), move it out of %s; to start with no locks, empty %s", name, good, ferr, l.dir, l.dir)
	}
	return nil
}

// Append buffers rec, appended at wall (unix nanoseconds), for the next
// Sync. It copies rec.
func (l *Log) Append(wall int64, rec []byte) {
	l.mu.Lock()
	before := len(l.pending)
	l.pending = AppendFrame(l.pending, wall, rec)
	l.size += int64(len(l.pending) - before)
	l.npending++
	l.appended++
	l.mu.Unlock()
}

// Appended is the number of records appended since Open.
func (l *Log) Appended() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appended
}

// Size is the bytes of log written since the newest snapshot began.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Pending reports whether records wait for a Sync.
func (l *Log) Pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.npending > 0
}

// Sync writes every record appended so far and, unless the mode is
// Never, fsyncs it. It returns the number of records appended since Open
// that are now on disk: Append's n-th call is durable once Sync returned
// n or more.
func (l *Log) Sync() (uint64, error) {
	l.io.Lock()
	defer l.io.Unlock()
	return l.syncLocked()
}

func (l *Log) syncLocked() (uint64, error) {
	if l.closed || !l.replayed {
		return l.written, errors.New("wal: the log is not open for appending")
	}
	l.mu.Lock()
	buf, n, cut, cutSeg := l.pending, l.npending, l.cut, l.cutSeg
	l.pending, l.npending, l.cut = l.spare[:0], 0, -1
	l.mu.Unlock()
	defer func() { l.spare = buf[:0] }()
	if n == 0 && cut < 0 {
		return l.written, nil
	}
	if cut >= 0 {
		if err := l.write(buf[:cut]); err != nil {
			return l.written, err
		}
		f, err := os.OpenFile(l.segName(cutSeg), os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
		if err != nil {
			return l.written, fmt.Errorf("cannot create log segment %s: %v", l.segName(cutSeg), err)
		}
		if err := syncDir(l.dir); err != nil {
			f.Close()
			return l.written, err
		}
		l.f.Close()
		l.f, l.seg = f, cutSeg
		buf = buf[cut:]
	}
	if err := l.write(buf); err != nil {
		return l.written, err
	}
	l.written += uint64(n)
	return l.written, nil
}

// write writes frames to the current segment and makes them durable as
// the mode says.
func (l *Log) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if l.mode == Always {
		for len(b) > 0 {
			n := headerSize + int(binary.LittleEndian.Uint32(b))
			if err := l.writeSync(b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	}
	return l.writeSync(b)
}

func (l *Log) writeSync(b []byte) error {
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("cannot write the log %s: %v; check the disk (space, errors)", l.f.Name(), err)
	}
	if l.mode == Never {
		return nil
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("cannot fsync the log %s: %v; check the disk", l.f.Name(), err)
	}
	l.fsyncs.Add(1)
	return nil
}

// Fsyncs is how many fsyncs of the log Sync has made.
func (l *Log) Fsyncs() uint64 { return l.fsyncs.Load() }

// Close writes nothing more and releases the directory.
func (l *Log) Close() error {
	l.io.Lock()
	defer l.io.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var err error
	if l.f != nil {
		err = l.f.Close()
	}
	l.lock.Close()
	return err
}

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
	f, err := os.OpenFile(l.snapName(seg)+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
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
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
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
