package kuraotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/store"
)

// The capabilities of the wrapped store, each passed through the
// wrapper: traced where it moves data, plain where it only reports.

var (
	errNoLeases   = errors.New("kuraotel: the wrapped store has no lease capability (store.Leaser)")
	errNoTracking = errors.New("kuraotel: the wrapped store has no tracking capability (store.Tracker)")
	errNoMeta     = errors.New("kuraotel: the wrapped store cannot read key metadata (store.MetaReader)")
	errNoPrefix   = errors.New("kuraotel: the wrapped store cannot read a value's prefix (store.PrefixReader)")
)

// CanLease reports whether the wrapped store has leases.
func (s *Store) CanLease() bool {
	_, ok := store.FindLeaser(s.inner)
	return ok
}

func (s *Store) leaser() (store.Leaser, error) {
	if l, ok := store.FindLeaser(s.inner); ok {
		return l, nil
	}
	return nil, fmt.Errorf("%w: %T", errNoLeases, s.inner)
}

// LeaseGet implements store.Leaser.
func (s *Store) LeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	l, err := s.leaser()
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
	l, err := s.leaser()
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
	l, err := s.leaser()
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
	l, err := s.leaser()
	if err != nil {
		return err
	}
	ctx, c := s.start(ctx, "Invalidate", first(keys), len(keys))
	err = l.Invalidate(ctx, keys, stale)
	c.end(err)
	return err
}

func (s *Store) tracker() (store.Tracker, bool) {
	t, ok := store.Find[store.Tracker](s.inner)
	return t, ok && t.Tracking()
}

// Tracking reports whether the wrapped store's server reports changes.
func (s *Store) Tracking() bool {
	_, ok := s.tracker()
	return ok
}

// Tracks reports whether the wrapped store reports changes of key.
func (s *Store) Tracks(key string) bool {
	t, ok := s.tracker()
	return ok && t.Tracks(key)
}

// Subscribe registers fn with the wrapped store's reports.
func (s *Store) Subscribe(fn func(keys []string)) (cancel func()) {
	if t, ok := s.tracker(); ok {
		return t.Subscribe(fn)
	}
	return func() {}
}

// GetTracked implements store.Tracker.
func (s *Store) GetTracked(ctx context.Context, key string) ([]byte, error) {
	t, ok := s.tracker()
	if !ok {
		return nil, fmt.Errorf("%w: %T", errNoTracking, s.inner)
	}
	ctx, c := s.start(ctx, "GetTracked", key, 1)
	b, err := t.GetTracked(ctx, key)
	c.end(err)
	return b, err
}

// GetManyTracked implements store.Tracker.
func (s *Store) GetManyTracked(ctx context.Context, keys []string) ([][]byte, error) {
	t, ok := s.tracker()
	if !ok {
		return nil, fmt.Errorf("%w: %T", errNoTracking, s.inner)
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
	return fmt.Errorf("kuraotel: %T cannot probe its nodes (store.NodeProber)", s.inner)
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
	if !ok {
		return store.KeyMeta{}, fmt.Errorf("%w: %T", errNoMeta, s.inner)
	}
	ctx, c := s.start(ctx, "KeyMeta", key, 1)
	km, err := m.KeyMeta(ctx, key)
	c.end(err)
	return km, err
}

// GetPrefix implements store.PrefixReader.
func (s *Store) GetPrefix(ctx context.Context, key string, max int) ([]byte, int64, error) {
	p, ok := store.Find[store.PrefixReader](s.inner)
	if !ok {
		return nil, 0, fmt.Errorf("%w: %T", errNoPrefix, s.inner)
	}
	ctx, c := s.start(ctx, "GetPrefix", key, 1)
	b, n, err := p.GetPrefix(ctx, key, max)
	c.end(err)
	return b, n, err
}
