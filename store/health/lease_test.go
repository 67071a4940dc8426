package health_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
)

// TestLeasesThroughBreaker: a Cache over the breaker uses the wrapped
// store's leases (routed through the breaker) when it has them, and says
// "process" when it does not; keys of a Down node fail their lease at once.
func TestLeasesThroughBreaker(t *testing.T) {
	ns := newTwoNodes(t)
	hs, err := health.New(ns, fastOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	if _, ok := store.FindLeaser(hs); ok {
		t.Fatal("a breaker over a store without leases must not offer them")
	}
	c, err := kura.New[string](hs, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Coordination != kura.CoordinationProcess {
		t.Fatalf("Coordination %q over a store without leases", st.Coordination)
	}
	for name, mk := range map[string]func(*testing.T) *topology{"redis": redisTopology, "memcached": memcacheTopology} {
		t.Run(name, func(t *testing.T) {
			tp := mk(t)
			hs, err := health.New(tp.inner, testOpts())
			must(t, err)
			defer hs.Close()
			defer tp.inner.Close()
			l, ok := store.FindLeaser(hs)
			if !ok {
				t.Fatal("the breaker hides the wrapped store's leases")
			}
			if _, isBreaker := l.(*health.Store); !isBreaker {
				t.Fatalf("leases bypass the breaker (%T)", l)
			}
			c, err := kura.New[string](hs, kura.Options{})
			must(t, err)
			if st := c.Stats(); st.Coordination != kura.CoordinationLeases {
				t.Fatalf("Coordination %q", st.Coordination)
			}
			ctx := context.Background()
			loads := 0
			for range 3 {
				v, err := c.Fetch(ctx, "lease:breaker", 0, func(context.Context, string) (string, error) { loads++; return "v", nil })
				if err != nil || v != "v" {
					t.Fatalf("Fetch = %q, %v", v, err)
				}
			}
			if loads != 1 {
				t.Fatalf("%d loads, want 1", loads)
			}
			if err := c.Invalidate(ctx, "lease:breaker"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Get(ctx, "lease:breaker"); !errors.Is(err, kura.ErrNotFound) {
				t.Fatalf("Get after Invalidate = %v", err)
			}
		})
	}
}
