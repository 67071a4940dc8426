package redisring_test

import (
	"context"
	"fmt"

	"github.com/kuracache/kura/ring"
	"github.com/kuracache/kura/store/redisring"
)

// Three standalone Redis servers that a go-redis Ring already uses with
// shard names "a", "b" and "c": kura places every key on the same shard.
func ExampleNew() {
	ctx := context.Background()
	s, err := redisring.New(ctx, redisring.Options{
		Servers: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		IDs:     []string{"a", "b", "c"},
		Ring:    ring.ModeRendezvous,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println(s.NodeOf("user:42"))
}
