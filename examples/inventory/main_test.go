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
	err := run(context.Background())
	if errors.Is(err, servers.ErrNotInstalled) && os.Getenv("CI") != "true" && os.Getenv("KURA_REQUIRE_SERVERS") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
}
