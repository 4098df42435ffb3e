//go:build !unix

package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// lockDir creates DIR/LOCK exclusively: without flock(2) a lock file
// left by a crash must be removed by hand, which the error says. A lock
// file that exists is tried again until wait has passed: waiting is
// told, once.
func lockDir(dir string, wait time.Duration, waiting func(owner string)) (*os.File, error) {
	name := filepath.Join(dir, "LOCK")
	deadline := time.Now().Add(wait)
	for told := false; ; told = true {
		f, err := openFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
		if err == nil {
			return f, nil
		}
		if !os.IsExist(err) {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("data directory %s is in use by another lockd (%s exists): stop it, or, if none runs, remove %s", dir, name, name)
		}
		if !told && waiting != nil {
			waiting(name + " exists")
		}
		time.Sleep(min(lockPoll, time.Until(deadline)))
	}
}
