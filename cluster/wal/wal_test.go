package wal

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type rec struct {
	wall int64
	line string
}

// replayAll replays l, collecting every record.
func replayAll(l *Log) ([]rec, *Dropped, error) {
	var got []rec
	d, err := l.Replay(func(wall int64, r []byte) error {
		got = append(got, rec{wall, string(r)})
		return nil
	})
	return got, d, err
}

func open(t *testing.T, dir string) (*Log, []rec, *Dropped) {
	t.Helper()
	l, err := Open(dir, Batch)
	if err != nil {
		t.Fatal(err)
	}
	got, d, err := replayAll(l)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	return l, got, d
}

// refused opens dir and replays it, which must refuse with a
// CorruptError naming file at offset; nothing is changed on disk.
func refused(t *testing.T, dir, file string, offset int64) {
	t.Helper()
	before := snapshotDir(t, dir)
	l, err := Open(dir, Batch)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = replayAll(l)
	l.Close()
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != file || ce.Offset != offset || !strings.Contains(err.Error(), "--drop-after-corruption") {
		t.Fatalf("replay: %v; want a corrupt record in %s at %d refused", err, file, offset)
	}
	if after := snapshotDir(t, dir); !maps.Equal(before, after) {
		t.Fatal("a refused replay changed the data directory")
	}
}

// snapshotDir is the content of every log and snapshot file of dir.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "log-") || strings.HasPrefix(e.Name(), "snap-") {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			m[e.Name()] = string(b)
		}
	}
	return m
}

// openDropping opens dir as open does, dropping a corrupt record and all
// after it.
func openDropping(t *testing.T, dir string) (*Log, []rec, *Dropped) {
	t.Helper()
	l, err := Open(dir, Batch)
	if err != nil {
		t.Fatal(err)
	}
	l.DropCorrupt()
	got, d, err := replayAll(l)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	return l, got, d
}

func appendAll(t *testing.T, l *Log, rs []rec) {
	t.Helper()
	for _, r := range rs {
		l.Append(r.wall, []byte(r.line))
	}
	if n, err := l.Sync(); err != nil || n != l.Appended() {
		t.Fatalf("Sync = %d, %v; want %d", n, err, l.Appended())
	}
}

func records(n int) []rec {
	var rs []rec
	for i := range n {
		rs = append(rs, rec{int64(1000 + i), fmt.Sprintf("G k%d %d 10", i, i+1)})
	}
	return rs
}

func equal(a, b []rec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func onlySegment(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "log-*"))
	if len(m) != 1 {
		t.Fatalf("segments %v, want one", m)
	}
	return m[0]
}

func TestAppendReplay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, got, d := open(t, dir)
	if len(got) != 0 || d != nil {
		t.Fatalf("empty directory replayed %v, dropped %v", got, d)
	}
	want := records(5)
	appendAll(t, l, want[:3])
	appendAll(t, l, want[3:])
	l.Close()
	l, got, d = open(t, dir)
	defer l.Close()
	if !equal(got, want) || d != nil {
		t.Fatalf("replayed %v (dropped %v), want %v", got, d, want)
	}
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %o, want 700", st.Mode().Perm())
	}
	fst, _ := os.Stat(onlySegment(t, dir))
	if fst.Mode().Perm() != 0o600 {
		t.Errorf("segment mode %o, want 600", fst.Mode().Perm())
	}
}

