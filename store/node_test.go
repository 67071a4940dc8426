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

// TestFindNeverAroundAWrapper: a capability is found on a wrapper that
// implements it, never around one that does not (the call would bypass
// the wrapper); a concrete store is found anywhere in the chain.
func TestFindNeverAroundAWrapper(t *testing.T) {
	if m, ok := Find[MaxValueSizer](sizedStore{}); !ok || m.MaxValueSize() != 42 {
		t.Fatalf("Find on the store itself = %v, %v", m, ok)
	}
	s := wrapping{inner: wrapping{inner: sizedStore{}}}
	if m, ok := Find[MaxValueSizer](s); ok {
		t.Fatalf("Find reached around two wrappers that do not implement the capability: %v", m)
	}
	if sz, ok := Find[sizedStore](s); !ok || sz.MaxValueSize() != 42 {
		t.Fatal("Find of a concrete type must unwrap to it")
	}
	sw := sizedWrapping{wrapping{inner: sizedStore{}}}
	if m, ok := Find[MaxValueSizer](sw); !ok || m.MaxValueSize() != 7 {
		t.Fatalf("Find must stop at the wrapper that implements the capability: %v, %v", m, ok)
	}
	if _, ok := Find[Batcher](s); ok {
		t.Fatal("Find found a Batcher nobody implements")
	}
	if _, ok := Find[Batcher](nil); ok {
		t.Fatal("Find on nil store")
	}
}

type sizedWrapping struct{ wrapping }

func (sizedWrapping) MaxValueSize() int { return 7 }

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

func TestBatchErrorHelpers(t *testing.T) {
	be := BatchError{Op: "get"}
	if be.Err() != nil {
		t.Fatal("an empty BatchError must be a nil error")
	}
	boom := errors.New("connection reset")
	be.AddNode("a", "10.0.0.1:11211", boom)
	be.AddNode("b", "10.0.0.1:11211", ErrNotFound) // a miss is no node failure
	be.Add("", fmt.Errorf("%w: empty key", ErrInvalidKey))
	err := be.Err()
	if ne := AsNodeError(err); ne == nil || ne.Addr != "10.0.0.1:11211" || !errors.Is(ne, boom) {
		t.Fatalf("AsNodeError(%v) = %v", err, ne)
	}
	if AsNodeError(be.Errors[1].Err) != nil || AsNodeError(be.Errors[2].Err) != nil {
		t.Fatal("ErrNotFound and ErrInvalidKey must not become node errors")
	}
	if got := be.Errors[0].Error(); got != `key "a" on 10.0.0.1:11211: connection reset` {
		t.Fatalf("KeyError text %q names the server twice or not at all", got)
	}
	var all BatchError
	all.Op = "get"
	all.Merge(err, nil)
	all.Merge(boom, []string{"x", "y"})
	all.Merge(nil, []string{"z"})
	if len(all.Errors) != 5 {
		t.Fatalf("Merge kept %d failures, want 5", len(all.Errors))
	}
	if got := BatchErrorOf("set", []string{"p", "q"}, []error{nil, boom}); got == nil || len(got.(*BatchError).Failed()) != 1 {
		t.Fatalf("BatchErrorOf = %v", got)
	}
	if BatchErrorOf("set", []string{"p"}, []error{nil}) != nil {
		t.Fatal("BatchErrorOf of no failures must be nil")
	}
	if err := NodeErr("h:1", context.Canceled); AsNodeError(err) != nil {
		t.Fatal("the caller's cancellation is no node failure")
	}
	if NodeErr("", boom) != boom || NodeErr("h:1", nil) != nil {
		t.Fatal("NodeErr without an address or error must pass it through")
	}
}
