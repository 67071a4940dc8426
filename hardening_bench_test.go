package kura_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// BenchmarkFetchServerDown measures what one Fetch costs a caller when
// the cache server is stalled (SIGSTOP) or dead (the port refuses), with
// the default Options and with the budget turned off. The loader answers
// at once, so the figure is the cache's own overhead.
//
//	go test -run '^$' -bench FetchServerDown -benchtime 20x .
func BenchmarkFetchServerDown(b *testing.B) {
	loader := func(_ context.Context, key string) (Profile, error) { return profile(1), nil }
	run := func(b *testing.B, c *kura.Cache[Profile]) {
		ctx := context.Background()
		b.ResetTimer()
		for i := range b.N {
			if _, err := c.Fetch(ctx, fmt.Sprintf("down:%d", i), time.Hour, loader); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("stalled/default", func(b *testing.B) {
		srv := servertest.Redis(b, servers.RedisConfig{})
		c, _ := kura.New[Profile](redisBackendTB(b, srv.URL()), kura.Options{})
		if err := srv.Pause(); err != nil {
			b.Fatal(err)
		}
		defer srv.Resume()
		run(b, c)
	})
	b.Run("dead/default", func(b *testing.B) {
		srv := servertest.Redis(b, servers.RedisConfig{})
		c, _ := kura.New[Profile](redisBackendTB(b, srv.URL()), kura.Options{})
		srv.Stop()
		run(b, c)
	})
	b.Run("healthy/default", func(b *testing.B) {
		srv := servertest.Redis(b, servers.RedisConfig{})
		c, _ := kura.New[Profile](redisBackendTB(b, srv.URL()), kura.Options{})
		run(b, c)
	})
}

func redisBackendTB(tb testing.TB, url string) *redisstore.Store {
	tb.Helper()
	s, err := redisstore.NewFromURL(context.Background(), url, redisstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
