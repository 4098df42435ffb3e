package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cluster/wal"
)

func withDisk(dir string, mode wal.Mode) func(*Config) {
	return func(c *Config) { c.DataDir, c.Fsync = dir, mode }
}

// A single node with a data directory keeps its holders across a crash:
// the same token, the lease still running, the key still refused to
// others, and its next token above the old ones.
func TestDiskSingleNodeRestart(t *testing.T) {
	playsFaults(t)
	for _, mode := range []wal.Mode{wal.Batch, wal.Always, wal.Never} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir() + "/data"
			addr := freeAddrs(t, 1)[0]
			a := startNodeWith(t, addr, nil, withDisk(dir, mode))
			w := dialWire(t, addr)
			w.send("A deploy 30 0 id=job1", "A gone 30 0")
			tok := w.expect(`A deploy (\d+)`)[1]
			gone := w.expect(`A gone (\d+)`)[1]
			w.send("R gone " + gone)
			w.expect(`R gone ok`)
			w.send("S -")
			if st := strings.Join(w.expect(`S - .*`), ""); !strings.Contains(st, "durability=disk:"+mode.String()) {
				t.Fatalf("status %q does not say the durability", st)
			}
			a.crash()

			b := startNodeWith(t, addr, nil, withDisk(dir, mode))
			w = dialWire(t, addr)
			w.send("Q deploy")
			w.expect(fmt.Sprintf(`Q deploy %s \d+(\.\d+)? 0 id=%s,job1`, tok, tok))
			w.send("A deploy 30 0.1")
			w.expect(`T deploy`)
			w.send("Q gone")
			w.expect(`Q gone - - 0`)
			w.send("A other 30 0")
			if next := w.expect(`A other (\d+)`)[1]; mustUint(t, next) <= mustUint(t, gone) {
				t.Fatalf("token %s after the restart is not above %s", next, gone)
			}
			w.send("N deploy " + tok + " 30")
			w.expect(`N deploy ok`)
			b.shutdown()
		})
	}
}

// A second node on the same data directory is refused, naming it.
func TestDiskDirectoryLocked(t *testing.T) {
	dir := t.TempDir() + "/data"
	addrs := freeAddrs(t, 2)
	startNodeWith(t, addrs[0], nil, withDisk(dir, wal.Batch))
	_, err := New(Config{Listen: addrs[1], DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second node on %s: %v", dir, err)
	}
}

// Answers a pipelined client sent in one batch share fsyncs: far fewer
// than the records.
func TestDiskGroupCommit(t *testing.T) {
	dir := t.TempDir() + "/data"
	addr := freeAddrs(t, 1)[0]
	a := startNodeWith(t, addr, nil, withDisk(dir, wal.Batch))
	w := dialWire(t, addr)
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("A k%d 30 0", i))
	}
	w.send(lines...)
	for i := range 200 {
		w.expect(fmt.Sprintf(`A k%d \d+`, i))
	}
	done, fsyncs := a.disk.log.Appended(), a.disk.log.Fsyncs()
	if done < 200 || fsyncs >= 100 {
		t.Fatalf("%d records logged for 200 grants, with %d fsyncs", done, fsyncs)
	}
	t.Logf("200 pipelined grants: %d fsyncs", fsyncs)
}

