package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockd-io/lockd/cluster/wal"
)

// A flipped byte in the first of several records of a node's log is no
// torn end: the node refuses to start, naming the file and the offset,
// rather than grant the keys the later records hold again; asked to, it
// starts from before the damage, without them.
func TestDiskDamageBeforeValidRecordsRefusesToStart(t *testing.T) {
	playsFaults(t)
	dir := t.TempDir() + "/data"
	addr := freeAddrs(t, 1)[0]
	a := startNodeWith(t, addr, nil, withDisk(dir, wal.Batch))
	w := dialWire(t, addr)
	w.send("A k1 300 0", "A k2 300 0", "A k3 300 0")
	for _, k := range []string{"k1", "k2", "k3"} {
		w.expect(`A ` + k + ` \d+`)
	}
	a.crash()
	segs, _ := filepath.Glob(filepath.Join(dir, "log-*"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[20] ^= 0x40 // inside the first frame's payload
	if err := os.WriteFile(segs[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Listen: addr, DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), segs[0]+" is corrupt at byte 0") || !strings.Contains(err.Error(), "--drop-after-corruption") {
		t.Fatalf("a node on a log damaged before valid records: %v", err)
	}
	startNodeWith(t, addr, nil, func(c *Config) {
		withDisk(dir, wal.Batch)(c)
		c.DropCorrupt = true
	})
	w = dialWire(t, addr)
	w.send("Q k3")
	w.expect(`Q k3 - - 0`)
}
