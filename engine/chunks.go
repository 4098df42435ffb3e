package engine

// chunks is a list of T kept in arrays of chunkLen: it grows without
// copying what it holds and without leaving the array it outgrew to the
// collector, and gives its arrays back as it shrinks. The key list and
// the lease heap, which can hold a million entries each, are chunks: a
// slice leaves every array it outgrows as garbage in the process's RSS
// until the collector runs, and never shrinks.
type chunks[T any] struct {
	c []*[chunkLen]T
	n int
}

const (
	chunkBits = 10
	chunkLen  = 1 << chunkBits
)

func (s *chunks[T]) len() int { return s.n }

// at returns the i-th entry; i < len.
func (s *chunks[T]) at(i int) *T { return &s.c[i>>chunkBits][i&(chunkLen-1)] }

func (s *chunks[T]) push(v T) {
	if s.n == len(s.c)*chunkLen {
		s.c = append(s.c, new([chunkLen]T))
	}
	*s.at(s.n) = v
	s.n++
}

// pop removes and returns the last entry. An array that stays empty with
// another empty one before it is given back: one spare, so that an entry
// that comes and goes at a chunk's edge does not allocate each time.
func (s *chunks[T]) pop() T {
	s.n--
	p := s.at(s.n)
	v := *p
	var zero T
	*p = zero
	if k := len(s.c); k > 1 && s.n <= (k-2)*chunkLen {
		s.c[k-1] = nil
		s.c = s.c[:k-1]
	}
	return v
}

// all yields the entries in order; the list must not change meanwhile.
func (s *chunks[T]) all(yield func(int, T) bool) {
	for i := range s.n {
		if !yield(i, *s.at(i)) {
			return
		}
	}
}
