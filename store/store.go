// Package store defines the byte-level seam between the kura Cache and a
// cache server.
//
// A backend implements [Store]: a handful of methods that move opaque bytes
// with a TTL. Everything else (codecs, read-through, singleflight, negative
// caching, metrics) lives above the seam in package kura, the way
// database/sql sits above database/sql/driver.
//
// Everything beyond those methods is an optional capability, one small
// interface each, discovered by type assertion the way database/sql
// discovers driver.ExecerContext:
//
//   - batches: [BatchGetter], [BatchSetter], [BatchDeleter] ([Batcher]
//     is all three): one round trip per server for many keys;
//   - read-through coordination: [Leaser] (cross-process leases, with
//     [LeaseCapable] for a wrapper whose inner store may lack them) and
//     [LeaseWaker] (the server wakes lease waiters);
//   - the L1: [Tracker] (the server reports changed keys);
//   - limits and liveness: [MaxValueSizer], [Pinger];
//   - tools: [MetaReader] (TTL and size without the value),
//     [PrefixReader], [KeyWalker] and [NodeWalker] (scans),
//     [NodeLocator], [ServerLocator] and [NodeProber] (which node holds a
//     key; probing one);
//   - health: [HealthReporter], [ConnReporter], [Resolver].
//
// A wrapper that passes only some capabilities on implements [Capable];
// a context a store may bound by its deadline alone is [DeadlineBound]. A store that wraps another (a circuit breaker,
// instrumentation) implements [Wrapper]; [Find] looks for a capability
// down the chain but never around a wrapper that does not implement it, so
// no capability bypasses a wrapper (database/sql's driver.ErrSkip
// discipline: a wrapper passes a capability on by implementing it). The
// package-level helpers [GetMany], [SetMany] and [DeleteMany] use the batch
// capabilities when present and fall back to concurrent single-key calls
// otherwise, so callers never need to care.
//
// # Contract
//
//   - Get returns [ErrNotFound] (possibly wrapped) for a missing key, never a
//     nil slice with a nil error.
//   - Delete of a missing key is not an error.
//   - A TTL of zero means "no expiry"; a negative TTL is invalid.
//   - Errors are wrapped with the server address where one applies, and keep
//     the sentinels below reachable through errors.Is.
//   - Batch methods report per-key failures in a [*BatchError] while still
//     returning every result that succeeded; a failure of one server never
//     hides the answers of another.
//   - Implementations are safe for concurrent use.
//   - Set, SetMany and Leaser.Fill keep no reference to the value slices
//     they were given once they return (they copy them or have written
//     them out, on every path: a timeout, a cancelled context, a failed
//     connection): the caller reuses them (the Cache's encode buffers).
//     Get and GetMany return slices the caller owns.
//
// The conformance suite in store/storetest checks all of this against every
// backend on real servers.
package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Sentinel errors that callers branch on with errors.Is.
var (
	// ErrNotFound reports a cache miss.
	ErrNotFound = errors.New("kura: not found")
	// ErrValueTooLarge reports a value the server would refuse for its size.
	ErrValueTooLarge = errors.New("kura: value too large")
	// ErrInvalidKey reports a key the backend cannot store (empty, or not
	// representable on its wire protocol).
	ErrInvalidKey = errors.New("kura: invalid key")
	// ErrNotStored reports a conditional write the server declined.
	ErrNotStored = errors.New("kura: not stored")
	// ErrClosed reports use of a Store after Close.
	ErrClosed = errors.New("kura: store closed")
)

// Store is the minimal interface a cache backend implements.
//
// A context passed to a Store's method is valid for that call only: a
// Store must not keep it, or anything derived from it, after the call
// returns. The read path hands stores pooled contexts that are reused
// for later calls, except contexts that have ended, which are never reused.
type Store interface {
	// Get returns the bytes stored under key, or an error matching
	// ErrNotFound when there are none. The returned slice belongs to the
	// caller.
	Get(ctx context.Context, key string) ([]byte, error)
	// Set stores value under key for ttl (0 = no expiry).
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Delete removes key; deleting a missing key succeeds.
	Delete(ctx context.Context, key string) error
	// Close releases connections. The Store must not be used afterwards.
	Close() error
}

// Item is one key/value pair to write in a batch.
type Item struct {
	Key   string
	Value []byte
	// TTL is the time to live; zero means no expiry.
	TTL time.Duration
}

// BatchGetter is implemented by stores that can read many keys with one
// round trip per server.
type BatchGetter interface {
	// GetMany returns values aligned with keys: values[i] is nil when
	// keys[i] is missing or failed. A non-nil error is either a
	// *BatchError naming the keys that failed (the other results are
	// valid) or an error that failed the whole batch. The values belong
	// to the caller, as Get's do.
	GetMany(ctx context.Context, keys []string) ([][]byte, error)
}

// BatchSetter is implemented by stores that can write many items with one
// round trip per server.
type BatchSetter interface {
	// SetMany writes all items. Per-key failures come back in a
	// *BatchError; items not named there were stored.
	SetMany(ctx context.Context, items []Item) error
}

// BatchDeleter is implemented by stores that can delete many keys with one
// round trip per server.
type BatchDeleter interface {
	// DeleteMany removes all keys; missing keys are not failures.
	DeleteMany(ctx context.Context, keys []string) error
}

