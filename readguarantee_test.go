package kura_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
)

// TestInvalidateGuaranteePerRead checks docs/leases.md's guarantee per
// read, in one process: once Invalidate(k) has returned, no Fetch of k that
// starts later is handed a value whose load read the source before the
// invalidation. One writer loops {update the source; Invalidate} against
// 20 readers whose loader reads the source and then takes 5 ms (so most
// invalidations overtake a load in flight). Every read records the version
// the last finished Invalidate stood for when the read started; a read that
// returns an older version was served a value read before that
// invalidation. The end-state check (TestInvalidateDropsRacingFill) passes
// even when this one fails: the fill is refused, the value is still handed
// to callers who came after the invalidation.
func TestInvalidateGuaranteePerRead(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	backends := map[string]func(t *testing.T) store.Store{
		"redis":     redisBackend(r.URL),
		"memcached": memcachedBackend(m.Addr),
	}
	for name, open := range backends {
		for _, tc := range []struct {
			writer string
			pause  time.Duration
		}{{"same", 0}, {"same", time.Millisecond}, {"other", 0}, {"other", time.Millisecond}} {
			t.Run(name+"/writer="+tc.writer+"/pause="+tc.pause.String(), func(t *testing.T) {
				reads, bad := invalidationRace(t, open(t), tc.writer == "other", tc.pause, 600*time.Millisecond)
				t.Logf("%d reads after an Invalidate, %d served a value read before it", reads, bad)
				if reads == 0 {
					t.Fatal("no reads")
				}
				if bad > 0 {
					t.Fatalf("%d of %d reads (%.1f%%) were served a value read before an Invalidate that had returned when they started",
						bad, reads, 100*float64(bad)/float64(reads))
				}
			})
		}
	}
}

// invalidationRace runs the writer and 20 readers for d and returns the
// reads checked and the reads that broke the guarantee. With other, the
// writer invalidates through a second Cache over the same store, which
// shares nothing with the readers' Cache but the server: another process.
func invalidationRace(t *testing.T, s store.Store, other bool, pause, d time.Duration) (reads, bad int64) {
	ctx := context.Background()
	c, err := kura.New[int64](s, kura.Options{Leases: kura.LeasesRequired})
	if err != nil {
		t.Fatal(err)
	}
	w := c
	if other {
		if w, err = kura.New[int64](s, kura.Options{Leases: kura.LeasesRequired}); err != nil {
			t.Fatal(err)
		}
	}
	key := leaseKey("perread")
	var source atomic.Int64    // the row
	var committed atomic.Int64 // the version of the last Invalidate that returned
	loader := func(ctx context.Context, _ string) (int64, error) {
		v := source.Load()
		time.Sleep(5 * time.Millisecond)
		return v, nil
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var nReads, nBad atomic.Int64
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := committed.Load()
				v, err := c.Fetch(ctx, key, time.Minute, loader)
				if err != nil && !errors.Is(err, kura.ErrNotFound) {
					t.Error(err)
					return
				}
				nReads.Add(1)
				if v < floor {
					nBad.Add(1)
				}
			}
		}()
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		n := source.Add(1)
		if err := w.Invalidate(ctx, key); err != nil {
			t.Error(err)
		}
		committed.Store(n)
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	close(stop)
	wg.Wait()
	return nReads.Load(), nBad.Load()
}
