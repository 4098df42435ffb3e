package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

const (
	headerSize = 8 // length, crc
	wallSize   = 8
	// MaxRecord bounds one record: a longer frame length is corruption.
	MaxRecord = 1 << 20
	dirMode   = 0o700
	fileMode  = 0o600
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame appends the frame of record rec appended at wall (unix
// nanoseconds) to b.
func AppendFrame(b []byte, wall int64, rec []byte) []byte {
	n := wallSize + len(rec)
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(wall))
	b = append(b, rec...)
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+headerSize:], castagnoli))
	return b
}

// errTorn is a frame cut short: the file ends inside it.
var errTorn = errors.New("a frame cut short")

// ReadFrames calls fn for every frame of data in order and returns how
// many bytes of whole, valid frames precede the first bad one (all of
// data when none is), and why that one is bad. fn's rec aliases data.
func ReadFrames(data []byte, fn func(wall int64, rec []byte) error) (int, error) {
	off := 0
	for off < len(data) {
		if len(data)-off < headerSize {
			return off, errTorn
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n < wallSize || n > wallSize+MaxRecord {
			return off, fmt.Errorf("a frame length of %d bytes", n)
		}
		if len(data)-off-headerSize < n {
			return off, errTorn
		}
		p := data[off+headerSize : off+headerSize+n]
		if crc32.Checksum(p, castagnoli) != sum {
			return off, errors.New("a checksum mismatch")
		}
		if err := fn(int64(binary.LittleEndian.Uint64(p)), p[wallSize:]); err != nil {
			return off, err
		}
		off += headerSize + n
	}
	return off, nil
}
