//go:build !unix

package wal

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir creates DIR/LOCK exclusively: without flock(2) a lock file
// left by a crash must be removed by hand, which the error says.
func lockDir(dir string) (*os.File, error) {
	name := filepath.Join(dir, "LOCK")
	f, err := openFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return nil, fmt.Errorf("data directory %s is in use by another lockd (%s exists): stop it, or, if none runs, remove %s", dir, name, name)
	}
	return f, nil
}