// A standby with a data directory acknowledges what is on its disk, and
// a full-cluster crash keeps the locks with their tokens.
func TestDiskClusterRestart(t *testing.T) {
	playsFaults(t)
	addrs := freeAddrs(t, 3)
	dirs := []string{t.TempDir() + "/a", t.TempDir() + "/b", t.TempDir() + "/c"}
	start := func() []*testNode {
		var ns []*testNode
		for i := range addrs {
			ns = append(ns, startNodeWith(t, addrs[i], addrs, withDisk(dirs[i], wal.Batch)))
		}
		return ns
	}
	ns := start()
	waitFor(t, "a active, b and c synced", func() bool {
		return ns[0].roleIs(Active) && ns[1].isSynced() && ns[2].isSynced()
	})
	w := dialWire(t, addrs[0])
	w.send("A k1 60 0", "A k2 60 0")
	t1 := w.expect(`A k1 (\d+)`)[1]
	t2 := w.expect(`A k2 (\d+)`)[1]
	for _, n := range ns {
		n.crash()
	}
	ns = start()
	waitFor(t, "an active", func() bool {
		for _, n := range ns {
			if n.roleIs(Active) {
				return true
			}
		}
		return false
	})
	w = dialWire(t, addrs[0])
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.send("Q k1")
		w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := w.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "Q k1 "+t1+" ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("k1 after the full restart: %q, want token %s", line, t1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.send("Q k2")
	w.expect(`Q k2 ` + t2 + ` .*`)
	w.send("A k3 60 0")
	if t3 := w.expect(`A k3 (\d+)`)[1]; mustUint(t, t3) <= mustUint(t, t2) {
		t.Fatalf("token %s after the restart is not above %s", t3, t2)
	}
}

// Past the bound the log is snapshotted, and the snapshot plus the log
// after it hold the whole state.
func TestDiskSnapshotRestart(t *testing.T) {
	playsFaults(t)
	dir := t.TempDir() + "/data"
	addr := freeAddrs(t, 1)[0]
	small := func(c *Config) { c.DataDir, c.SnapshotAfter = dir, 2000 }
	a := startNodeWith(t, addr, nil, small)
	w := dialWire(t, addr)
	toks := map[int]string{}
	for i := range 100 {
		w.send(fmt.Sprintf("A k%d 60 0", i))
		toks[i] = w.expect(fmt.Sprintf(`A k%d (\d+)`, i))[1]
		if i%2 == 1 {
			w.send(fmt.Sprintf("R k%d %s", i, toks[i]))
			w.expect(fmt.Sprintf(`R k%d ok`, i))
		}
	}
	waitFor(t, "a snapshot", func() bool {
		m, _ := filepath.Glob(dir + "/snap-*")
		return len(m) > 0
	})
	a.crash()
	startNodeWith(t, addr, nil, small)
	w = dialWire(t, addr)
	for i := range 100 {
		w.send(fmt.Sprintf("Q k%d", i))
		if i%2 == 1 {
			w.expect(fmt.Sprintf(`Q k%d - - 0`, i))
		} else {
			w.expect(fmt.Sprintf(`Q k%d %s .*`, i, toks[i]))
		}
	}
}

// A torn tail (a crash in the middle of a write) is cut off at start: the
// node serves from the last good record.
func TestDiskTornTailStarts(t *testing.T) {
	playsFaults(t)
	dir := t.TempDir() + "/data"
	addr := freeAddrs(t, 1)[0]
	a := startNodeWith(t, addr, nil, withDisk(dir, wal.Batch))
	w := dialWire(t, addr)
	w.send("A deploy 30 0")
	tok := w.expect(`A deploy (\d+)`)[1]
	a.crash()
	segs, _ := filepath.Glob(dir + "/log-*")
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	f, err := os.OpenFile(segs[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(wal.AppendFrame(nil, 1, []byte("G deploy 1 30"))[:9]) // cut short
	f.Close()
	startNodeWith(t, addr, nil, withDisk(dir, wal.Batch))
	w = dialWire(t, addr)
	w.send("Q deploy")
	w.expect(`Q deploy ` + tok + ` .*`)
}

// A corrupt snapshot refuses to start, naming the file.
func TestDiskCorruptSnapshotRefused(t *testing.T) {
	dir := t.TempDir() + "/data"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "snap-0000000000000001")
	os.WriteFile(name, []byte("not a snapshot"), 0o600)
	_, err := New(Config{Listen: freeAddrs(t, 1)[0], DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "move it out of") {
		t.Fatalf("New on a corrupt snapshot: %v", err)
	}
}
