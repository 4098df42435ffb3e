package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Dropped is what Replay cut off the end of the log.
type Dropped struct {
	File   string // the segment where the bad frame is
	Offset int64  // where in it
	Bytes  int64  // bytes of frames removed, in that segment and the later ones (see written)
	Files  int    // later segments removed whole
	Reason string // what was wrong with the frame
	// Corrupt: valid frames followed the bad one, which was no torn
	// end but damage, dropped only because the log was opened so
	// (DropCorrupt).
	Corrupt bool
}

// CorruptError is Replay's refusal of a log with a bad frame that valid
// frames follow: not the torn end a crash leaves, but records damaged
// after they were written, so that starting from before them would
// forget what the records after them did.
type CorruptError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s is corrupt at byte %d (%s), and valid records follow: the disk damaged a record lockd had written, and starting from the last good one would forget the locks granted after it while their holders still hold them. Restore the data directory from a copy, or start once with --drop-after-corruption to start from the last good record and drop every record after it", e.File, e.Offset, e.Reason)
}

// Log is an open data directory. Append and BeginSnapshot may be called
// from any goroutine; Sync from one at a time (it serialises itself with
// a snapshot's Commit).
type Log struct {
	dir  string
	mode Mode
	lock *os.File

	dropCorrupt bool // Replay drops damaged records and all after them (DropCorrupt)

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
	off     int64  // where in f the next frame goes
	alloc   int64  // f's size: zeros from off to alloc (see grow)
	spare   []byte // the buffer Sync swaps with pending
	written uint64 // frames made durable (or written, in mode Never)
	closed  bool
	fsyncs  atomic.Uint64
}

// Open locks and opens the data directory dir, creating it (0700) if
// needed, refusing at once a directory another process has locked. Call
// Replay before appending.
func Open(dir string, mode Mode) (*Log, error) {
	return OpenWaiting(dir, mode, 0, nil)
}

// lockPoll is how often OpenWaiting tries a locked directory again.
const lockPoll = 20 * time.Millisecond

// OpenWaiting is Open that waits up to wait for another process to let
// go of the directory: a lockd restarted while the one it replaces still
// drains its clients. waiting, if not nil, is called once when the wait
// begins, with what the holder wrote of itself.
func OpenWaiting(dir string, mode Mode, wait time.Duration, waiting func(owner string)) (*Log, error) {
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
	if err := checkOwner("data directory "+dir, st); err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("data directory %s is writable by other users (mode %04o): they could plant records lockd would replay; run chmod 700 %s", dir, st.Mode().Perm(), dir)
	}
	lf, err := lockDir(dir, wait, waiting)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, mode: mode, lock: lf, cut: -1}
	return l, nil
}

// DropCorrupt makes Replay start from the last good record before a
// damaged one that valid records follow, dropping them, where it would
// refuse (CorruptError). Call it before Replay.
func (l *Log) DropCorrupt() { l.dropCorrupt = true }

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

func (l *Log) segName(n uint64) string { return filepath.Join(l.dir, fmt.Sprintf("log-%016x", n)) }

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
		f, err := openFile(l.segName(cutSeg), os.O_WRONLY|os.O_CREATE, fileMode)
		if err != nil {
			return l.written, fmt.Errorf("cannot create log segment %s: %v", l.segName(cutSeg), err)
		}
		if err := syncDir(l.dir); err != nil {
			f.Close()
			return l.written, err
		}
		l.f.Close()
		l.f, l.seg, l.off, l.alloc = f, cutSeg, 0, 0
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
	if end := l.off + int64(len(b)); end > l.alloc {
		if err := l.grow(end); err != nil {
			return err
		}
	}
	if _, err := l.f.WriteAt(b, l.off); err != nil {
		return fmt.Errorf("cannot write the log %s: %v; check the disk (space, errors)", l.f.Name(), err)
	}
	l.off += int64(len(b))
	if l.mode == Never {
		return nil
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("cannot fsync the log %s: %v; check the disk", l.f.Name(), err)
	}
	l.fsyncs.Add(1)
	return nil
}

// Segments grow by preallocChunk bytes of zeros at a time, written
// ahead of the frames that will overwrite them. An fsync of a write
// inside the file's size has no size or block allocation to commit to
// the filesystem's journal, so it costs less than one that appends
// (BenchmarkFileSync compares them). Replay reads a segment's zeros
// after its last frame as its end, not as a torn frame.
const preallocChunk = 1 << 20

var zeros = make([]byte, 64<<10)

// grow fills f with zeros up to past end, a whole preallocChunk further;
// the fsync of the frames that follow makes them durable too.
func (l *Log) grow(end int64) error {
	to := (end + preallocChunk - 1) / preallocChunk * preallocChunk
	for l.alloc < to {
		n := min(int64(len(zeros)), to-l.alloc)
		if _, err := l.f.WriteAt(zeros[:n], l.alloc); err != nil {
			return fmt.Errorf("cannot extend the log %s: %v; check the disk (space, errors)", l.f.Name(), err)
		}
		l.alloc += n
	}
	return nil
}

// allZero reports whether b holds only zeros: the preallocated rest of
// a segment.
// written is the length of b without its trailing zeros: the bytes of a
// segment that frames were written to, without the preallocated rest. A
// frame cut short where its own bytes are zeros counts up to its last
// byte that is not; the difference cannot be told on disk.
func written(b []byte) int {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return n
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
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
