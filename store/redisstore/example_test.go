package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

func Example() {
	ctx := context.Background()
	// A standalone server; a cluster is the same call with any node (or
	// several: "redis://host1:7000?addr=host2:7000&addr=host3:7000").
	s, err := redisstore.NewFromURL(ctx, "redis://:s3cret@127.0.0.1:6379/0", redisstore.Options{})
	if err != nil {
		log.Fatal(err) // e.g. "127.0.0.1:6379: redis: kura: redis authentication failed: ..."
	}
	defer s.Close()

	_ = s.SetMany(ctx, []store.Item{
		{Key: "article:1", Value: []byte("..."), TTL: time.Hour},
		{Key: "article:2", Value: []byte("..."), TTL: time.Hour},
	})
	// One MGET per hash slot, all pipelined: one round trip per server.
	vals, err := s.GetMany(ctx, []string{"article:1", "article:2", "article:3"})
	var be *store.BatchError
	if errors.As(err, &be) {
		for _, ke := range be.Errors {
			fmt.Println("failed:", ke.Key, "on", ke.Addr, ke.Err)
		}
	}
	fmt.Println(vals[2] == nil) // article:3 is a miss
}

// A process that starts while its Redis is down still gets a Store: New
// returns at once on a refused port, requests fail with
// store.ErrNotConnected (a Cache calls the loader instead) and the Store
// keeps trying in the background. ConnStats says so to an operator.
func ExampleNew_serverDown() {
	ctx := context.Background()
	s, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{"127.0.0.1:1"}}) // nothing listens there
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	_, err = s.Get(ctx, "user:42")
	fmt.Println(errors.Is(err, store.ErrNotConnected))
	st := s.ConnStats()
	fmt.Println(st.Connected, st.ConnectFailures > 0)
	// Output:
	// true
	// false true
}
