package l1

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/kuracache/kura/internal/harness/cputime"
)

type benchValue struct {
	ID    int
	Name  string
	Score float64
}

// BenchmarkGet: Tier.Get against the bare otter lookup it is built on
// (configured as New configures it, and with otter's default precise
// clock), on the same 10,000 warm keys, from 1,
// 2 and 32 goroutines, without a server: what the tier adds to a hit.
// The root package's BenchmarkL1Limit measures the whole Cache.Fetch.
func BenchmarkGet(b *testing.B) {
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "item:" + strconv.Itoa(i)
	}
	l, err := New[benchValue](256<<20, 5*time.Minute, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	bare := func(clock otter.Clock) *otter.Cache[string, item[benchValue]] {
		return otter.Must(&otter.Options[string, item[benchValue]]{
			Clock:            clock,
			MaximumWeight:    256 << 20,
			Weigher:          func(_ string, e item[benchValue]) uint32 { return e.weight },
			ExpiryCalculator: otter.ExpiryWriting[string, item[benchValue]](5 * time.Minute),
		})
	}
	coarse := otter.NewCoarseClock(ClockResolution)
	defer coarse.Stop()
	oc, precise := bare(coarse), bare(nil)
	defer oc.StopAllGoroutines()
	defer precise.StopAllGoroutines()
	for i, k := range keys {
		v := benchValue{ID: i, Name: k}
		l.Finish(k, l.Begin(k), v, false, 30, true)
		oc.Set(k, item[benchValue]{v: v, weight: 100})
		precise.Set(k, item[benchValue]{v: v, weight: 100})
	}
	sides := []struct {
		name string
		get  func(string) bool
	}{
		{"otter", func(k string) bool { _, ok := oc.GetIfPresent(k); return ok }},
		{"otter-precise", func(k string) bool { _, ok := precise.GetIfPresent(k); return ok }},
		{"tier", func(k string) bool { _, _, ok := l.Get(k); return ok }},
	}
	for _, g := range []int{1, 2, 32} {
		for _, s := range sides {
			b.Run(fmt.Sprintf("g%d/%s", g, s.name), func(b *testing.B) {
				b.ReportAllocs()
				cpu := cputime.Process()
				var wg sync.WaitGroup
				for w := range g {
					n := b.N / g
					if w < b.N%g {
						n++
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						i := w * len(keys) / g
						for range n {
							if !s.get(keys[i]) {
								b.Error("miss")
								return
							}
							if i++; i == len(keys) {
								i = 0
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
