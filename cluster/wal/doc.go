// Package wal keeps a node's write-ahead log and snapshots in a data
// directory: the file format, its checksums, the order of writes and
// fsyncs, and the directory's lock. It knows nothing of locks or of the
// cluster: a record is an opaque line with the wall-clock instant it was
// appended at; what the lines say is package core's.
//
// # Files
//
//	LOCK               flock(2)ed while a process has the directory open; says its pid and host
//	snap-NNNNNNNNNNNNNNNN  the state before log segment N (the newest one counts)
//	log-NNNNNNNNNNNNNNNN   segment N: the records appended after snapshot N, in order
//
// The directory is created 0700 and every file 0600, since the records
// name every lock and its holder; a directory others may write to, or
// one or a file owned by another user than lockd's, is refused, since
// they could plant records. A file is never opened through a symbolic
// link: one planted in the directory could make lockd (as root, say)
// truncate any file.
//
// # Frames
//
// Every file is a sequence of frames:
//
//	length  uint32, little-endian: the payload's length
//	crc     uint32, little-endian: CRC-32C (Castagnoli) of the payload
//	payload wall-clock unix nanoseconds (int64, little-endian), then the record
//
// A segment is preallocated: it grows by a MiB of zeros at a time, ahead
// of the frames that overwrite them, so an fsync commits data and no
// file size. The zeros after a segment's last frame are its end.
//
// A snapshot ends with a trailer frame whose record is empty and whose
// instant is the number of frames before it, so that a snapshot cut short
// is told from a complete one.
//
// # Writes
//
// Append buffers a record in memory; Sync writes everything appended
// since the last Sync with one write and makes it durable with one fsync
// (group commit): a caller that answers only after Sync returned has
// answered only what is on disk. A snapshot is written beside the log to
// a temporary file, fsynced, renamed into place, and the directory
// fsynced; only then are the segments it covers removed. Records
// appended after BeginSnapshot go to a new segment, so the snapshot plus
// the segments from its number on always hold the whole state.
//
// # Reading back
//
// Replay reads the newest snapshot, then every segment from its number
// on. A frame cut short or failing its checksum that no valid frame
// follows is where the log ends: a crash in the middle of a write leaves
// exactly that. Replay truncates it off (with any later segment) and
// reports what it dropped. A bad frame that valid frames follow is
// damage, not a crash: starting from before it would forget the later
// records (a lock granted again while its holder still holds it), so it
// is an error naming the file and the offset, unless the log was told to
// drop it and all after it (DropCorrupt, --drop-after-corruption). A
// corrupt snapshot is an error: it stands for records no longer kept,
// so starting without it would silently lose them.
package wal
