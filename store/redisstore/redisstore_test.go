package redisstore_test

import (
	"context"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
	"github.com/kuracache/kura/store/storetest"
)

// open connects a Store to url and closes it when the test ends.
func open(tb testing.TB, url string, opts redisstore.Options) *redisstore.Store {
	tb.Helper()
	s, err := redisstore.NewFromURL(context.Background(), url, opts)
	if err != nil {
		tb.Fatalf("NewFromURL(%s) = %v", url, err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformanceStandalone(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	storetest.Run(t, func(t *testing.T) store.Store {
		s := open(t, r.URL(), redisstore.Options{})
		if s.IsCluster() {
			t.Fatal("standalone server detected as a cluster")
		}
		return s
	})
}

func TestConformanceCluster(t *testing.T) {
	c := servertest.RedisCluster(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s := open(t, c.URL(), redisstore.Options{})
		if !s.IsCluster() {
			t.Fatal("cluster not detected")
		}
		return s
	})
}