// Every point a crash can cut the last write at leaves the records
// before it, and a log that takes appends after them.
func TestTornTailEveryCut(t *testing.T) {
	want := records(4)
	var full []byte
	ends := []int{0}
	for _, r := range want {
		full = AppendFrame(full, r.wall, []byte(r.line))
		ends = append(ends, len(full))
	}
	for cut := 0; cut <= len(full); cut++ {
		dir := t.TempDir()
		seg := filepath.Join(dir, fmt.Sprintf("log-%016x", 0))
		if err := os.WriteFile(seg, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		whole := 0
		for whole+1 < len(ends) && ends[whole+1] <= cut {
			whole++
		}
		l, got, d := open(t, dir)
		if !equal(got, want[:whole]) {
			t.Fatalf("cut at %d: replayed %v, want the first %d", cut, got, whole)
		}
		if torn := cut != ends[whole]; (d != nil) != torn || torn && (d.Offset != int64(ends[whole]) || d.Bytes != int64(written(full[ends[whole]:cut]))) {
			t.Fatalf("cut at %d: dropped %+v", cut, d)
		}
		appendAll(t, l, []rec{{7, "F k 1"}})
		l.Close()
		l, got, d = open(t, dir)
		l.Close()
		if !equal(got, append(want[:whole:whole], rec{7, "F k 1"})) || d != nil {
			t.Fatalf("cut at %d, then an append: replayed %v, dropped %v", cut, got, d)
		}
	}
}

// A flipped byte in the last frame ends the log there, as a torn write
// does. Anywhere in an earlier frame, valid frames follow the damage:
// the log is refused, naming the file and the offset, and only on demand
// (DropCorrupt) ends at that frame.
func TestFlippedByte(t *testing.T) {
	want := records(3)
	var full []byte
	ends := []int{0}
	for _, r := range want {
		full = AppendFrame(full, r.wall, []byte(r.line))
		ends = append(ends, len(full))
	}
	for at := range full {
		dir := t.TempDir()
		b := bytes.Clone(full)
		b[at] ^= 0x40
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("log-%016x", 0)), b, 0o600)
		frame := 0
		for ends[frame+1] <= at {
			frame++
		}
		last := frame == len(want)-1
		if !last {
			refused(t, dir, filepath.Join(dir, fmt.Sprintf("log-%016x", 0)), int64(ends[frame]))
		}
		l, got, d := openDropping(t, dir)
		l.Close()
		if len(got) > frame || !equal(got, want[:len(got)]) {
			t.Fatalf("byte %d flipped: replayed %v, want at most the first %d", at, got, frame)
		}
		if d == nil || d.Offset > int64(ends[frame]) || d.Corrupt == last {
			t.Fatalf("byte %d flipped: dropped %+v", at, d)
		}
	}
}

// A corrupt frame in a segment that a later segment's valid frames
// follow is refused; dropped on demand, the later segments go too, as
// they follow a hole.
func TestCorruptMiddleSegment(t *testing.T) {
	dir := t.TempDir()
	var a, b []byte
	a = AppendFrame(a, 1, []byte("one"))
	a = append(a, 0xff, 0, 0, 0)
	b = AppendFrame(b, 2, []byte("two"))
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("log-%016x", 0)), a, 0o600)
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("log-%016x", 1)), b, 0o600)
	refused(t, dir, filepath.Join(dir, fmt.Sprintf("log-%016x", 0)), int64(len(a)-4))
	l, got, d := openDropping(t, dir)
	l.Close()
	if !equal(got, []rec{{1, "one"}}) || d == nil || d.Files != 1 || !d.Corrupt {
		t.Fatalf("replayed %v, dropped %+v", got, d)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("log-%016x", 1))); !os.IsNotExist(err) {
		t.Fatalf("the segment after the hole is still there: %v", err)
	}
}

func TestSnapshotRotates(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := open(t, dir)
	appendAll(t, l, records(3))
	s, err := l.BeginSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(50, []byte("after the cut"))
	s.Add(40, []byte("state"))
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, []rec{{60, "later"}})
	l.Close()
	l, got, d := open(t, dir)
	defer l.Close()
	want := []rec{{40, "state"}, {50, "after the cut"}, {60, "later"}}
	if !equal(got, want) || d != nil {
		t.Fatalf("replayed %v (dropped %v), want %v", got, d, want)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*-*")); len(m) != 2 {
		t.Fatalf("files %v, want one snapshot and one segment", m)
	}
	// A second snapshot replaces the first.
	s, _ = l.BeginSnapshot()
	s.Add(70, []byte("state 2"))
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, got, _ = open(t, dir)
	l.Close()
	if !equal(got, []rec{{70, "state 2"}}) {
		t.Fatalf("replayed %v after the second snapshot", got)
	}
}

