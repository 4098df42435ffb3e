package proto

import (
	"strings"
	"unicode/utf8"
)

// Values (value=V) and the keys of a set listed in one word (wset=,
// and the J record of a set) are percent-encoded: a byte other than
// A-Z a-z 0-9 - . _ ~ may be written %XX, and a space, '%', '=', ',',
// '+' and any byte at or below 0x20 or at or above 0x7f must be, so
// that the word holds no separator of the grammar. A decoded value is
// UTF-8 of at most MaxValueLen bytes.

// valueRaw reports whether c may stand for itself in an encoded word.
func valueRaw(c byte) bool {
	return c > ' ' && c < 0x7f && c != '%' && c != '=' && c != ',' && c != '+'
}

// unreserved reports whether AppendValue writes c as itself.
func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

const hexDigits = "0123456789ABCDEF"

// AppendValue writes v percent-encoded: every byte but the unreserved
// ones as %XX.
func AppendValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if unreserved(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	return b
}

// EncodeValue is AppendValue to a string.
func EncodeValue(v string) string { return string(AppendValue(nil, v)) }

// DecodeValue reads a percent-encoded value=V, or says why it cannot:
// a byte that must be encoded and is not, a % not followed by two hex
// digits, more than MaxValueLen bytes decoded, or bytes that are not
// UTF-8.
func DecodeValue(w string) (string, string) {
	if len(w) > 3*MaxValueLen {
		return "", "is longer than " + itoa(MaxValueLen) + " bytes decoded"
	}
	if strings.IndexByte(w, '%') < 0 {
		for i := 0; i < len(w); i++ {
			if !valueRaw(w[i]) {
				return "", "has a byte that must be percent-encoded (%XX)"
			}
		}
		if len(w) > MaxValueLen {
			return "", "is longer than " + itoa(MaxValueLen) + " bytes decoded"
		}
		return w, ""
	}
	b, bad := unescape(make([]byte, 0, len(w)), w)
	switch bad {
	case badPercent:
		return "", "has a % without two hex digits after it"
	case badRaw:
		return "", "has a byte that must be percent-encoded (%XX)"
	}
	if len(b) > MaxValueLen {
		return "", "is longer than " + itoa(MaxValueLen) + " bytes decoded"
	}
	if !utf8.Valid(b) {
		return "", "is not UTF-8 once decoded"
	}
	return string(b), ""
}

// What unescape found wrong.
const (
	badNone    = iota
	badPercent // a % not followed by two hex digits
	badRaw     // a byte that must be percent-encoded and is not
)

// unescape appends w, percent-decoded, to b, or says what is wrong with
// it.
func unescape(b []byte, w string) ([]byte, int) {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c == '%' {
			if i+2 >= len(w) {
				return b, badPercent
			}
			hi, lo := unhex(w[i+1]), unhex(w[i+2])
			if hi < 0 || lo < 0 {
				return b, badPercent
			}
			b = append(b, byte(hi<<4|lo))
			i += 2
			continue
		}
		if !valueRaw(c) {
			return b, badRaw
		}
		b = append(b, c)
	}
	return b, badNone
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// AppendKeys writes keys as one word, each percent-encoded, joined by
// '+': the keys of a set as wset= and the J record list them.
func AppendKeys(b []byte, keys []string) []byte {
	for i, k := range keys {
		if i > 0 {
			b = append(b, '+')
		}
		b = AppendValue(b, k)
	}
	return b
}

// SplitKeys reads a word AppendKeys wrote: at most MaxSetKeys keys,
// each a key of the grammar; false when it is not one.
func SplitKeys(w string) ([]string, bool) {
	if w == "" || strings.Count(w, "+") >= MaxSetKeys {
		return nil, false
	}
	parts := strings.Split(w, "+")
	for i, p := range parts {
		k, msg := decodeKey(p)
		if msg != "" {
			return nil, false
		}
		parts[i] = k
	}
	return parts, true
}

// decodeKey reads one percent-encoded key.
func decodeKey(p string) (string, string) {
	if len(p) > 3*MaxKeyLen {
		return "", "too long"
	}
	b, bad := unescape(nil, p)
	switch bad {
	case badPercent:
		return "", "bad %"
	case badRaw:
		return "", "raw byte"
	}
	if msg := CheckKey(b); msg != "" {
		return "", msg
	}
	return string(b), ""
}
