//go:build unix

package wal

import (
	"fmt"
	"os"
	"syscall"
)

// noFollow makes an open of a data file fail on a symbolic link: a link
// planted in the directory must not make lockd read, truncate or write
// another file (as root, any file).
const noFollow = syscall.O_NOFOLLOW

// checkOwner refuses fi, a data directory or file at name, when it is
// not owned by the user lockd runs as: another user could have planted
// records in it, or links to files of lockd's user.
func checkOwner(name string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, not by the user lockd runs as (uid %d): another user could have planted records or links in it; chown it to uid %d, or pick another --data-dir", name, st.Uid, uid, uid)
	}
	return nil
}
