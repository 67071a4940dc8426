package health

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/store"
)

// Defaults for Options fields left at zero.
const (
	// DefaultProbeInterval is how often an Up node is probed. A probe is
	// one PING or mn on a connection of its own: ten a second per node
	// per process.
	DefaultProbeInterval = 100 * time.Millisecond
	// DefaultProbeTimeout is how long a probe may take before it counts
	// as failed. A PING on a dedicated connection answers in well under a
	// millisecond on an idle network, but on a saturated single-core
	// redis-server sharing a 2-core machine with its clients the probe's
	// p99 was 43 ms, and a 50 ms timeout gave 6 false downs a minute
	// (BENCHMARKS.md, "Node health"); 200 ms, the threshold the seed's
	// service used, leaves room for that. Detection does not wait for it
	// when there is traffic: FailureThreshold timed-out requests also
	// mark a node down.
	DefaultProbeTimeout = 200 * time.Millisecond
	// DefaultFailureThreshold is how many failed requests in a row make a
	// Suspect node Down without waiting for a probe.
	DefaultFailureThreshold = 5
	// DefaultRecoverAfter is how many successes in a row bring a Probing
	// node back Up.
	DefaultRecoverAfter = 2
	// DefaultBackoffMin and DefaultBackoffMax bound the interval between
	// probes of a Down node; it doubles after each failed probe.
	DefaultBackoffMin = 50 * time.Millisecond
	DefaultBackoffMax = time.Second
	// DefaultNodeRefresh is how often the list of nodes is read again
	// (store.NodeProber.Nodes), to follow a Cluster's masters.
	DefaultNodeRefresh = time.Second
	// DefaultGutterTTL caps the TTL of values written to Options.Gutter.
	DefaultGutterTTL = 10 * time.Second
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// ProbeInterval is the time between probes of an Up node. If zero,
	// DefaultProbeInterval (100 ms).
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe. If zero, DefaultProbeTimeout (200 ms).
	ProbeTimeout time.Duration
	// FailureThreshold is how many failed requests in a row (no success
	// between them) make a Suspect node Down. If zero,
	// DefaultFailureThreshold (5).
	FailureThreshold int
	// RecoverAfter is how many successes in a row (probes or requests)
	// make a Probing node Up. If zero, DefaultRecoverAfter (2).
	RecoverAfter int
	// BackoffMin is the first interval between probes of a Down node;
	// it doubles after each failed probe up to BackoffMax. If zero,
	// DefaultBackoffMin (50 ms) and DefaultBackoffMax (1 s).
	BackoffMin, BackoffMax time.Duration
	// NodeRefresh is how often the node list is read again. If zero,
	// DefaultNodeRefresh (1 s).
	NodeRefresh time.Duration
	// IsFailure decides whether a request's error counts against its
	// node. If nil, DefaultIsFailure.
	IsFailure func(error) bool
	// OnStateChange, if set, is called for every state transition, in the
	// goroutine that caused it (a probe or a request), after the state
	// changed. Keep it quick; it must not block.
	OnStateChange func(Transition)
	// Gutter, if set, serves the keys of Down nodes (read and write, TTL
	// capped at GutterTTL) instead of sending them to the loader. If nil,
	// a Down node's keys are skipped (see the package documentation for
	// why skip is the default). The Store does not close it.
	Gutter store.Store
	// GutterTTL caps the TTL of values written to Gutter (a value without
	// expiry gets GutterTTL too). If zero, DefaultGutterTTL (10 s).
	GutterTTL time.Duration
}

func (o Options) withDefaults() (Options, error) {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ProbeInterval", o.ProbeInterval}, {"ProbeTimeout", o.ProbeTimeout}, {"BackoffMin", o.BackoffMin},
		{"BackoffMax", o.BackoffMax}, {"NodeRefresh", o.NodeRefresh}, {"GutterTTL", o.GutterTTL}} {
		if f.d < 0 {
			return o, fmt.Errorf("health: Options.%s is negative (%v)", f.name, f.d)
		}
	}
	if o.FailureThreshold < 0 {
		return o, fmt.Errorf("health: Options.FailureThreshold is negative (%d)", o.FailureThreshold)
	}
	if o.RecoverAfter < 0 {
		return o, fmt.Errorf("health: Options.RecoverAfter is negative (%d)", o.RecoverAfter)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ProbeInterval, DefaultProbeInterval)
	def(&o.ProbeTimeout, DefaultProbeTimeout)
	def(&o.BackoffMin, DefaultBackoffMin)
	def(&o.BackoffMax, DefaultBackoffMax)
	def(&o.NodeRefresh, DefaultNodeRefresh)
	def(&o.GutterTTL, DefaultGutterTTL)
	if o.BackoffMax < o.BackoffMin {
		return o, fmt.Errorf("health: Options.BackoffMax (%v) is below Options.BackoffMin (%v)", o.BackoffMax, o.BackoffMin)
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.RecoverAfter == 0 {
		o.RecoverAfter = DefaultRecoverAfter
	}
	if o.IsFailure == nil {
		o.IsFailure = DefaultIsFailure
	}
	return o, nil
}

// DefaultIsFailure counts every error against its node except those that
// say nothing about the node's health: a miss, an invalid key, a value too
// large, a refused conditional write, a closed store, a context the caller
// canceled, and ErrNodeDown itself. A deadline that passed counts: a
// stalled node shows itself that way.
func DefaultIsFailure(err error) bool {
	if err == nil {
		return false
	}
	for _, benign := range []error{store.ErrNotFound, store.ErrInvalidKey, store.ErrValueTooLarge,
		store.ErrNotStored, store.ErrClosed, context.Canceled, ErrNodeDown} {
		if errors.Is(err, benign) {
			return false
		}
	}
	return true
}
