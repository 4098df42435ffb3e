//go:build unix

package wal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockDir takes an exclusive flock on DIR/LOCK, held while the file is
// open, and writes this process's pid and host into it, for the error a
// second process gets.
func lockDir(dir string) (*os.File, error) {
	name := filepath.Join(dir, "LOCK")
	f, err := openFile(name, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %v", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := readFile(name)
		f.Close()
		who := strings.TrimSpace(string(bytes.ToValidUTF8(owner, nil)))
		if who == "" {
			who = "a process that has not said who it is yet"
		}
		return nil, fmt.Errorf("data directory %s is in use by another lockd (%s): stop it, or give this node a --data-dir of its own", dir, who)
	}
	host, _ := os.Hostname()
	f.Truncate(0)
	f.WriteAt([]byte(fmt.Sprintf("pid %d on host %s\n", os.Getpid(), host)), 0)
	return f, nil
}
