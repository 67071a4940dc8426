package main

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
)

// TestRun keeps the example working: it runs it end to end on private
// servers.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server example")
	}
	ctx := context.Background()
	skip := func(err error) {
		if errors.Is(err, servers.ErrNotInstalled) && os.Getenv("CI") != "true" && os.Getenv("KURA_REQUIRE_SERVERS") != "1" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	pg, err := servers.StartPostgres(ctx, servers.PostgresConfig{})
	if err != nil {
		skip(err)
	}
	t.Cleanup(pg.Stop)
	var addrs []string
	for range 3 {
		m, err := servers.StartMemcached(ctx, servers.MemcachedConfig{})
		if err != nil {
			skip(err)
		}
		t.Cleanup(m.Stop)
		addrs = append(addrs, m.Addr)
	}
	if err := run(ctx, pg.DSN(), addrs); err != nil {
		t.Fatal(err)
	}
}
