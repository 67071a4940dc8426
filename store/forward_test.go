package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// capableWrapping passes MaxValueSizer through only when its inner store
// has it (store.Capable).
type capableWrapping struct {
	Forward
	plainStore
}

func (w capableWrapping) MaxValueSize() int {
	if m, ok := Find[MaxValueSizer](w.Unwrap()); ok {
		return m.MaxValueSize()
	}
	return 0
}

func (w capableWrapping) Has(c reflect.Type) bool {
	if c == reflect.TypeFor[MaxValueSizer]() {
		return Has(w.Unwrap(), c)
	}
	return true
}

// TestCapableWrapperInventsNothing: Find returns a Capable wrapper as a
// capability only when it says it passes it through, and then does not
// look around it either; Has answers as Find does.
func TestCapableWrapperInventsNothing(t *testing.T) {
	over := capableWrapping{Forward: NewForward(sizedStore{})}
	if m, ok := Find[MaxValueSizer](over); !ok || m.MaxValueSize() != 42 {
		t.Fatalf("Find over a store with the capability = %v, %v", m, ok)
	}
	plain := capableWrapping{Forward: NewForward(plainStore{})}
	if m, ok := Find[MaxValueSizer](plain); ok {
		t.Fatalf("Find returned %v: the wrapper invented a capability its store lacks", m)
	}
	mvs := reflect.TypeFor[MaxValueSizer]()
	if !Has(over, mvs) || Has(plain, mvs) || Has(plainStore{}, mvs) || !Has(sizedStore{}, mvs) {
		t.Fatal("Has disagrees with Find")
	}
	if Has(sizedStore{}, reflect.TypeFor[sizedStore]()) || Has(nil, mvs) {
		t.Fatal("Has of a concrete type or of no store must be false")
	}
	// A wrapper around the Capable one that does not implement the
	// capability hides it, as any wrapper does.
	if _, ok := Find[MaxValueSizer](wrapping{inner: over}); ok {
		t.Fatal("Find reached around a wrapper")
	}
}

// trackingStore is a Tracker whose tracking can be off.
type trackingStore struct {
	plainStore
	on   bool
	subs *int
}

func (s trackingStore) Tracking() bool                                     { return s.on }
func (s trackingStore) Tracks(key string) bool                             { return key != "untracked" }
func (s trackingStore) GetTracked(context.Context, string) ([]byte, error) { return []byte("v"), nil }
func (s trackingStore) GetManyTracked(context.Context, []string) ([][]byte, error) {
	return nil, nil
}
func (s trackingStore) Subscribe(func([]string)) func() { *s.subs++; return func() {} }

// TestForward: the pass-through a wrapper embeds reports the wrapped
// store's tracking and leases, and errors with ErrNotCapable when asked
// for one it lacks; embedding it makes no capability.
func TestForward(t *testing.T) {
	subs := 0
	on := NewForward(trackingStore{on: true, subs: &subs})
	if !on.Tracking() || !on.Tracks("k") || on.Tracks("untracked") {
		t.Fatal("Forward does not report the wrapped store's tracking")
	}
	on.Subscribe(func([]string) {})()
	if subs != 1 {
		t.Fatalf("Subscribe reached the wrapped store %d times", subs)
	}
	if tr, err := on.WrappedTracker(); err != nil || tr == nil {
		t.Fatalf("WrappedTracker = %v, %v", tr, err)
	}
	off := NewForward(trackingStore{on: false, subs: &subs})
	if off.Tracking() || off.Tracks("k") {
		t.Fatal("tracking that is off is reported on")
	}
	off.Subscribe(func([]string) {})()
	if subs != 1 {
		t.Fatal("Subscribe reached a store whose tracking is off")
	}
	if _, err := off.WrappedTracker(); !errors.Is(err, ErrNotCapable) {
		t.Fatalf("WrappedTracker with tracking off = %v", err)
	}
	if _, err := off.WrappedLeaser(); !errors.Is(err, ErrNotCapable) || off.CanLease() {
		t.Fatalf("WrappedLeaser of a store without leases = %v (CanLease %v)", err, off.CanLease())
	}
	off.WatchLeases(func([]string) {})()
	w := struct {
		Forward
		plainStore
	}{Forward: on}
	if _, ok := Find[Tracker](w); ok {
		t.Fatal("embedding Forward alone made a Tracker")
	}
	if w.Unwrap() == nil {
		t.Fatal("Unwrap lost the wrapped store")
	}
}
