package slot_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/slot"
)

// known are slots as redis-server 7 answers CLUSTER KEYSLOT; TestOfServer
// re-asks a live server, so a drift in either shows up.
var known = []struct {
	key  string
	slot uint16
}{
	{"", 0},
	{"a", 15495},
	{"foo", 12182},
	{"123456789", 12739}, // 0x31c3, the CRC-16/XMODEM check value
	{"user:1000", 1649},
	{"kura:bench:000000000042", 15190},
	{"キー", 8582},
	{"\x00\xff", 7920},

	// Hash tags.
	{"{user1000}.following", 3443},
	{"{user1000}.followers", 3443},
	{"a{b}c", 3300},      // tag "b" ...
	{"b", 3300},          // ... is the slot of "b"
	{"{}", 15257},        // empty tag: the whole key
	{"{", 4092},          // no closing brace: the whole key
	{"}", 12090},         // no opening brace
	{"{{x}}", 11068},     // the tag is "{x", from the first '{' to the first '}'
	{"{x", 11068},        // ... which hashes like this
	{"foo{}{bar}", 8363}, // the first tag is empty, so no tag at all
	{"foo{{bar}}zap", 4015},
	{"foo{bar}{zap}", 5061}, // only the first tag counts
	{"a}b{c}", 7365},        // a '}' before the '{' does not close anything
	{"{}{x}", 3257},
}

func TestOf(t *testing.T) {
	for _, c := range known {
		if got := slot.Of(c.key); got != c.slot {
			t.Errorf("Of(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
}

// TestOfServer compares Of with a real server's CLUSTER KEYSLOT over the
// table's keys and random ones, braces included.
func TestOfServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	c := servertest.RedisCluster(t)
	keys := make([]string, 0, len(known)+300)
	for _, k := range known {
		keys = append(keys, k.key)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab{}:\x00\xff"
	for range 300 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	for _, k := range keys {
		s, err := c.Nodes[0].Do(context.Background(), "CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatal(err)
		}
		if got := slot.Of(k); strconv.Itoa(int(got)) != s {
			t.Errorf("Of(%q) = %d, server says %s", k, got, s)
		}
	}
}

// reference is Redis Cluster's slot function written the slow, obvious
// way, from the specification rather than from Of: the tag search is a
// plain loop and the CRC goes bit by bit.
func reference(key string) uint16 {
	start, end := -1, -1
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			start = i
			break
		}
	}
	if start >= 0 {
		for i := start + 1; i < len(key); i++ {
			if key[i] == '}' {
				end = i
				break
			}
		}
	}
	if start >= 0 && end > start+1 {
		key = key[start+1 : end]
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & (slot.Count - 1)
}

func TestReference(t *testing.T) {
	for _, c := range known {
		if got := reference(c.key); got != c.slot {
			t.Errorf("reference(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
}

// FuzzOf compares Of with the reference and checks the hash-tag rule:
// a key with a non-empty tag lands in the slot of the tag itself. The seed
// corpus is in testdata/fuzz/FuzzOf.
func FuzzOf(f *testing.F) {
	for _, c := range known {
		f.Add(c.key)
	}
	f.Fuzz(func(t *testing.T, key string) {
		got := slot.Of(key)
		if want := reference(key); got != want {
			t.Fatalf("Of(%q) = %d, reference says %d", key, got, want)
		}
		if got >= slot.Count {
			t.Fatalf("Of(%q) = %d, out of range", key, got)
		}
		if tagged := "{" + key + "}:suffix"; !containsBrace(key) && key != "" && slot.Of(tagged) != got {
			t.Fatalf("Of(%q) = %d, but Of(%q) = %d", tagged, slot.Of(tagged), key, got)
		}
	})
}

func containsBrace(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '{' || s[i] == '}' {
			return true
		}
	}
	return false
}

func BenchmarkOf(b *testing.B) {
	for _, key := range []string{"user:1000", "kura:bench:000000000042", "{user1000}.following:with:a:longer:tail"} {
		b.Run(fmt.Sprintf("len=%d", len(key)), func(b *testing.B) {
			b.SetBytes(int64(len(key)))
			b.ReportAllocs()
			var sink uint16
			for b.Loop() {
				sink += slot.Of(key)
			}
			_ = sink
		})
	}
}

func ExampleOf() {
	fmt.Println(slot.Of("user:1000"))
	fmt.Println(slot.Of("{user:1000}.profile") == slot.Of("user:1000"))
	// Output:
	// 1649
	// true
}
