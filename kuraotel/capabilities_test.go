package kuraotel_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/kuracache/kura/kuraotel"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/move"
	"github.com/kuracache/kura/store/redisstore"
)

// capabilities are the optional capabilities a Cache or a tool looks for
// with store.Find.
var capabilities = []reflect.Type{
	reflect.TypeFor[store.NodeLocator](), reflect.TypeFor[store.ServerLocator](), reflect.TypeFor[store.NodeProber](),
	reflect.TypeFor[store.HealthReporter](), reflect.TypeFor[store.ConnReporter](),
	reflect.TypeFor[store.MaxValueSizer](), reflect.TypeFor[store.Pinger](),
	reflect.TypeFor[store.MetaReader](), reflect.TypeFor[store.PrefixReader](),
	reflect.TypeFor[store.KeyWalker](), reflect.TypeFor[store.BatchGetter](),
	reflect.TypeFor[store.Leaser](), reflect.TypeFor[store.LeaseWaker](), reflect.TypeFor[store.Tracker](),
	// A tool's own small interface (dictstore declares one where it uses
	// it): the wrapper answers it the same way.
	reflect.TypeFor[interface {
		KeyMeta(ctx context.Context, key string) (store.KeyMeta, error)
	}](),
}

// found reports whether capability c is found on s as a Cache finds it
// (leases through CanLease, tracking through Tracking).
func found(s store.Store, c reflect.Type) bool {
	switch c {
	case reflect.TypeFor[store.Leaser]():
		_, ok := store.FindLeaser(s)
		return ok
	case reflect.TypeFor[store.Tracker]():
		_, ok := store.FindTracker(s)
		return ok
	case reflect.TypeFor[store.LeaseWaker]():
		l, ok := store.FindLeaser(s)
		if !ok {
			return false
		}
		_, ok = l.(store.LeaseWaker)
		return ok
	}
	return store.Has(s, c)
}

// TestWrapperHasExactlyTheWrappedCapabilities: WrapStore neither hides a
// capability of the store it wraps (a Cache or a tool finds it through the
// wrapper) nor invents one (store.Find of a MetaReader, a KeyWalker, a
// Pinger over memstore finds none), over every kind of store and over
// another wrapper.
func TestWrapperHasExactlyTheWrappedCapabilities(t *testing.T) {
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := redisstore.New(context.Background(), redisstore.Options{Addrs: []string{"127.0.0.1:1"}, Tracking: redisstore.Tracking{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	mc, err := memcache.New(context.Background(), memcache.Options{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Close() })
	hs, err := health.New(rs, health.Options{ProbeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.Close() })
	mv, err := move.New(move.Options{Old: ms, New: rs})
	if err != nil {
		t.Fatal(err)
	}
	for name, inner := range map[string]store.Store{"memstore": ms, "redisstore": rs, "memcache": mc, "health": hs, "move": mv} {
		w := kuraotel.WrapStore(inner, kuraotel.StoreOptions{})
		for _, c := range capabilities {
			got, want := found(w, c), found(inner, c)
			if c == reflect.TypeFor[store.LeaseWaker]() && got && !want {
				// A wrapper that leases can always be asked to watch: it
				// answers watched == false for a store that cannot (the
				// LeaseWaker contract), as store/health does.
				continue
			}
			if got != want {
				t.Errorf("over %s: %v found through the wrapper = %v, on the store itself = %v", name, c, got, want)
			}
		}
	}
	// The generic form Cache code and tools use.
	if _, ok := store.Find[store.MetaReader](kuraotel.WrapStore(ms, kuraotel.StoreOptions{})); ok {
		t.Error("store.Find found a MetaReader on a wrapped memstore")
	}
	if _, ok := store.Find[store.PrefixReader](kuraotel.WrapStore(ms, kuraotel.StoreOptions{})); ok {
		t.Error("store.Find found a PrefixReader on a wrapped memstore")
	}
	if _, ok := store.Find[store.KeyWalker](kuraotel.WrapStore(rs, kuraotel.StoreOptions{})); !ok {
		t.Error("store.Find found no KeyWalker on a wrapped redisstore (kura scan would refuse it)")
	}
	// Called directly anyway, a capability the wrapped store lacks says so.
	_, err = kuraotel.WrapStore(ms, kuraotel.StoreOptions{}).KeyMeta(context.Background(), "k")
	if !errors.Is(err, store.ErrNotCapable) {
		t.Errorf("KeyMeta over memstore = %v, want ErrNotCapable", err)
	}
}
