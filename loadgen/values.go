package loadgen

import (
	"math/rand/v2"
)

// valuePool is a block of pre-generated value bytes; a value of size n is a
// slice of it at a random offset, so writing values allocates nothing.
type valuePool struct {
	buf []byte
}

// poolSlack is how much larger than the largest value the pool is, so that
// values at random offsets differ.
const poolSlack = 64 << 10

// words give text-like values: they compress about 3x with snappy or
// zstd, as JSON or HTML caches do.
var words = []string{
	"the", "cache", "value", "user", "article", "id", "name", "created_at",
	"title", "body", "of", "and", "a", "to", "in", "is", "that", "for",
	"status", "active", "count", "items", "price", "2024-05-01T12:00:00Z",
	"{", "}", "\"", ":", ",", "true", "false", "null", "tags", "redis",
	"memcached", "session", "profile", "region", "tokyo", "seoul",
}

func newValuePool(s *settings, seed uint64) *valuePool {
	n := s.sizes.max + poolSlack
	buf := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 0x6b757261))
	if s.DataContent == "text" {
		i := 0
		for i < n {
			w := words[r.IntN(len(words))]
			i += copy(buf[i:], w)
			if i < n {
				buf[i] = ' '
				i++
			}
		}
	} else {
		for i := 0; i+8 <= n; i += 8 {
			v := r.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
	}
	// Both protocols frame values by length, so any byte may appear.
	return &valuePool{buf: buf}
}

// size draws a value size.
func (sp *sizeSpec) draw(r *rand.Rand) int {
	if len(sp.sizes) > 0 {
		w := r.IntN(sp.weights[len(sp.weights)-1])
		for i, cw := range sp.weights {
			if w < cw {
				return sp.sizes[i]
			}
		}
		return sp.sizes[len(sp.sizes)-1]
	}
	if sp.max == sp.min {
		return sp.min
	}
	return sp.min + r.IntN(sp.max-sp.min+1)
}

// value returns n bytes at a random offset.
func (p *valuePool) value(r *rand.Rand, n int) []byte {
	off := r.IntN(len(p.buf) - n + 1)
	return p.buf[off : off+n]
}
