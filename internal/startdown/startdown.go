// Package startdown is the test harness for a Cache whose store started
// while its servers were down: it checks that Fetch and FetchMany are
// answered by the loader, without an error, and waits until hits resume.
// Used by the tests of redisstore and memcache (issue: "a service starts
// while its cache is down").
package startdown

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
)

// Loader counts its calls and returns "v:"+key.
type Loader struct{ calls atomic.Int64 }

// Calls returns how many keys were loaded.
func (l *Loader) Calls() int64 { return l.calls.Load() }

// Load is a kura.Loader.
func (l *Loader) Load(_ context.Context, key string) (string, error) {
	l.calls.Add(1)
	return "v:" + key, nil
}

// LoadMany is a kura.ManyLoader.
func (l *Loader) LoadMany(_ context.Context, keys []string) (map[string]string, error) {
	l.calls.Add(int64(len(keys)))
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = "v:" + k
	}
	return out, nil
}

// Health puts store/health in front of s when withHealth is set.
func Health(t *testing.T, s store.Store, withHealth bool) store.Store {
	if !withHealth {
		return s
	}
	hs, err := health.New(s, health.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.Close() })
	return hs
}

// ServesFromLoader checks that a Cache on s, whose servers are not
// reachable, answers Fetch and FetchMany with the loader's values and no
// error.
func ServesFromLoader(t *testing.T, c *kura.Cache[string], l *Loader) {
	t.Helper()
	ctx := context.Background()
	v, err := c.Fetch(ctx, "k1", time.Minute, l.Load)
	if err != nil || v != "v:k1" {
		t.Fatalf("Fetch with the server down = %q, %v; want the loader's value and no error", v, err)
	}
	m, err := c.FetchMany(ctx, []string{"k2", "k3"}, time.Minute, l.LoadMany)
	if err != nil || m["k2"] != "v:k2" || m["k3"] != "v:k3" {
		t.Fatalf("FetchMany with the server down = %v, %v; want the loader's values and no error", m, err)
	}
}

// WaitHits waits until a Fetch of a fresh key is answered by the store on
// its second call (the first one loaded and wrote it).
func WaitHits(t *testing.T, c *kura.Cache[string], l *Loader) {
	t.Helper()
	ctx := context.Background()
	n := 0
	servertest.Eventually(t, "hits after the server came up", func() error {
		n++
		key := "after:" + strconv.Itoa(n)
		if _, err := c.Fetch(ctx, key, time.Minute, l.Load); err != nil {
			return err
		}
		before := l.calls.Load()
		v, err := c.Fetch(ctx, key, time.Minute, l.Load)
		if err != nil {
			return err
		}
		if l.calls.Load() != before || v != "v:"+key {
			return fmt.Errorf("second Fetch of %s loaded again (%q)", key, v)
		}
		return nil
	})
}

// Cache returns a Cache of strings on s with zero-valued options.
func Cache(t *testing.T, s store.Store) *kura.Cache[string] {
	t.Helper()
	c, err := kura.New[string](s, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
