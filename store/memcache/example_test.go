package memcache_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
)

// The ring is pure computation: the same keys land on the same servers in
// every process, and in other libketama-compatible clients.
func ExampleRing() {
	ring, err := memcache.NewRing([]string{"10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"user:1", "user:2", "user:3"} {
		fmt.Println(k, "->", ring.Server(k))
	}
	// Output:
	// user:1 -> 10.0.0.3:11211
	// user:2 -> 10.0.0.3:11211
	// user:3 -> 10.0.0.1:11211
}

// A Store over three servers: write back a batch of records in one round
// trip per server, then read them back the same way.
func ExampleStore() {
	ctx := context.Background()
	s, err := memcache.New(ctx, memcache.Options{
		Servers: []string{"10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	items := []store.Item{
		{Key: "item:1", Value: []byte("sword"), TTL: time.Hour},
		{Key: "item:2", Value: []byte("shield"), TTL: time.Hour},
	}
	if err := s.SetMany(ctx, items); err != nil {
		var be *store.BatchError
		if errors.As(err, &be) {
			for _, ke := range be.Errors {
				log.Printf("not cached: %s on %s: %v", ke.Key, ke.Addr, ke.Err)
			}
		}
	}
	vals, err := s.GetMany(ctx, []string{"item:1", "item:2", "item:3"})
	_ = err // a *store.BatchError names the keys whose server failed
	for i, v := range vals {
		if v == nil {
			fmt.Println(i, "miss")
		}
	}
}
