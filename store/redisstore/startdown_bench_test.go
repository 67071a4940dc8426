package redisstore_test

import (
	"context"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/harness/startdown"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// BenchmarkStartDown: 64 callers Fetch through a Cache whose Redis was
// refused, stopped (SIGSTOP) or unresolvable when the store was created;
// after 500 ms the server comes up. Reported: errors returned to callers
// (target 0), Fetch and loader calls while down, and the median time from
// the server's first answer to the first hit. See BENCHMARKS.md.
//
//	go test -run '^$' -bench StartDown -benchtime 3x ./store/redisstore/
func BenchmarkStartDown(b *testing.B) { startdown.BenchAll(b, openDown) }

// openDown returns a Store created while its server is down as
// scenario says, and the function that brings the server up.
func openDown(b *testing.B, scenario string) (store.Store, func() error) {
	addr, res, up := startdown.Down(b, scenario, servertest.Redis(b, servers.RedisConfig{}).Proc)
	s, err := redisstore.New(context.Background(), redisstore.Options{Addrs: []string{addr}, Resolver: res})
	if err != nil {
		b.Fatal(err)
	}
	return s, up
}
