package client

import "unicode/utf8"

// MaxValueLen is the longest value a holder may carry (Campaign,
// Proclaim), in bytes of UTF-8 before it is encoded for the wire.
const MaxValueLen = 1024

// checkValue refuses a value the wire cannot carry: empty (an observer
// reads "" as no leader), longer than MaxValueLen bytes, or not UTF-8.
// Spaces and any other character are fine: the value travels
// percent-encoded.
func checkValue(op, key, value string) error {
	switch {
	case value == "":
		return argErrorf("%s %s: the value is empty: give what observers should see of this leader (an address, a name); \"\" reads as no leader", op, key)
	case len(value) > MaxValueLen:
		return argErrorf("%s %s: a value of %d bytes is too long: at most %d bytes; keep more elsewhere under that name", op, key, len(value), MaxValueLen)
	case !utf8.ValidString(value):
		return argErrorf("%s %s: value %q is not UTF-8 text", op, key, value)
	}
	return nil
}

// unreserved reports whether b stands for itself in an encoded value:
// A-Z a-z 0-9 - . _ ~, as RFC 3986 has it. Every other byte is written
// %XX.
func unreserved(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '.' || b == '_' || b == '~'
}

const upperHex = "0123456789ABCDEF"

// appendValue writes v percent-encoded, as value=V carries it.
func appendValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if unreserved(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return b
}

// encodeValue is v as value=V carries it.
func encodeValue(v string) string { return string(appendValue(nil, v)) }
