package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
)

// NodeError is the failure of one server (node) of a store: a Redis
// standalone server, one Redis Cluster master, or one memcached server of a
// pool. Backends wrap every error they can attribute to a server in a
// *NodeError, on single-key paths as well as in a [BatchError]'s KeyError,
// so node health and metrics can act on the address without parsing text.
//
// Find it with [AsNodeError] or errors.As; the sentinels it wraps
// (ErrNotFound is never wrapped in one: a miss is not a node failure) stay
// reachable through errors.Is.
type NodeError struct {
	// Addr is the server's host:port as configured.
	Addr string
	// Err is what went wrong on it (a timeout, a refused connection, a
	// server error reply).
	Err error
}

func (e *NodeError) Error() string { return fmt.Sprintf("%s: %v", e.Addr, e.Err) }

// Unwrap returns the underlying error.
func (e *NodeError) Unwrap() error { return e.Err }

// NodeErr wraps err, a failure on the server addr, in a *NodeError. It
// returns err unchanged when it is nil, already carries a *NodeError, or is
// not the server's fault: a miss (ErrNotFound), a declined conditional
// write (ErrNotStored), an invalid key, a value too large (the value's
// fault, not the server's), a closed store, or the caller's own context
// being cancelled. With an empty addr (the server is not known) it returns
// err unchanged too.
func NodeErr(addr string, err error) error {
	if err == nil || addr == "" {
		return err
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotStored) || errors.Is(err, ErrInvalidKey) ||
		errors.Is(err, ErrValueTooLarge) ||
		errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) {
		return err
	}
	var ne *NodeError
	if errors.As(err, &ne) {
		return err
	}
	return &NodeError{Addr: addr, Err: err}
}

// AsNodeError returns the first *NodeError in err's chain, or nil.
func AsNodeError(err error) *NodeError {
	var ne *NodeError
	if errors.As(err, &ne) {
		return ne
	}
	return nil
}

// Wrapper is implemented by stores that wrap another store (a circuit
// breaker, instrumentation). A wrapper hides every optional capability it
// does not implement itself: [Find] does not reach around it, the way
// database/sql never calls past a driver that lacks an interface. A
// wrapper that lets a capability through implements it and routes the
// calls through itself, reporting when the wrapped store cannot serve them
// (as [LeaseCapable] and Tracker.Tracking do, driver.ErrSkip's role), or
// declaring through [Capable] that it does not have them. So a wrapper
// never hides a capability and never invents one. [Forward] is the
// embeddable part of that pass-through.
type Wrapper interface {
	Unwrap() Store
}

// Find returns the first store in the chain s, s.Unwrap(), ... that
// implements T, and whether there was one. For an interface T (a
// capability) the search stops at the first Wrapper that does not
// implement T, or that is [Capable] and does not pass T through: a
// capability found around a wrapper would bypass it (an L1 reading around
// a circuit breaker), and one a wrapper only pretends to have would fail.
// A concrete T (*redisstore.Store, say) is found anywhere in the chain:
// that is unwrapping, not a capability.
func Find[T any](s Store) (T, bool) {
	for s != nil {
		if t, ok := s.(T); ok {
			if c, ok := s.(Capable); ok {
				if ct := reflect.TypeFor[T](); ct.Kind() == reflect.Interface && !c.Has(ct) {
					break // a wrapper that does not pass this one through
				}
			}
			return t, true
		}
		w, ok := s.(Wrapper)
		if !ok || reflect.TypeFor[T]().Kind() == reflect.Interface {
			break
		}
		s = w.Unwrap()
	}
	var zero T
	return zero, false
}
