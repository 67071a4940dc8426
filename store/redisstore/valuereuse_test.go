package redisstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestValueReusedAfterBrokenWrite: a caller's buffer is the caller's
// again once Set or SetMany returned, also when the connection broke
// while the value was being written. With a context that cannot end the
// Store handed the value to rueidis without a copy, and rueidis's writer
// went on copying it after Do returned the connection's error: -race
// reported the caller's next write of its buffer (2 runs in 3). Writers
// send values of 1 to 4 MiB, much more than a socket buffer holds (one
// writer 64-244 KiB, which the Store's pool of copies keeps), through a
// proxy that resets every connection, stalls and resets, or cuts a reply,
// and overwrite their buffer with bytes no key is ever given as soon as
// each call returns. Every key must then hold a value that was set for
// it, whole, or nothing; and under -race, a write of the buffer that
// rueidis still reads after the call returned is reported.
func TestValueReusedAfterBrokenWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	proxy := servertest.Proxy(t, srv.Addr, faults.ProxyOptions{})
	s := open(t, "redis://"+proxy.Addr(), redisstore.Options{})
	direct := open(t, srv.URL(), redisstore.Options{})
	ctx := context.Background()

	const (
		writers = 3
		keysPer = 3
		rounds  = 12
		maxSize = 4 << 20
	)
	pattern := make([]byte, maxSize+256)
	for i := range pattern {
		pattern[i] = byte(i*7 + i>>8)
	}
	poison := bytes.Repeat([]byte{0xEE}, maxSize)
	// value fills b with key's value of generation gen, size bytes: a
	// header that names both, then the pattern from an offset they pick.
	value := func(b []byte, key string, gen uint32) {
		binary.BigEndian.PutUint32(b[0:], gen)
		binary.BigEndian.PutUint32(b[4:], uint32(len(b)))
		copy(b[8:24], fmt.Sprintf("%-16s", key))
		off := (len(key)*131 + int(gen)*17) % 256
		copy(b[24:], pattern[off:])
	}
	check := func(key string, v []byte) error {
		if len(v) < 24 {
			return fmt.Errorf("%d bytes, shorter than any value set", len(v))
		}
		gen := binary.BigEndian.Uint32(v[0:])
		if n := binary.BigEndian.Uint32(v[4:]); int(n) != len(v) {
			return fmt.Errorf("%d bytes, its header says %d", len(v), n)
		}
		if got := string(bytes.TrimRight(v[8:24], " ")); got != key {
			return fmt.Errorf("holds a value of %q", got)
		}
		want := make([]byte, len(v))
		value(want, key, gen)
		if i := mismatch(v, want); i >= 0 {
			return fmt.Errorf("generation %d, %d bytes: differs from what was set from byte %d", gen, len(v), i)
		}
		return nil
	}

	var wg sync.WaitGroup
	stopFaults := proxy.BreakWrites(20*time.Millisecond, 60*time.Millisecond, 2*time.Millisecond, 7)
	var sent, failed [writers]int
	var firstErr [writers]error
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			bufs := [2][]byte{make([]byte, maxSize), make([]byte, maxSize)}
			for r := range rounds {
				k := fmt.Sprintf("reuse:%d:%d", w, r%keysPer)
				gen := uint32(r)
				n := 1<<20 + rng.IntN(3<<20)
				if w == writers-1 { // small enough for the Store's pool of copies
					n = 64<<10 + rng.IntN(180<<10)
				}
				v := bufs[0][:n]
				value(v, k, gen)
				var err error
				if r%2 == 0 {
					err = s.Set(ctx, k, v, 0)
				} else {
					// One pipeline with a second key's value behind it.
					k2 := fmt.Sprintf("reuse:%d:%d", w, (r+1)%keysPer)
					v2 := bufs[1][:n/2+rng.IntN(n/2)]
					value(v2, k2, gen)
					err = s.SetMany(ctx, []store.Item{{Key: k, Value: v}, {Key: k2, Value: v2}})
					copy(bufs[1], poison)
				}
				copy(bufs[0], poison) // the buffer is the caller's again
				sent[w]++
				if err != nil {
					if failed[w] == 0 {
						firstErr[w] = err
					}
					failed[w]++
				}
			}
		}()
	}
	wg.Wait()
	stopFaults()
	t.Logf("calls per writer %v, failed %v (first errors: %v)", sent, failed, firstErr)

	found := 0
	for w := range writers {
		for i := range keysPer {
			k := fmt.Sprintf("reuse:%d:%d", w, i)
			v, err := direct.Get(ctx, k)
			if err != nil {
				if !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("Get(%s): %v", k, err)
				}
				continue
			}
			found++
			if err := check(k, v); err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
	}
	t.Logf("%d keys hold a value", found)
	if found == 0 {
		t.Fatal("no key was written at all: the faults left nothing to check")
	}
}

// mismatch is the index of the first byte where a and b differ, -1 if none.
func mismatch(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