// A snapshot never completed leaves the log whole.
func TestSnapshotAborted(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := open(t, dir)
	appendAll(t, l, records(2))
	s, _ := l.BeginSnapshot()
	s.Add(1, []byte("partial"))
	appendAll(t, l, []rec{{9, "after"}})
	s.Flush() // on disk, as a crash before Commit leaves it
	l.Close()
	l, got, _ := open(t, dir)
	l.Close()
	if !equal(got, append(records(2), rec{9, "after"})) {
		t.Fatalf("replayed %v", got)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

func TestCorruptSnapshotRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		mess func([]byte) []byte
	}{
		{"flipped", func(b []byte) []byte { b[10] ^= 1; return b }},
		{"cut short", func(b []byte) []byte { return b[:len(b)-3] }},
		{"no trailer", func(b []byte) []byte { return b[:len(AppendFrame(nil, 40, []byte("state")))] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _, _ := open(t, dir)
			s, _ := l.BeginSnapshot()
			s.Add(40, []byte("state"))
			if err := s.Commit(); err != nil {
				t.Fatal(err)
			}
			l.Close()
			name := filepath.Join(dir, fmt.Sprintf("snap-%016x", 1))
			b, _ := os.ReadFile(name)
			os.WriteFile(name, tc.mess(b), 0o600)
			l, err := Open(dir, Batch)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, err = l.Replay(func(int64, []byte) error { return nil })
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "move it out of") {
				t.Fatalf("Replay = %v; want an error naming %s and what to do", err, name)
			}
		})
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := open(t, dir)
	_, err := Open(dir, Batch)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second Open = %v; want an error naming the directory and the pid", err)
	}
	l.Close()
	l2, err := Open(dir, Batch)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	l2.Close()
}

func TestOpenDirectoryRefused(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	if _, err := Open(dir, Batch); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("Open of a 0777 directory = %v", err)
	}
}

func TestModes(t *testing.T) {
	for _, m := range []Mode{Always, Batch, Never} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
		dir := t.TempDir()
		l, err := Open(dir, m)
		if err != nil {
			t.Fatal(err)
		}
		l.Replay(func(int64, []byte) error { return nil })
		appendAll(t, l, records(3))
		l.Close()
		l, got2, _ := open(t, dir)
		l.Close()
		if !equal(got2, records(3)) {
			t.Fatalf("mode %s replayed %v", m, got2)
		}
	}
	if _, err := ParseMode("sometimes"); err == nil {
		t.Fatal("ParseMode took sometimes")
	}
}

func TestAppendAllocs(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := open(t, dir)
	defer l.Close()
	line := []byte("G deploy 1234567890 30 id=abc")
	for range 100 {
		l.Append(1, line)
	}
	l.Sync()
	a := testing.AllocsPerRun(100, func() {
		for range 10 {
			l.Append(1, line)
		}
		l.Sync()
	})
	if a > 0 {
		t.Fatalf("Append and Sync allocate %.1f times per batch", a)
	}
}

