package kuraotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/kuraotel"
	"github.com/kuracache/kura/store"
)

// TestWrapStorePassesLeaseReports: the traced store passes the lease
// path's server reports (store.LeaseWaker) through: a Cache over it that
// waits for another caller's lease reads the key watched, through the
// wrapper, and is woken by the holder's fill instead of polling.
func TestWrapStorePassesLeaseReports(t *testing.T) {
	rs := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	sb := redisStore(t, rs.Addr)
	wrapped := kuraotel.WrapStore(sb, kuraotel.StoreOptions{})
	if l, ok := store.FindLeaser(wrapped); !ok || l != store.Leaser(wrapped) {
		t.Fatalf("FindLeaser = %T, %v: want the wrapper", l, ok)
	}
	if _, ok := store.Leaser(wrapped).(store.LeaseWaker); !ok {
		t.Fatal("the wrapper hides the lease reports (store.LeaseWaker)")
	}
	a, err := kura.New[string](redisStore(t, rs.Addr), kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := kura.New[string](wrapped, kura.Options{LeaseWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	entered, release, aDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := a.Fetch(ctx, "wake:1", time.Minute, func(context.Context, string) (string, error) {
			close(entered)
			<-release
			return "from A", nil
		})
		aDone <- err
	}()
	<-entered
	bLoads := 0
	type result struct {
		v   string
		err error
	}
	bDone := make(chan result, 1)
	go func() {
		v, err := b.Fetch(ctx, "wake:1", time.Minute, func(context.Context, string) (string, error) {
			bLoads++
			return "from B", nil
		})
		bDone <- result{v, err}
	}()
	// The push connection opens on B's first wait; until then B polls.
	deadline := time.Now().Add(20 * time.Second)
	for reads, _, _ := sb.LeaseWakeReports(); reads == 0; reads, _, _ = sb.LeaseWakeReports() {
		if time.Now().After(deadline) {
			t.Fatal("no watched lease read reached the wrapped store within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	r := <-bDone
	if r.err != nil || r.v != "from A" || bLoads != 0 {
		t.Fatalf("B = %q, %v after %d loads: want A's fill", r.v, r.err, bLoads)
	}
	if _, reports, _ := sb.LeaseWakeReports(); reports == 0 {
		t.Error("the server reported no change to the lease path")
	}
}
