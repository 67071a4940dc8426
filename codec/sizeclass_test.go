package codec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	rediscache "github.com/go-redis/cache/v9"
	"github.com/golang/snappy"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/vmihailenco/msgpack/v5"
)

// sizeClass is a set of values of about one size, as a Cache of their type
// stores them (with its schema fingerprint and the write time).
type sizeClass struct {
	name   string
	values []any
}

// structClasses are struct records of internal/harness/corpus in the size classes
// of issue 24: 16 B (a stock line), 64 B (an article's category), 256 B
// (an inventory item), 1 KB (a page of five items), 16 KB (an article).
func structClasses() []sizeClass {
	arts := corpus.Articles(1, 40)
	items := corpus.Inventory(1, 7, 200)
	var c [5]sizeClass
	c[0].name, c[1].name, c[2].name, c[3].name, c[4].name = "16 B Stock", "64 B Category", "256 B Item", "1 KB []Item (5)", "16 KB Article"
	for _, s := range corpus.Stocks(1, 200) {
		c[0].values = append(c[0].values, s)
	}
	for _, a := range arts {
		c[1].values = append(c[1].values, a.Category)
		c[4].values = append(c[4].values, a)
	}
	for i, it := range items {
		c[2].values = append(c[2].values, it)
		if i%5 == 0 && i+5 <= len(items) {
			c[3].values = append(c[3].values, items[i:i+5])
		}
	}
	return c[:]
}

// stringClasses are strings of article text in the same classes, and the
// 17-character string of the issue.
func stringClasses() []sizeClass {
	var text strings.Builder
	for _, a := range corpus.Articles(2, 8) {
		for _, p := range a.Body {
			text.WriteString(p)
		}
	}
	all := []rune(text.String())
	var out []sizeClass
	for _, n := range []int{17, 16, 64, 256, 1024, 16384} {
		c := sizeClass{name: fmt.Sprintf("%d B string", n)}
		if n == 17 {
			c.name = "17-char ASCII string"
			c.values = []any{"user:42 logged in"}
			out = append(out, c)
			continue
		}
		for off := 0; len(c.values) < 20; off += 997 {
			// n bytes of UTF-8 (cut at a rune boundary).
			var b []byte
			for i := off % len(all); len(b) < n; i = (i + 1) % len(all) {
				b = fmt.Appendf(b, "%c", all[i])
			}
			for len(b) > n {
				r := []rune(string(b))
				b = []byte(string(r[:len(r)-1]))
			}
			c.values = append(c.values, string(b))
		}
		out = append(out, c)
	}
	return out
}

type classSizes struct {
	seed, goRedis, v2, compact []int // bytes stored per value
}