// FuzzWALReplay: whatever bytes a segment holds, Replay neither panics
// nor fails; it keeps a prefix of whole frames and the log takes appends
// after it.
func FuzzWALReplay(f *testing.F) {
	var b []byte
	for _, r := range records(3) {
		b = AppendFrame(b, r.wall, []byte(r.line))
	}
	f.Add(b)
	f.Add(b[:len(b)-2])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		seg := filepath.Join(dir, fmt.Sprintf("log-%016x", 0))
		os.WriteFile(seg, data, 0o600)
		l, err := Open(dir, Never)
		if err != nil {
			t.Fatal(err)
		}
		got, d, err := replayAll(l)
		var ce *CorruptError
		if errors.As(err, &ce) {
			// Damage that valid frames follow: refused, the file as it
			// was; dropped on demand.
			l.Close()
			if kept, _ := os.ReadFile(seg); !bytes.Equal(kept, data) {
				t.Fatalf("a refused replay changed the segment: kept %d of %d bytes", len(kept), len(data))
			}
			if l, err = Open(dir, Never); err != nil {
				t.Fatal(err)
			}
			l.DropCorrupt()
			got, d, err = replayAll(l)
			if err == nil && (d == nil || !d.Corrupt) {
				t.Fatalf("dropped %+v after a refusal for damage", d)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		kept, _ := os.ReadFile(seg)
		if !bytes.HasPrefix(data, kept) || d == nil && len(kept) != len(data) {
			t.Fatalf("kept %d of %d bytes, dropped %+v", len(kept), len(data), d)
		}
		var again []rec
		ReadFrames(kept, func(wall int64, r []byte) error {
			again = append(again, rec{wall, string(r)})
			return nil
		})
		if !equal(got, again) {
			t.Fatalf("replayed %v, the kept bytes hold %v", got, again)
		}
		l.Append(1, []byte("x"))
		if _, err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		l.Close()
	})
}

// A segment is preallocated with zeros: they end it without a drop, the
// next appends overwrite them, and a frame torn inside them is still
// cut off.
func TestPreallocatedSegment(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := open(t, dir)
	want := records(3)
	appendAll(t, l, want)
	l.Close()
	st, err := os.Stat(onlySegment(t, dir))
	if err != nil || st.Size() != preallocChunk {
		t.Fatalf("segment size %v (%v), want %d preallocated", st.Size(), err, preallocChunk)
	}
	l, got, d := open(t, dir)
	if d != nil || !equal(got, want) {
		t.Fatalf("reopened: replayed %v, dropped %+v; want %v and no drop", got, d, want)
	}
	more := []rec{{7, "F k0 1"}}
	appendAll(t, l, more)
	l.Close()
	l, got, d = open(t, dir)
	l.Close()
	if d != nil || !equal(got, append(want, more...)) {
		t.Fatalf("after more appends: replayed %v, dropped %+v", got, d)
	}

	// A frame torn after the good ones, zeros after it.
	seg := onlySegment(t, dir)
	data, _ := os.ReadFile(seg)
	var good []byte
	for _, r := range got {
		good = AppendFrame(good, r.wall, []byte(r.line))
	}
	torn := AppendFrame(nil, 9, []byte("G k9 9 10"))
	copy(data[len(good):], torn[:len(torn)-3])
	os.WriteFile(seg, data, 0o600)
	l, got2, d := open(t, dir)
	l.Close()
	if d == nil || d.Offset != int64(len(good)) || d.Bytes != int64(len(torn)-3) || !equal(got2, got) {
		t.Fatalf("torn frame in the preallocated part: replayed %v, dropped %+v; want %d bytes dropped at %d", got2, d, len(torn)-3, len(good))
	}
}

// What Replay reports dropped is the torn frames' bytes, not the zeros
// preallocated after them, in the torn segment and in a later one.
func TestDroppedCountsFramesNotZeros(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := open(t, dir)
	appendAll(t, l, records(2))
	l.Close()
	seg := onlySegment(t, dir)
	data, _ := os.ReadFile(seg)
	end := written(data)
	tear := AppendFrame(nil, 1_700_000_000_123_456_789, []byte("G k 1 10"))[:12]
	if tear[11] == 0 {
		t.Fatal("the tear ends in a zero byte: pick another instant")
	}
	copy(data[end:], tear)
	os.WriteFile(seg, data, 0o600)
	l, _, d := open(t, dir)
	l.Close()
	if d == nil || d.Bytes != 12 || d.Files != 0 {
		t.Fatalf("a 12-byte tear in a preallocated segment: dropped %+v, want 12 bytes", d)
	}

	// A later segment, preallocated too, goes whole after a bad frame:
	// its frames count, its zeros do not.
	later := AppendFrame(nil, 5, []byte("F k 1"))
	next := make([]byte, preallocChunk)
	copy(next, later)
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("log-%016x", 1)), next, 0o600)
	data, _ = os.ReadFile(seg)
	end = written(data)
	data = append(data[:end:end], 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4)
	os.WriteFile(seg, data, 0o600)
	l, _, d = openDropping(t, dir)
	l.Close()
	if d == nil || d.Bytes != int64(8+len(later)) || d.Files != 1 {
		t.Fatalf("a bad frame, then a preallocated segment: dropped %+v, want %d bytes and 1 file", d, 8+len(later))
	}
}

