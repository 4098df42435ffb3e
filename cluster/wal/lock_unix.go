//go:build unix

package wal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockDir takes an exclusive flock on DIR/LOCK, held while the file is
// open, and writes this process's pid and host into it, for the error a
// second process gets. A lock held by another process is tried again
// until wait has passed: waiting is told who holds it, once.
func lockDir(dir string, wait time.Duration, waiting func(owner string)) (*os.File, error) {
	name := filepath.Join(dir, "LOCK")
	f, err := openFile(name, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %v", name, err)
	}
	deadline := time.Now().Add(wait)
	for told := false; ; told = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		owner := lockOwner(name)
		if err != syscall.EWOULDBLOCK || !time.Now().Before(deadline) {
			f.Close()
			return nil, fmt.Errorf("data directory %s is in use by another lockd (%s): stop it, or give this node a --data-dir of its own", dir, owner)
		}
		if !told && waiting != nil {
			waiting(owner)
		}
		time.Sleep(min(lockPoll, time.Until(deadline)))
	}
	host, _ := os.Hostname()
	f.Truncate(0)
	f.WriteAt([]byte(fmt.Sprintf("pid %d on host %s\n", os.Getpid(), host)), 0)
	return f, nil
}

// lockOwner is what the holder of the lock file name wrote into it.
func lockOwner(name string) string {
	owner, _ := readFile(name)
	who := strings.TrimSpace(string(bytes.ToValidUTF8(owner, nil)))
	if who == "" {
		who = "a process that has not said who it is yet"
	}
	return who
}
