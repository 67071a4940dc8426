package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestWatchedLeaseGetRefused: an ACL user that may not turn on client
// tracking gets plain lease reads (watched false, so its waiters poll),
// and the Store stops trying to open the push client.
func TestWatchedLeaseGetRefused(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	if _, err := r.Do(ctx, "ACL", "SETUSER", "notrack", "on", ">pw", "~*", "+@all", "-client"); err != nil {
		t.Fatal(err)
	}
	s := open(t, "redis://notrack:pw@"+r.Addr, redisstore.Options{})
	opts := store.LeaseOptions{TTL: time.Second, Placeholder: []byte("ph")}
	deadline := time.Now().Add(20 * time.Second)
	for !s.PushRefused() {
		res, watched, err := s.WatchedLeaseGet(ctx, []string{"k"}, opts)
		if err != nil || watched || len(res) != 1 {
			t.Fatalf("WatchedLeaseGet = %v, watched %v, %v: want a plain lease read", res, watched, err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the Store kept trying to open a push client the server refuses")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if reads, _, _ := s.LeaseWakeReports(); reads != 0 {
		t.Fatalf("%d watched reads without a push client", reads)
	}
}