// BenchmarkSync is one group commit of a batch of 20 records through
// the log, inside the preallocated part of a segment.
func BenchmarkSync(b *testing.B) {
	line := []byte("G some-key 12345678901234 30.000 id=node-a#c-1")
	l, err := Open(b.TempDir(), Batch)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if _, _, err := replayAll(l); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for range 20 {
			l.Append(1, line)
		}
		if _, err := l.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFileSync is why segments are preallocated: a write of one
// batch's frames and its fsync on this machine's filesystem, when the
// write grows the file ("append") and when it overwrites zeros already
// there ("overwrite").
func BenchmarkFileSync(b *testing.B) {
	batch := make([]byte, 20*64)
	for _, grow := range []bool{true, false} {
		name := "overwrite"
		if grow {
			name = "append"
		}
		b.Run(name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "seg"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if !grow {
				if err := f.Truncate(0); err != nil {
					b.Fatal(err)
				}
				for range 64 {
					f.Write(zeros)
				}
				f.Sync()
			}
			off := int64(0)
			for b.Loop() {
				if _, err := f.WriteAt(batch, off); err != nil {
					b.Fatal(err)
				}
				if off += int64(len(batch)); !grow && off+int64(len(batch)) > 64*int64(len(zeros)) {
					off = 0
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A symbolic link in the data directory is never followed: a segment
// planted as a link to another file is refused, and that file is
// neither read nor truncated.
func TestLinkInTheDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	content := []byte("a file of lockd's user that a planted link points at\n")
	if err := os.WriteFile(victim, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, fmt.Sprintf("log-%016x", 0xff))); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Batch)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = replayAll(l)
	l.Close()
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("replay of a directory with a linked segment: %v", err)
	}
	if b, _ := os.ReadFile(victim); !bytes.Equal(b, content) {
		t.Fatalf("the file the link points at was changed: %q", b)
	}
}

// A data directory, or a file in it, owned by another user is refused.
func TestDirectoryOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a directory to another user")
	}
	const other = 65534
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, other, other); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Batch); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("open of a directory of uid %d: %v", other, err)
	}
	os.Chown(dir, 0, 0)
	seg := filepath.Join(dir, fmt.Sprintf("log-%016x", 0))
	os.WriteFile(seg, AppendFrame(nil, 1, []byte("one")), 0o600)
	os.Chown(seg, other, other)
	l, err := Open(dir, Batch)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = replayAll(l)
	l.Close()
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("replay of a segment of uid %d: %v", other, err)
	}
}

// A lockd restarted while the one it replaces still drains its clients
// waits for the directory instead of refusing it; one that holds it past
// the wait is refused as before.
func TestOpenWaitingWaitsForTheHolderToStop(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := open(t, dir)
	var told []string
	l2, err := OpenWaiting(dir, Batch, 10*time.Second, func(owner string) {
		told = append(told, owner)
		l.Close() // the holder stops while this one waits
	})
	if err != nil {
		t.Fatalf("OpenWaiting while the holder closes: %v", err)
	}
	if len(told) != 1 || !strings.Contains(told[0], fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("waiting told %q, want the holder's pid once", told)
	}
	start := time.Now()
	_, err = OpenWaiting(dir, Batch, 50*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another lockd") {
		t.Fatalf("OpenWaiting of a directory held past the wait = %v", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("refused after %s, want after the 50ms wait", took)
	}
	l2.Close()
}
