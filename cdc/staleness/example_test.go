package staleness_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc/staleness"
	"github.com/kuracache/kura/store/memstore"
)

// An Inspector over a cache whose database was written behind its back:
// the round finds the one entry that differs from a fresh load. In a
// service, Run it beside the cache (and register it with Prometheus); here
// one round is checked by hand.
func ExampleNew() {
	var mu sync.Mutex
	db := map[string]string{"user:1": "Ada", "user:2": "Grace", "user:3": "Edsger"}
	load := func(_ context.Context, key string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := db[key]
		if !ok {
			return "", kura.ErrNotFound
		}
		return v, nil
	}
	ctx := context.Background()
	st, _ := memstore.New(memstore.Options{})
	users, _ := kura.New[string](st, kura.Options{Name: "users", TTL: time.Hour})
	for _, k := range []string{"user:1", "user:2"} {
		_, _ = users.Fetch(ctx, k, 0, load)
	}
	mu.Lock()
	db["user:2"] = "Grace Hopper" // a write that never invalidated the cache
	mu.Unlock()

	in, err := staleness.New(users, staleness.Options[string]{
		Keys:  func(context.Context, int) ([]string, error) { return []string{"user:1", "user:2", "user:3"}, nil },
		Load:  load,
		Grace: 10 * time.Millisecond, // how long a mismatch may take to be invalidated before it counts
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := in.Round(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("checked %d: %d fresh, %d stale %v, %d not cached\n", r.Checked, r.Fresh, r.Stale, r.StaleKeys, r.NotCached)
	// Output: checked 3: 1 fresh, 1 stale [user:2], 1 not cached
}
