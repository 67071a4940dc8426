package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// within runs fn and fails the test if it has not returned after 30s: a
// dead server must give an error, never a hang.
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- fn() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s hung for 30s after a server died", what)
		panic("unreachable")
	}
}

type getResult struct {
	vals [][]byte
	err  error
}

// TestKillStandaloneMidBatch kills the server while batches are in flight.
// Every call must return; failures must be per key, naming the server.
func TestKillStandaloneMidBatch(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	s := open(t, r.URL(), redisstore.Options{})
	ctx := context.Background()
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = fmt.Sprintf("kill:%d", i)
	}
	if err := s.SetMany(ctx, items(keys)); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	results := make(chan error, 1000)
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := s.GetMany(ctx, keys)
				select {
				case results <- err:
				default:
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	r.Kill()
	// Let the workers see the dead server for a while, then stop them.
	time.Sleep(300 * time.Millisecond)
	close(stop)
	within(t, "GetMany", func() struct{} { wg.Wait(); return struct{}{} })
	close(results)

	failed := 0
	for err := range results {
		if err == nil {
			continue
		}
		failed++
		checkBatchErr(t, err, map[string]bool{r.Addr: true})
	}
	if failed == 0 {
		t.Fatal("no GetMany failed after the server was killed")
	}

	res := within(t, "GetMany", func() getResult { v, err := s.GetMany(ctx, keys[:10]); return getResult{v, err} })
	checkBatchErr(t, res.err, map[string]bool{r.Addr: true})
	if err := within(t, "Get", func() error { _, err := s.Get(ctx, "kill:1"); return err }); err == nil ||
		errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), r.Addr) {
		t.Fatalf("Get on a dead server = %v, want an error naming %s", err, r.Addr)
	} else if ne := store.AsNodeError(err); ne == nil || ne.Addr != r.Addr {
		t.Fatalf("Get on a dead server = %v, want a *store.NodeError for %s", err, r.Addr)
	}
	if err := within(t, "Set", func() error { return s.Set(ctx, "kill:1", []byte("v"), 0) }); store.AsNodeError(err) == nil {
		t.Fatalf("Set on a dead server = %v, want a *store.NodeError", err)
	}
	if err := within(t, "Ping", func() error { return s.Ping(ctx) }); err == nil || !strings.Contains(err.Error(), r.Addr) {
		t.Fatalf("Ping of a dead server = %v, want an error naming %s", err, r.Addr)
	}
	t.Logf("after the kill: %v", res.err)
}

// checkBatchErr requires a *store.BatchError whose every key names one of
// the dead servers (or the cluster being down because of them).
func checkBatchErr(t *testing.T, err error, dead map[string]bool) *store.BatchError {
	t.Helper()
	var be *store.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T) is not a *store.BatchError", err, err)
	}
	for _, ke := range be.Errors {
		if ke.Err == nil || ke.Key == "" {
			t.Fatalf("malformed KeyError %+v", ke)
		}
		if !dead[ke.Addr] && !strings.Contains(ke.Err.Error(), "CLUSTERDOWN") {
			t.Fatalf("key %q failed on %q, which is alive: %v", ke.Key, ke.Addr, ke.Err)
		}
		if ke.Addr != "" {
			if ne := store.AsNodeError(ke.Err); ne == nil || ne.Addr != ke.Addr {
				t.Fatalf("key %q: error %v is not a *store.NodeError for %s", ke.Key, ke.Err, ke.Addr)
			}
		}
	}
	return be
}

// TestKillClusterNode kills one master of three: its keys fail with its
// address, the other masters' keys are still answered.
func TestKillClusterNode(t *testing.T) {
	c := servertest.RedisCluster(t)
	s := open(t, c.URL(), redisstore.Options{})
	ctx := context.Background()
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprintf("kill:%d", i)
	}
	if err := s.SetMany(ctx, items(keys)); err != nil {
		t.Fatal(err)
	}
	// Which node holds each key, from the server itself.
	owner := map[string]string{}
	for _, n := range c.Nodes {
		for _, k := range keys {
			if v, err := n.Do(ctx, "EXISTS", k); err == nil && v == "1" {
				owner[k] = n.Addr
			}
		}
	}
	victim := c.Nodes[2]

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			_, _ = s.GetMany(ctx, keys) // in flight while the node dies
		}
	}()
	victim.Kill()
	within(t, "GetMany", func() struct{} { <-done; return struct{}{} })

	res := within(t, "GetMany", func() getResult { v, err := s.GetMany(ctx, keys); return getResult{v, err} })
	be := checkBatchErr(t, res.err, map[string]bool{victim.Addr: true})
	failed := be.Failed()
	clusterDown := false
	for i, k := range keys {
		if err, ok := failed[k]; ok {
			if strings.Contains(err.Error(), "CLUSTERDOWN") {
				clusterDown = true // the survivors gave up on the cluster: allowed
				continue
			}
			if owner[k] != victim.Addr {
				t.Fatalf("key %q on live node %s failed: %v", k, owner[k], err)
			}
			continue
		}
		if owner[k] == victim.Addr {
			t.Fatalf("key %q on the dead node succeeded", k)
		}
		if string(res.vals[i]) != "v-"+k {
			t.Fatalf("key %q = %q", k, res.vals[i])
		}
	}
	t.Logf("%d of %d keys failed (cluster down: %v): %v", len(failed), len(keys), clusterDown, be)

	err := within(t, "SetMany", func() error { return s.SetMany(ctx, items(keys)) })
	checkBatchErr(t, err, map[string]bool{victim.Addr: true})
	err = within(t, "DeleteMany", func() error { return s.DeleteMany(ctx, keys) })
	checkBatchErr(t, err, map[string]bool{victim.Addr: true})
	if err := within(t, "Ping", func() error { return s.Ping(ctx) }); err == nil || !strings.Contains(err.Error(), victim.Addr) {
		t.Fatalf("Ping with a dead master = %v, want an error naming %s", err, victim.Addr)
	}
}
