package wal

import (
	"fmt"
)

// Mode is when Sync makes what it writes durable.
type Mode uint8

const (
	// Batch fsyncs once per Sync: every record appended since the last.
	Batch Mode = iota
	// Always fsyncs after every record: one fsync per record.
	Always
	// Never writes without fsync: the records survive the process, not
	// a power cut the kernel has not flushed before.
	Never
)

// ParseMode reads the --fsync words.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "batch":
		return Batch, nil
	case "always":
		return Always, nil
	case "never":
		return Never, nil
	}
	return 0, fmt.Errorf("--fsync %q is not always, batch or never", s)
}

func (m Mode) String() string {
	switch m {
	case Always:
		return "always"
	case Never:
		return "never"
	}
	return "batch"
}
