package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// openFile opens a file of the data directory, never through a symbolic
// link, and refuses one that is not a regular file owned by lockd's
// user.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if noFollow == 0 {
		if fi, err := os.Lstat(name); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, linkError(name)
		}
	}
	f, err := os.OpenFile(name, flag|noFollow, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, linkError(name)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%s): move it out of the data directory", name, fi.Mode().Type())
	}
	if err == nil {
		err = checkOwner(name, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func linkError(name string) error {
	return fmt.Errorf("%s is a symbolic link: lockd never follows one in its data directory (it could lead to any file); move it out", name)
}

// readFile reads a file of the data directory, as openFile opens it.
func readFile(name string) ([]byte, error) {
	f, err := openFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
