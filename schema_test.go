package kura_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
)

// The same record across deploys: v1 is the type as first written; the
// others are what a later deploy made of it.
type (
	personV1 struct {
		Name string `msgpack:"name"`
		Age  int    `msgpack:"age"`
	}
	personAdded struct { // a field added: compatible
		Name  string `msgpack:"name"`
		Age   int    `msgpack:"age"`
		Email string `msgpack:"email"`
	}
	personRenamed struct { // age renamed to years
		Name  string `msgpack:"name"`
		Years int    `msgpack:"years"`
	}
	personRetyped struct { // age now a string
		Name string `msgpack:"name"`
		Age  string `msgpack:"age"`
	}
	article struct {
		Title string `msgpack:"title"`
		Body  string `msgpack:"body"`
	}
)

// schemaStores are the stores the schema tests run on: memstore, and a
// real redis-server unless -short.
func schemaStores(t *testing.T) map[string]store.Store {
	ms, _ := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	out := map[string]store.Store{"memstore": ms}
	if !testing.Short() {
		srv := servertest.Redis(t, servers.RedisConfig{})
		out["redis"] = redisBackend(srv.URL)(t)
	}
	return out
}

// readAs reads key, written as personV1, with a Cache of type V: whether
// Fetch called its loader, the Cache's stats after, and Get's error.
func readAs[V any](t *testing.T, s store.Store, key string, want V) (loaded bool, st kura.Stats, getErr error) {
	t.Helper()
	ctx := context.Background()
	c, err := kura.New[V](s, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, getErr = c.Get(ctx, key)
	v, err := c.Fetch(ctx, key, time.Hour, func(context.Context, string) (V, error) {
		loaded = true
		return want, nil
	})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if loaded && any(v) != any(want) {
		t.Fatalf("Fetch served %+v, not the loader's %+v", v, want)
	}
	return loaded, c.Stats(), getErr
}

// TestSchemaMismatchIsAMiss: a value written for {Name, Age} read by a
// Cache[article] is a miss that calls the loader (it used to decode
// silently into a zero article, served until the TTL ended); a renamed or
// retyped field is a miss too; a field added since is a hit. Mismatches
// are counted apart from corrupt bytes.
func TestSchemaMismatchIsAMiss(t *testing.T) {
	ctx := context.Background()
	for name, s := range schemaStores(t) {
		t.Run(name, func(t *testing.T) {
			w, err := kura.New[personV1](s, kura.Options{})
			if err != nil {
				t.Fatal(err)
			}
			write := func(key string) {
				if err := w.Set(ctx, key, personV1{Name: "ann", Age: 40}, time.Hour); err != nil {
					t.Fatal(err)
				}
			}

			write("article")
			loaded, st, getErr := readAs(t, s, "article", article{Title: "rates"})
			if !errors.Is(getErr, kura.ErrSchemaMismatch) || !errors.Is(getErr, kura.ErrMalformed) {
				t.Errorf("Cache[article].Get of a person = %v, want ErrSchemaMismatch", getErr)
			}
			if !loaded {
				t.Error("Cache[article].Fetch of a person did not call the loader")
			}
			if st.SchemaMismatches == 0 || st.DecodeErrors != 0 || st.Hits != 0 {
				t.Errorf("stats after reading another type: %+v", st)
			}
			// Options{}: the default grace (a minute) keeps the entry just written.
			if st.SchemaKept != 1 || st.Latency[kura.OpSet].Count != 0 {
				t.Errorf("the default SchemaGrace did not keep a fresh entry of another type: %+v", st)
			}

			write("renamed")
			if loaded, _, getErr := readAs(t, s, "renamed", personRenamed{Name: "bo", Years: 3}); !errors.Is(getErr, kura.ErrSchemaMismatch) || !loaded {
				t.Errorf("renamed field: Get = %v, loader called %v; want a mismatch and a load", getErr, loaded)
			}
			write("retyped")
			if loaded, _, getErr := readAs(t, s, "retyped", personRetyped{Name: "cy", Age: "4"}); !errors.Is(getErr, kura.ErrSchemaMismatch) || !loaded {
				t.Errorf("retyped field: Get = %v, loader called %v; want a mismatch and a load", getErr, loaded)
			}
			write("added")
			loaded, st, getErr = readAs(t, s, "added", personAdded{})
			if getErr != nil || loaded || st.Hits != 2 || st.SchemaMismatches != 0 {
				t.Errorf("added field: Get = %v, loader called %v, stats %+v; want two hits", getErr, loaded, st)
			}
			got, err := kura.New[personAdded](s, kura.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := got.Get(ctx, "added"); err != nil || v != (personAdded{Name: "ann", Age: 40}) {
				t.Errorf("added field: read %+v, %v", v, err)
			}
			write("same")
			if loaded, st, getErr := readAs(t, s, "same", personV1{}); getErr != nil || loaded || st.Hits != 2 {
				t.Errorf("same type: Get = %v, loader called %v, stats %+v", getErr, loaded, st)
			}

			// FetchMany and GetMany see the same.
			write("m1")
			c, _ := kura.New[article](s, kura.Options{})
			m, err := c.FetchMany(ctx, []string{"m1"}, time.Hour, func(_ context.Context, keys []string) (map[string]article, error) {
				return map[string]article{"m1": {Title: "loaded"}}, nil
			})
			if err != nil || m["m1"].Title != "loaded" {
				t.Errorf("FetchMany over another type = %v, %v", m, err)
			}
		})
	}
}

// fetcher is one process's view of a key during a rolling deploy: a Cache
// of its own type and a count of its loader calls.
type fetcher[V any] struct {
	c     *kura.Cache[V]
	loads atomic.Int32
	val   V
}

func newFetcher[V any](t *testing.T, s store.Store, grace time.Duration, val V) *fetcher[V] {
	t.Helper()
	c, err := kura.New[V](s, kura.Options{SchemaGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	return &fetcher[V]{c: c, val: val}
}

func (f *fetcher[V]) fetch(t *testing.T, key string) {
	t.Helper()
	v, err := f.c.Fetch(context.Background(), key, time.Hour, func(context.Context, string) (V, error) {
		f.loads.Add(1)
		return f.val, nil
	})
	if err != nil || any(v) != any(f.val) {
		t.Fatalf("Fetch = %+v, %v; want %+v", v, err, f.val)
	}
}

// TestRollingDeployDoesNotFight: during a rolling deploy, a process of the
// old type and one of the new type (a renamed field) reading the same key
// do not overwrite each other's entry on every read: the one that finds
// an entry of another type younger than Options.SchemaGrace serves its
// loader's value and leaves the entry alone, so the other keeps hitting.
// Once the entry is older than the grace, it is taken over. Without the
// grace (negative), they overwrite each other back and forth.
func TestRollingDeployDoesNotFight(t *testing.T) {
	for name, s := range schemaStores(t) {
		t.Run(name, func(t *testing.T) {
			const rounds = 5
			oldP := newFetcher(t, s, time.Hour, personV1{Name: "ann", Age: 40})
			newP := newFetcher(t, s, time.Hour, personRenamed{Name: "ann", Years: 40})
			for range rounds {
				oldP.fetch(t, "rename")
				newP.fetch(t, "rename")
			}
			if n := oldP.loads.Load(); n != 1 {
				t.Errorf("old process loaded %d times; want 1 (its entry kept)", n)
			}
			if n := newP.loads.Load(); n != rounds {
				t.Errorf("new process loaded %d times; want %d (it cannot read the old entry)", n, rounds)
			}
			if st := newP.c.Stats(); st.SchemaKept != rounds || st.SchemaMismatches != rounds {
				t.Errorf("new process stats: %+v; want %d mismatches, %d kept", st, rounds, rounds)
			}

			// FetchMany keeps the old entry too.
			m, err := newP.c.FetchMany(context.Background(), []string{"rename"}, time.Hour, func(_ context.Context, keys []string) (map[string]personRenamed, error) {
				return map[string]personRenamed{"rename": newP.val}, nil
			})
			if err != nil || m["rename"] != newP.val {
				t.Fatalf("FetchMany = %v, %v", m, err)
			}
			if st := newP.c.Stats(); st.SchemaKept != rounds+1 {
				t.Errorf("FetchMany overwrote a recent entry of another type: %+v", st)
			}
			oldP.fetch(t, "rename")
			if n := oldP.loads.Load(); n != 1 {
				t.Errorf("old process loaded %d times after the new one's FetchMany; want 1", n)
			}

			// Past the grace the new type takes the key over, and the old
			// process in turn leaves the new entry alone.
			takeover := newFetcher(t, s, time.Millisecond, newP.val)
			time.Sleep(20 * time.Millisecond)
			takeover.fetch(t, "rename")
			if st := takeover.c.Stats(); takeover.loads.Load() != 1 || st.SchemaKept != 0 || st.Latency[kura.OpSet].Count != 1 {
				t.Errorf("after the grace the entry was not overwritten: loads %d, %+v", takeover.loads.Load(), st)
			}
			before := newP.loads.Load()
			for range rounds {
				oldP.fetch(t, "rename")
				newP.fetch(t, "rename")
			}
			if n := newP.loads.Load() - before; n != 0 {
				t.Errorf("new process loaded %d times after the takeover; want 0", n)
			}
			if st := oldP.c.Stats(); st.SchemaKept != rounds {
				t.Errorf("old process overwrote the new entry: %+v", st)
			}

			// An added field: the new process reads old entries; the old
			// one leaves the new process's entries alone.
			oldA := newFetcher(t, s, time.Hour, personV1{Name: "bo", Age: 3})
			newA := newFetcher(t, s, time.Hour, personAdded{Name: "bo", Age: 3, Email: "bo@example.com"})
			newA.fetch(t, "added")
			for range rounds {
				oldA.fetch(t, "added")
				newA.fetch(t, "added")
			}
			if newA.loads.Load() != 1 || oldA.loads.Load() != rounds {
				t.Errorf("added field: new loaded %d (want 1), old %d (want %d)", newA.loads.Load(), oldA.loads.Load(), rounds)
			}

			// Without the grace: a fight, every read a load and a write.
			oldF := newFetcher(t, s, -1, personV1{Name: "cy", Age: 5})
			newF := newFetcher(t, s, -1, personRenamed{Name: "cy", Years: 5})
			for range rounds {
				oldF.fetch(t, "fight")
				newF.fetch(t, "fight")
			}
			if oldF.loads.Load() != rounds || newF.loads.Load() != rounds {
				t.Errorf("SchemaGrace < 0: loads %d and %d; want %d each (overwriting each other)", oldF.loads.Load(), newF.loads.Load(), rounds)
			}
		})
	}
}
