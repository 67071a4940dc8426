package store

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrNotCapable is the error of a wrapper's routed call (a tracked read, a
// lease operation) when the store it wraps lacks the capability. A Cache
// never sees it: the wrapper reports the capability as missing first
// (CanLease, Tracking, or Capable.Has).
var ErrNotCapable = errors.New("kura: the wrapped store lacks this capability")

// Forward is embedded by a store wrapper (store/health, kuraotel, a wrapper
// added later) for the parts of the wrapped store's capabilities that only
// report or register: Unwrap, Tracking, Tracks and Subscribe of a
// [Tracker], CanLease of a [LeaseCapable], WatchLeases of a [LeaseWaker].
// The calls that move data (GetTracked, LeaseGet, WatchedLeaseGet, ...) the
// wrapper implements itself and routes through itself, finding the wrapped
// store's capability with WrappedTracker and WrappedLeaser. Embedding
// Forward alone therefore makes no capability: a wrapper is a Tracker only
// once it routes the tracked reads too (the [Wrapper] rule). The zero
// value wraps nothing; make one with NewForward.
//
// The wrapped store's capabilities are found once, by NewForward (a
// store's type does not change, and neither does what a Capable wrapper
// passes through); whether they are on (CanLease, Tracking) is asked on
// every call. A wrapper's data calls then cost no [Find] per call.
type Forward struct {
	inner   Store
	leaser  Leaser  // Find[Leaser](inner), nil if none
	tracker Tracker // Find[Tracker](inner), nil if none
}

// NewForward returns the Forward of a wrapper around inner.
func NewForward(inner Store) Forward {
	f := Forward{inner: inner}
	f.leaser, _ = Find[Leaser](inner)
	f.tracker, _ = Find[Tracker](inner)
	return f
}

// wrappedLeaser is FindLeaser(f.inner), from what NewForward found.
func (f Forward) wrappedLeaser() (Leaser, bool) {
	if f.leaser == nil {
		return nil, false
	}
	if c, ok := f.leaser.(LeaseCapable); ok && !c.CanLease() {
		return nil, false
	}
	return f.leaser, true
}

// wrappedTracker is FindTracker(f.inner), from what NewForward found.
func (f Forward) wrappedTracker() (Tracker, bool) {
	return f.tracker, f.tracker != nil && f.tracker.Tracking()
}

// Unwrap returns the wrapped store.
func (f Forward) Unwrap() Store { return f.inner }

// WrappedTracker returns the wrapped store's tracking capability, or an
// error matching ErrNotCapable when it has none or its tracking is off.
func (f Forward) WrappedTracker() (Tracker, error) {
	if t, ok := f.wrappedTracker(); ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w: %T does not track (store.Tracker)", ErrNotCapable, f.inner)
}

// Tracking reports whether the wrapped store's server reports changes.
func (f Forward) Tracking() bool {
	_, ok := f.wrappedTracker()
	return ok
}

// Tracks reports whether the wrapped store reports changes of key.
func (f Forward) Tracks(key string) bool {
	t, ok := f.wrappedTracker()
	return ok && t.Tracks(key)
}

// Subscribe registers fn with the wrapped store's change reports (a no-op
// when it does not track).
func (f Forward) Subscribe(fn func(keys []string)) (cancel func()) {
	if t, ok := f.wrappedTracker(); ok {
		return t.Subscribe(fn)
	}
	return func() {}
}

// WrappedLeaser returns the wrapped store's lease capability, or an error
// matching ErrNotCapable when it has none.
func (f Forward) WrappedLeaser() (Leaser, error) {
	if l, ok := f.wrappedLeaser(); ok {
		return l, nil
	}
	return nil, fmt.Errorf("%w: %T has no leases (store.Leaser)", ErrNotCapable, f.inner)
}

// CanLease reports whether the wrapped store has leases.
func (f Forward) CanLease() bool {
	_, ok := f.wrappedLeaser()
	return ok
}

// WrappedWaker returns the wrapped store's lease wake-ups: the
// [LeaseWaker] of its lease capability, if it has leases and can watch.
// A wrapper's WatchedLeaseGet routes the watched read to it, and falls
// back to its own LeaseGet (watched false) without one.
func (f Forward) WrappedWaker() (LeaseWaker, bool) {
	if l, ok := f.wrappedLeaser(); ok {
		w, ok := l.(LeaseWaker)
		return w, ok
	}
	return nil, false
}

// WatchLeases registers fn with the wrapped store's lease reports (see
// [LeaseWaker]; a no-op when it cannot watch).
func (f Forward) WatchLeases(fn func(keys []string)) (cancel func()) {
	if w, ok := f.WrappedWaker(); ok {
		return w.WatchLeases(fn)
	}
	return func() {}
}

// FindTracker returns the tracking capability of s (see [Find]), unless
// its tracking is off.
func FindTracker(s Store) (Tracker, bool) {
	t, ok := Find[Tracker](s)
	return t, ok && t.Tracking()
}

// Capable is implemented by a wrapper that implements some capabilities
// only to pass them through, so that it has them exactly when the store
// it wraps does (kuraotel's store wrapper: a MetaReader over Redis, none
// over memstore). [Find] asks Has before returning such a wrapper as a
// capability, and does not look around it when Has says no: a wrapper
// never invents a capability, nor lets one reach around it. Has reports
// whether the wrapper serves capability c, an interface type such as
// reflect.TypeFor[MetaReader](). A wrapper that serves every capability it
// implements need not implement Capable.
type Capable interface {
	Has(c reflect.Type) bool
}

// Has reports whether s has the capability c, an interface type, as
// [Find] would find it on s: s implements c and, if it is Capable, agrees.
// A Capable wrapper's Has answers Has(inner, c) for the capabilities it
// passes through. A c that is not an interface type is no capability.
func Has(s Store, c reflect.Type) bool {
	if s == nil || c == nil || c.Kind() != reflect.Interface || !reflect.TypeOf(s).Implements(c) {
		return false
	}
	cp, ok := s.(Capable)
	return !ok || cp.Has(c)
}
