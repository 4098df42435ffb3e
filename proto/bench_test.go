package proto

import "testing"

// The hot path of a server: read an acquire, write a grant.

func BenchmarkParseAcquire(b *testing.B) {
	line := []byte("A deploy 30 10\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := Parse(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendGranted(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendGranted(buf[:0], "deploy", tok)
	}
}

// The hot path of a client: read the grant.
func BenchmarkParseAnswerGranted(b *testing.B) {
	line := []byte("A deploy 7360982537641984001\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseAnswer(line); err != nil {
			b.Fatal(err)
		}
	}
}
