package storetest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/storetest"
)

// mapStore is the smallest correct Store, without Batcher: running the
// suite on it checks the suite itself and the store package's fallback
// batch helpers.
type mapStore struct {
	mu     sync.Mutex
	m      map[string]mapEntry
	closed bool
}

type mapEntry struct {
	val []byte
	exp time.Time
}

func (s *mapStore) check(ctx context.Context, key string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(key) > 200 {
		return fmt.Errorf("%w: longer than 200 bytes", store.ErrInvalidKey)
	}
	return store.CheckKey(key)
}

func (s *mapStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.check(ctx, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok || (!e.exp.IsZero() && time.Now().After(e.exp)) {
		return nil, store.ErrNotFound
	}
	return append([]byte{}, e.val...), nil
}

func (s *mapStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	if err := store.CheckTTL(ttl); err != nil {
		return err
	}
	e := mapEntry{val: append([]byte{}, value...)}
	if ttl > 0 {
		e.exp = time.Now().Add(ttl)
	}
	s.mu.Lock()
	s.m[key] = e
	s.mu.Unlock()
	return nil
}

func (s *mapStore) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
	return nil
}

func (s *mapStore) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func TestSuiteOnMapStore(t *testing.T) {
	storetest.RunWithOptions(t, func(t *testing.T) store.Store {
		return &mapStore{m: map[string]mapEntry{}}
	}, storetest.Options{MaxKeyLen: 200, LargeValue: 3 << 20})
}