func measureClass(t testing.TB, c sizeClass) classSizes {
	t.Helper()
	v2, cmp := mustNew(t, Options{}), mustNew(t, Options{Compact: true, PositionalStructs: true})
	grc := rediscache.New(&rediscache.Options{})
	var s classSizes
	for _, v := range c.values {
		mp, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		s.seed = append(s.seed, len(snappy.Encode(nil, mp)))
		g, err := grc.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		s.goRedis = append(s.goRedis, len(g))
		f := Fields{Schema: Fingerprint(reflect.TypeOf(v), "msgpack"), HasSchema: true, Written: time.Now()}
		a, _, err := v2.EncodeWith(nil, v, f)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := cmp.EncodeWith(nil, v, f)
		if err != nil {
			t.Fatal(err)
		}
		s.v2, s.compact = append(s.v2, len(a)), append(s.compact, len(b))
	}
	return s
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestCompactSizeClasses checks the byte targets of issue 24 on every
// size class: struct records stored in at most the seed's bytes
// (msgpack+snappy, seed 000's codec, summed over the class), strings in at
// most the seed's bytes + 8 (every value). Sizes are deterministic, so
// they are asserted; BENCHMARKS.md ("Small values") has the table
// (go test ./codec -run TestCompactSizeClasses -v).
func TestCompactSizeClasses(t *testing.T) {
	t.Logf("| class | values | msgpack+snappy (seed) | go-redis/cache | kura v2 | kura compact | compact / seed |")
	t.Logf("|---|---:|---:|---:|---:|---:|---:|")
	row := func(c sizeClass, s classSizes) {
		t.Logf("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.3f |", c.name, len(c.values),
			avg(s.seed), avg(s.goRedis), avg(s.v2), avg(s.compact), float64(sum(s.compact))/float64(sum(s.seed)))
	}
	for _, c := range structClasses() {
		s := measureClass(t, c)
		row(c, s)
		if sum(s.compact) > sum(s.seed) {
			t.Errorf("%s: compact stores %d B, seed %d B: over 1.0x", c.name, sum(s.compact), sum(s.seed))
		}
	}
	for _, c := range stringClasses() {
		s := measureClass(t, c)
		row(c, s)
		// go-redis/cache (the seed's codec as a library) stores strings as
		// they are; msgpack+snappy compresses them. On 256-byte text
		// Snappy's encoder beats both of S2's Snappy-compatible ones:
		// kura's own (snappyEncoder, the third try under 1 KB) brings the
		// class within the budget (BENCHMARKS.md reports both peers).
		if sum(s.compact) > sum(s.goRedis)+8*len(c.values) {
			t.Errorf("%s: compact %.1f B a value, go-redis/cache %.1f B: over + 8", c.name, avg(s.compact), avg(s.goRedis))
		}
		if sum(s.compact) > sum(s.seed)+8*len(c.values) {
			t.Errorf("%s: compact %.1f B a value, msgpack+snappy %.1f B: over + 8", c.name, avg(s.compact), avg(s.seed))
		}
	}
}

func avg(xs []int) float64 { return float64(sum(xs)) / float64(len(xs)) }

// BenchmarkCompactClasses times encode and decode per size class for
// msgpack+snappy (the seed), kura version 2 and kura compact, as a Cache
// uses them (a fingerprint, the write time; decoding into the type):
//
//	go test ./codec -run '^$' -bench CompactClasses -benchtime 2000x -count 5
func BenchmarkCompactClasses(b *testing.B) {
	for _, c := range append(structClasses(), stringClasses()[1:]...) {
		typ := reflect.TypeOf(c.values[0])
		fresh := func() any { return reflect.New(typ).Interface() }
		f := Fields{Schema: Fingerprint(typ, "msgpack"), HasSchema: true, Written: time.Now()}
		for _, s := range []struct {
			name string
			enc  func(v any) ([]byte, error)
			dec  func(b []byte, dst any) error
		}{
			{"msgpack+snappy", func(v any) ([]byte, error) {
				mp, err := msgpack.Marshal(v)
				return snappy.Encode(nil, mp), err
			}, func(b []byte, dst any) error {
				raw, err := snappy.Decode(nil, b)
				if err != nil {
					return err
				}
				return msgpack.Unmarshal(raw, dst)
			}},
			kuraCodecScheme("kura-v2", mustNew(b, Options{}), f),
			kuraCodecScheme("kura-compact", mustNew(b, Options{Compact: true, PositionalStructs: true}), f),
		} {
			encoded := make([][]byte, len(c.values))
			b.Run(c.name+"/encode/"+s.name, func(b *testing.B) {
				cpu := startCPU()
				for i := range b.N {
					out, err := s.enc(c.values[i%len(c.values)])
					if err != nil {
						b.Fatal(err)
					}
					encoded[i%len(c.values)] = out
				}
				cpu.report(b)
			})
			b.Run(c.name+"/decode/"+s.name, func(b *testing.B) {
				for i := range encoded {
					if encoded[i] == nil {
						encoded[i], _ = s.enc(c.values[i])
					}
				}
				cpu := startCPU()
				for i := range b.N {
					if err := s.dec(encoded[i%len(encoded)], fresh()); err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b)
			})
		}
	}
}

func kuraCodecScheme(name string, c *Codec, f Fields) struct {
	name string
	enc  func(v any) ([]byte, error)
	dec  func(b []byte, dst any) error
} {
	return struct {
		name string
		enc  func(v any) ([]byte, error)
		dec  func(b []byte, dst any) error
	}{name, func(v any) ([]byte, error) {
		out, _, err := c.EncodeWith(nil, v, f)
		return out, err
	}, func(b []byte, dst any) error {
		_, err := c.DecodeSchema(b, dst, f.Schema)
		return err
	}}
}
