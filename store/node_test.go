package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

type plainStore struct{}

func (plainStore) Get(context.Context, string) ([]byte, error)              { return nil, ErrNotFound }
func (plainStore) Set(context.Context, string, []byte, time.Duration) error { return nil }
func (plainStore) Delete(context.Context, string) error                     { return nil }
func (plainStore) Close() error                                             { return nil }

type sizedStore struct{ plainStore }

func (sizedStore) MaxValueSize() int { return 42 }

type wrapping struct {
	plainStore
	inner Store
}

func (w wrapping) Unwrap() Store { return w.inner }

func TestFindThroughWrappers(t *testing.T) {
	s := wrapping{inner: wrapping{inner: sizedStore{}}}
	m, ok := Find[MaxValueSizer](s)
	if !ok || m.MaxValueSize() != 42 {
		t.Fatalf("Find through two wrappers = %v, %v", m, ok)
	}
	if _, ok := Find[Batcher](s); ok {
		t.Fatal("Find found a Batcher nobody implements")
	}
	if _, ok := Find[Batcher](nil); ok {
		t.Fatal("Find on nil store")
	}
}

func TestNodeError(t *testing.T) {
	base := errors.New("connection refused")
	err := fmt.Errorf("get %q: %w", "k", &NodeError{Addr: "127.0.0.1:6379", Err: base})
	ne := AsNodeError(err)
	if ne == nil || ne.Addr != "127.0.0.1:6379" || !errors.Is(err, base) {
		t.Fatalf("AsNodeError(%v) = %#v", err, ne)
	}
	if AsNodeError(ErrNotFound) != nil {
		t.Fatal("a miss is not a node error")
	}
	if got := ne.Error(); got != "127.0.0.1:6379: connection refused" {
		t.Fatalf("Error() = %q", got)
	}
}
