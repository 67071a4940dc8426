package memcache_test

import (
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
)

// pause SIGSTOPs srv; servers.Proc.Pause waits until every thread is
// stopped, so no worker answers one more request.
func pause(t *testing.T, srv *servers.Memcached) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
}