// Batcher is the three batch capabilities together, as every built-in
// backend implements them.
type Batcher interface {
	BatchGetter
	BatchSetter
	BatchDeleter
}

// MaxValueSizer is implemented by stores whose server limits the size of
// one value (memcached's item_size_max, for example). The Cache refuses a
// larger value before sending it.
type MaxValueSizer interface {
	// MaxValueSize returns the largest value in bytes the server accepts,
	// or 0 when unknown or unlimited.
	MaxValueSize() int
}

// Pinger is implemented by stores that can check the health of their
// servers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// KeyError is the failure of one key in a batch.
type KeyError struct {
	Key string
	// Addr is the server the key was sent to, when known.
	Addr string
	Err  error
}

func (e KeyError) Error() string {
	if ne, ok := e.Err.(*NodeError); ok && ne.Addr == e.Addr {
		return fmt.Sprintf("key %q on %v", e.Key, ne)
	}
	if e.Addr != "" {
		return fmt.Sprintf("key %q on %s: %v", e.Key, e.Addr, e.Err)
	}
	return fmt.Sprintf("key %q: %v", e.Key, e.Err)
}

// Unwrap returns the underlying error.
func (e KeyError) Unwrap() error { return e.Err }

// BatchError reports the keys of a batch that failed. The rest of the batch
// succeeded.
type BatchError struct {
	Op     string // "get", "set" or "delete"
	Errors []KeyError
}

func (e *BatchError) Error() string {
	if len(e.Errors) == 0 {
		return "kura: " + e.Op + " batch: no failures"
	}
	// Summarise by cause so a 10,000-key failure stays one readable line.
	counts := map[string]int{}
	for _, ke := range e.Errors {
		msg := ke.Err.Error()
		// A node error names its server already.
		if ne, ok := ke.Err.(*NodeError); ke.Addr != "" && (!ok || ne.Addr != ke.Addr) {
			msg = ke.Addr + ": " + msg
		}
		counts[msg]++
	}
	causes := make([]string, 0, len(counts))
	for msg, n := range counts {
		causes = append(causes, fmt.Sprintf("%d× %s", n, msg))
	}
	sort.Strings(causes)
	return fmt.Sprintf("kura: %s batch: %d key(s) failed (first %q): %s",
		e.Op, len(e.Errors), e.Errors[0].Key, strings.Join(causes, "; "))
}

// Unwrap exposes every key's error to errors.Is and errors.As.
func (e *BatchError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i := range e.Errors {
		errs[i] = e.Errors[i]
	}
	return errs
}

// Add records the failure of key, not attributable to a server (an invalid
// key, a value the client refused before sending).
func (e *BatchError) Add(key string, err error) {
	e.Errors = append(e.Errors, KeyError{Key: key, Err: err})
}

// AddNode records the failure of key on the server addr. The error is
// wrapped in a *NodeError (unless it is one already, or is not the
// server's fault: see NodeErr), so health and metrics find the server with
// AsNodeError whichever way they reach the error.
func (e *BatchError) AddNode(key, addr string, err error) {
	e.Errors = append(e.Errors, KeyError{Key: key, Addr: addr, Err: NodeErr(addr, err)})
}

// Err returns e as an error, or nil when it records no failure: the one
// place that avoids the typed-nil trap of returning an empty *BatchError
// as a non-nil error.
func (e *BatchError) Err() error {
	if e == nil || len(e.Errors) == 0 {
		return nil
	}
	return e
}

// Merge adds the failures of err to e: each KeyError of a *BatchError, or
// err for every one of keys when it failed the whole call. It does nothing
// for a nil err.
func (e *BatchError) Merge(err error, keys []string) {
	if err == nil {
		return
	}
	var be *BatchError
	if errors.As(err, &be) {
		e.Errors = append(e.Errors, be.Errors...)
		return
	}
	for _, k := range keys {
		e.Add(k, err)
	}
}

// BatchErrorOf builds the error of a batch op whose per-key errors are
// aligned with keys (nil = success): nil when all succeeded.
func BatchErrorOf(op string, keys []string, errs []error) error {
	be := &BatchError{Op: op}
	for i, err := range errs {
		if err != nil {
			be.Add(keys[i], err)
		}
	}
	return be.Err()
}

// Failed returns the set of keys that failed.
func (e *BatchError) Failed() map[string]error {
	m := make(map[string]error, len(e.Errors))
	for _, ke := range e.Errors {
		m[ke.Key] = ke.Err
	}
	return m
}

// CheckKey returns an error matching ErrInvalidKey for keys no backend can
// take. Backends apply their own stricter rules on top.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	return nil
}

// CheckTTL returns an error for a negative ttl.
func CheckTTL(ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("kura: negative ttl %v", ttl)
	}
	return nil
}

// DeadlineBound is implemented by contexts that end only when their
// deadline passes: nobody cancels them earlier (kura's store-time budget,
// which bounds many reads with one shared deadline). A store may bound its
// I/O by the deadline alone instead of watching Done, which for a context
// of a type outside the standard library costs a goroutine per call
// (context.AfterFunc).
type DeadlineBound interface {
	context.Context
	DeadlineBound()
}
