package kura_test

import (
	"context"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store/memstore"
)

type budgetCtxKey struct{}

// BenchmarkFetchHitCallerContexts reports what a warm Fetch hit allocates
// with and without the store-time budget, for the kinds of caller context
// a service passes. The budget allocates nothing for any of them: a shared
// tick bounds the first store call of a read, through one of its own
// contexts for context.Background, a pooled tickCtx for a context without
// a Done channel, and a pooled callCtx the Cache's clock watches for one
// that can be cancelled (BENCHMARKS.md, "One read path"; before, a
// cancellable context cost a context.WithTimeout: 4 more allocations).
//
//	go test -run '^$' -bench BenchmarkFetchHitCallerContexts -benchmem .
func BenchmarkFetchHitCallerContexts(b *testing.B) {
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	load := func(context.Context, string) (Profile, error) { return profile(7), nil }
	bg := context.Background()
	cancellable, cancel := context.WithCancel(bg)
	defer cancel()
	late, cancelLate := context.WithTimeout(bg, time.Hour)
	defer cancelLate()
	ctxs := []struct {
		name string
		ctx  context.Context
	}{
		{"background", bg},
		{"with-value", context.WithValue(bg, budgetCtxKey{}, 1)},
		{"with-cancel", cancellable},
		{"deadline-1h", late},
	}
	for _, budget := range []struct {
		name    string
		timeout time.Duration
	}{{"no-budget", -1}, {"budget", 0}} {
		c, err := kura.New[Profile](s, kura.Options{StoreTimeout: budget.timeout})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Fetch(bg, "budget-ctx", time.Hour, load); err != nil {
			b.Fatal(err)
		}
		for _, cc := range ctxs {
			b.Run(budget.name+"/"+cc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Fetch(cc.ctx, "budget-ctx", time.Hour, load); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		c.Close()
	}
}
