package kuraotel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// holdLease makes another Cache of this process (its own store, so its
// own flight) take the lease on key and load until the test ends: it
// never fills while the test looks.
func holdLease(t *testing.T, addr, key string) {
	t.Helper()
	holder, err := kura.New[string](redisStore(t, addr), kura.Options{LeaseWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	loading, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = holder.Fetch(context.Background(), key, time.Minute, func(ctx context.Context, _ string) (string, error) {
			close(loading)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return "from the holder", nil
		})
	}()
	t.Cleanup(func() {
		close(release)
		<-done
		_ = holder.Close()
	})
	select {
	case <-loading:
	case <-time.After(30 * time.Second):
		t.Fatal("the holder never loaded")
	}
}

// TestLeaseFailOpen: a Fetch that waits for another caller's lease and
// loads for itself without writing back has kura.lease.fail_open=true on
// its kura.lease.wait span, then a kura.load and no kura.fill, when the
// wait runs out (Options.LeaseWait) and when the wait's read fails (the
// node went down while it waited: the failure is an event on the wait).
func TestLeaseFailOpen(t *testing.T) {
	check := func(t *testing.T, r *recorder, v string, err error) {
		t.Helper()
		if err != nil || v != "loaded here" {
			t.Fatalf("Fetch = %q, %v; want the caller's own load", v, err)
		}
		got := tree(r.spans(), "request")
		if !strings.Contains(got, "    kura.lease.wait\n    kura.load\n") || strings.Contains(got, "kura.fill") {
			t.Fatalf("span tree:\n%s\nwant kura.lease.wait, then kura.load, and no kura.fill", got)
		}
		w := r.named("kura.lease.wait")[0]
		if !mustAttr(t, w, "kura.lease.fail_open").AsBool() {
			t.Error("kura.lease.fail_open is not true")
		}
		if d := mustAttr(t, w, "kura.lease.wait").AsFloat64(); d <= 0 {
			t.Errorf("kura.lease.wait = %v s", d)
		}
		f := r.named("kura.Fetch")[0]
		if v := mustAttr(t, f, "kura.lease.held").AsInt64(); v != 1 {
			t.Errorf("kura.lease.held = %d", v)
		}
		if f.Status.Code.String() == "Error" {
			t.Errorf("kura.Fetch status %v: the caller was served", f.Status)
		}
	}
	load := func(context.Context, string) (string, error) { return "loaded here", nil }

	t.Run("wait ran out", func(t *testing.T) {
		rs := servertest.Redis(t, servers.RedisConfig{})
		holdLease(t, rs.Addr, "held")
		r := newRecorder(t)
		c := newCache[string](t, redisStore(t, rs.Addr), r, kura.Options{LeaseWait: 150 * time.Millisecond})
		ctx, req := r.request(context.Background())
		v, err := c.Fetch(ctx, "held", time.Minute, load)
		req.End()
		check(t, r, v, err)
		if d := mustAttr(t, r.named("kura.lease.wait")[0], "kura.lease.wait").AsFloat64(); d < 0.15 {
			t.Errorf("kura.lease.wait = %v s, less than LeaseWait", d)
		}
	})

	t.Run("node down while waiting", func(t *testing.T) {
		rs := servertest.Redis(t, servers.RedisConfig{})
		holdLease(t, rs.Addr, "held")
		r := newRecorder(t)
		c := newCache[string](t, redisStore(t, rs.Addr), r, kura.Options{LeaseWait: time.Minute})
		go func() {
			time.Sleep(300 * time.Millisecond) // the Fetch below is waiting by then
			rs.Stop()
		}()
		ctx, req := r.request(context.Background())
		v, err := c.Fetch(ctx, "held", time.Minute, load)
		req.End()
		check(t, r, v, err)
		w := r.named("kura.lease.wait")[0]
		if len(w.Events) == 0 || w.Events[0].Name != "kura.store.error" {
			t.Errorf("kura.lease.wait events %v, want kura.store.error", w.Events)
		}
		if d := mustAttr(t, w, "kura.lease.wait").AsFloat64(); d >= 30 {
			t.Errorf("kura.lease.wait = %v s: the failure did not end the wait", d)
		}
	})
}
