package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
)

// Replay calls fn for every record of the newest snapshot, then of the
// log, in order. A torn frame at the end of the log, which a crash in the
// middle of a write leaves, ends it: Replay truncates it off the files
// and reports it in dropped (nil when the log was whole). A bad frame
// that valid frames follow, in its segment or a later one, is damage: it
// is a *CorruptError, and the files are left as they are, unless
// DropCorrupt was called (then it is dropped as a torn end is, and
// everything after it). A corrupt snapshot, or an error of fn, is
// returned. Replay then opens the log for appending.
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
	var size, end, flen int64
	for i, n := range segs {
		name := l.segName(n)
		data, err := readFile(name)
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
		end, flen = int64(good), int64(len(data))
		if ferr != nil && !isCallerErr(ferr) && allZero(data[good:]) {
			ferr = nil // the preallocated rest of the segment
		}
		if ferr == nil {
			continue
		}
		if !isCallerErr(ferr) {
			corrupt := validFrameIn(data[good+1:]) || l.validSegment(segs[i+1:])
			if corrupt && !l.dropCorrupt {
				return nil, &CorruptError{File: name, Offset: int64(good), Reason: ferr.Error()}
			}
			d := &Dropped{File: name, Offset: int64(good), Bytes: int64(written(data[good:])), Reason: ferr.Error(), Corrupt: corrupt}
			if err := truncate(name, int64(good)); err != nil {
				return nil, err
			}
			for _, later := range segs[i+1:] {
				ln := l.segName(later)
				if b, err := readFile(ln); err == nil {
					d.Bytes += int64(written(b))
				}
				if err := os.Remove(ln); err != nil {
					return nil, fmt.Errorf("cannot remove %s after the corrupt frame in %s: %v", ln, name, err)
				}
				d.Files++
			}
			segs = segs[:i+1]
			flen = end
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
	} else {
		end, flen = 0, 0
	}
	f, err := openFile(l.segName(seg), os.O_WRONLY|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s for appending: %v", l.segName(seg), err)
	}
	if len(segs) == 0 {
		if err := syncDir(l.dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	l.f, l.seg, l.off, l.alloc = f, seg, end, flen
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
	data, err := readFile(name)
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

// validFrameIn reports whether a whole frame with a good checksum starts
// anywhere in data: after a bad frame, the sign of damage rather than of
// a write cut short, after which nothing was written. A record holds
// lines of printable text, whose bytes never make a frame's length, so
// no frame is found inside another.
func validFrameIn(data []byte) bool {
	for off := 0; off+headerSize+wallSize <= len(data); off++ {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n < wallSize || n > wallSize+MaxRecord || len(data)-off-headerSize < n {
			continue
		}
		p := data[off+headerSize : off+headerSize+n]
		if crc32.Checksum(p, castagnoli) == binary.LittleEndian.Uint32(data[off+4:]) {
			return true
		}
	}
	return false
}

// validSegment reports whether one of segs, later segments, holds a
// valid frame.
func (l *Log) validSegment(segs []uint64) bool {
	for _, n := range segs {
		if data, err := readFile(l.segName(n)); err == nil && validFrameIn(data) {
			return true
		}
	}
	return false
}
