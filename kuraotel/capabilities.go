package kuraotel

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/kuracache/kura/store"
)

// The capabilities of the wrapped store, each passed through the
// wrapper: traced where it moves data, plain where it only reports.

// kuraotel passes NodeLocator, ServerLocator, NodeProber, HealthReporter, ConnReporter,
// MaxValueSizer, Pinger, MetaReader, PrefixReader and KeyWalker through
// only when the wrapped store has them (Has): they have no way to report
// "not here" other than being absent. The rest (the batch calls, leases,
// lease wake-ups, tracking) it always implements, reporting through
// CanLease, watched and Tracking when the wrapped store lacks them, as
// store/health does.

// always are the methods of the capabilities Store always has.
var always = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range []reflect.Type{
		reflect.TypeFor[store.Store](), reflect.TypeFor[store.Wrapper](), reflect.TypeFor[store.Batcher](),
		reflect.TypeFor[store.Leaser](), reflect.TypeFor[store.LeaseCapable](), reflect.TypeFor[store.LeaseWaker](),
		reflect.TypeFor[store.Tracker](), reflect.TypeFor[store.Capable](),
	} {
		for i := range t.NumMethod() {
			m[t.Method(i).Name] = true
		}
	}
	return m
}()

// Has implements store.Capable: Store has a capability it passes through
// (store.MetaReader, store.KeyWalker, store.Pinger, ...) exactly when the
// wrapped store has it, so that the wrapper never hides one and never
// invents one. c is an interface type.
func (s *Store) Has(c reflect.Type) bool {
	if c == nil || c.Kind() != reflect.Interface {
		return false
	}
	for i := range c.NumMethod() {
		if !always[c.Method(i).Name] {
			return store.Has(s.Unwrap(), c)
		}
	}
	return true
}

// LeaseGet implements store.Leaser.
func (s *Store) LeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	l, err := s.WrappedLeaser()
	if err != nil {
		return nil, err
	}
	ctx, c := s.start(ctx, "LeaseGet", first(keys), len(keys))
	r, err := l.LeaseGet(ctx, keys, opts)
	c.end(err)
	return r, err
}

// Fill implements store.Leaser.
func (s *Store) Fill(ctx context.Context, fills []store.Fill) error {
	l, err := s.WrappedLeaser()
	if err != nil {
		return err
	}
	k := ""
	if len(fills) > 0 {
		k = fills[0].Lease.Key
	}
	ctx, c := s.start(ctx, "Fill", k, len(fills))
	err = l.Fill(ctx, fills)
	c.end(err)
	return err
}

// Release implements store.Leaser.
func (s *Store) Release(ctx context.Context, leases []store.Lease) error {
	l, err := s.WrappedLeaser()
	if err != nil {
		return err
	}
	k := ""
	if len(leases) > 0 {
		k = leases[0].Key
	}
	ctx, c := s.start(ctx, "Release", k, len(leases))
	err = l.Release(ctx, leases)
	c.end(err)
	return err
}

// Invalidate implements store.Leaser.
func (s *Store) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	l, err := s.WrappedLeaser()
	if err != nil {
		return err
	}
	ctx, c := s.start(ctx, "Invalidate", first(keys), len(keys))
	err = l.Invalidate(ctx, keys, stale)
	c.end(err)
	return err
}

// GetTracked implements store.Tracker.
func (s *Store) GetTracked(ctx context.Context, key string) ([]byte, error) {
	t, err := s.WrappedTracker()
	if err != nil {
		return nil, err
	}
	ctx, c := s.start(ctx, "GetTracked", key, 1)
	b, err := t.GetTracked(ctx, key)
	c.end(err)
	return b, err
}

// GetManyTracked implements store.Tracker.
func (s *Store) GetManyTracked(ctx context.Context, keys []string) ([][]byte, error) {
	t, err := s.WrappedTracker()
	if err != nil {
		return nil, err
	}
	ctx, c := s.start(ctx, "GetManyTracked", first(keys), len(keys))
	v, err := t.GetManyTracked(ctx, keys)
	c.end(err)
	return v, err
}

// NodeOf names the node of key, as the wrapped store does ("" when it
// does not say).
func (s *Store) NodeOf(key string) string {
	if l, ok := store.Find[store.NodeLocator](s.inner); ok {
		return l.NodeOf(key)
	}
	return ""
}

// ServerOf is the wrapped store's ServerOf (store.ServerLocator: Has
// says whether it has one).
func (s *Store) ServerOf(key string, read bool) string {
	if l, ok := store.Find[store.ServerLocator](s.inner); ok {
		return l.ServerOf(key, read)
	}
	return ""
}

// Nodes returns the wrapped store's nodes (nil when it does not probe
// them).
func (s *Store) Nodes() []string {
	if p, ok := store.Find[store.NodeProber](s.inner); ok {
		return p.Nodes()
	}
	return nil
}

// ProbeNode probes a node of the wrapped store (not traced: probes are
// the breaker's, not a request's).
func (s *Store) ProbeNode(ctx context.Context, addr string) error {
	if p, ok := store.Find[store.NodeProber](s.inner); ok {
		return p.ProbeNode(ctx, addr)
	}
	return fmt.Errorf("%w: %T cannot probe its nodes (store.NodeProber)", store.ErrNotCapable, s.inner)
}

// NodeHealth returns the wrapped store's node health (nil without a
// breaker).
func (s *Store) NodeHealth() []store.NodeHealth {
	if h, ok := store.Find[store.HealthReporter](s.inner); ok {
		return h.NodeHealth()
	}
	return nil
}

// ConnStats returns the wrapped store's connection statistics (the zero
// value with Connected set when it does not report them).
func (s *Store) ConnStats() store.ConnStats {
	if r, ok := store.Find[store.ConnReporter](s.inner); ok {
		return r.ConnStats()
	}
	return store.ConnStats{Connected: true}
}

// MaxValueSize returns the wrapped store's limit (0 when it has none).
func (s *Store) MaxValueSize() int {
	if m, ok := store.Find[store.MaxValueSizer](s.inner); ok {
		return m.MaxValueSize()
	}
	return 0
}

// Ping pings the wrapped store (nil when it cannot).
func (s *Store) Ping(ctx context.Context) error {
	if p, ok := store.Find[store.Pinger](s.inner); ok {
		return p.Ping(ctx)
	}
	return nil
}

// KeyMeta implements store.MetaReader.
func (s *Store) KeyMeta(ctx context.Context, key string) (store.KeyMeta, error) {
	m, ok := store.Find[store.MetaReader](s.inner)
	if !ok { // not called through Find: Has says no
		return store.KeyMeta{}, fmt.Errorf("%w: %T cannot describe a key (store.MetaReader)", store.ErrNotCapable, s.inner)
	}
	ctx, c := s.start(ctx, "KeyMeta", key, 1)
	km, err := m.KeyMeta(ctx, key)
	c.end(err)
	return km, err
}

// GetPrefix implements store.PrefixReader.
func (s *Store) GetPrefix(ctx context.Context, key string, max int) ([]byte, int64, error) {
	p, ok := store.Find[store.PrefixReader](s.inner)
	if !ok { // not called through Find: Has says no
		return nil, 0, fmt.Errorf("%w: %T cannot read a value's prefix (store.PrefixReader)", store.ErrNotCapable, s.inner)
	}
	ctx, c := s.start(ctx, "GetPrefix", key, 1)
	b, n, err := p.GetPrefix(ctx, key, max)
	c.end(err)
	return b, n, err
}

// WalkNodes implements store.KeyWalker when the wrapped store has it (not
// traced: the walkers of tools use connections of their own).
func (s *Store) WalkNodes(ctx context.Context) (string, []store.NodeWalker, error) {
	if w, ok := store.Find[store.KeyWalker](s.inner); ok {
		return w.WalkNodes(ctx)
	}
	return "", nil, fmt.Errorf("%w: %T", store.ErrCannotWalk, s.inner)
}
