package kura

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// Defaults for Options fields left at their zero value.
const (
	DefaultNegativeTTL   = time.Minute
	DefaultMaxValueSize  = 4 << 20
	DefaultWarnValueSize = 100 << 10
	// DefaultStoreTimeout is Options.StoreTimeout when left at zero. A
	// healthy server answers a read on the same network in well under a
	// millisecond and moves a 1 MB value over a 1 Gbps link in about
	// 10 ms (BENCHMARKS.md, "Hardening"); 250 ms is far above both and
	// still turns a stalled server (25 s before) into a quarter-second
	// fall-back to the loader.
	DefaultStoreTimeout = 250 * time.Millisecond
	// DefaultLoadTimeout is Options.LoadTimeout when left at zero.
	DefaultLoadTimeout = 30 * time.Second
	// DefaultLeaseTTL is Options.LeaseTTL when left at zero.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultLeaseWait is Options.LeaseWait when left at zero.
	DefaultLeaseWait = 2 * time.Second
	// DefaultSchemaGrace is Options.SchemaGrace when left at zero: long
	// enough for a rolling deploy to replace the processes that still
	// write the old type, short enough that a key written by a process
	// that is gone is refilled within a minute.
	DefaultSchemaGrace = time.Minute
	// DefaultL1MaxTTL is L1Options.MaxTTL when left at zero.
	DefaultL1MaxTTL = 5 * time.Minute
)

// NoExpiry, passed as a TTL, stores a value that never expires, whatever
// Options.TTL says.
const NoExpiry time.Duration = -1

// Options configures a Cache. The zero value is ready to use.
type Options struct {
	// Name labels this cache in Stats and metrics. If blank, "default".
	Name string

	// Codec encodes values into kura's self-describing envelope
	// (docs/FORMAT.md). If nil, msgpack with compression above a size
	// threshold (codec.New(codec.Options{})).
	Codec *codec.Codec

	// Envelope chooses what the default Codec writes (docs/FORMAT.md).
	// The zero value, EnvelopeCompact, writes the compact envelope
	// (version 3: a 17-character string in 25 bytes instead of 41) with
	// struct fields named, so Node, Ruby, kura inspect and kura ui read
	// them on any store. EnvelopeCompactPositional stores structs as the
	// arrays of their field values too (smaller; readers without the Go
	// type need a published schema). EnvelopeV2 writes version 2, for a
	// fleet that still runs a reader from before version 3. Every reader
	// of this release reads all three. With Codec set, the Codec decides,
	// and New refuses an Envelope other than the zero value that the
	// Codec does not write.
	Envelope EnvelopeForm

	// TTL is the time to live of values written with a TTL of 0 (Set,
	// SetMany, Fetch, FetchMany and Keyed views), so it need not be
	// repeated on every call. If zero, a TTL of 0 means no expiry. Pass
	// NoExpiry to store one value without expiry when TTL is set.
	// Negative is invalid.
	TTL time.Duration

	// NegativeTTL is how long a "not found" from the loader is cached. If
	// zero, DefaultNegativeTTL (1 minute). Negative disables negative
	// caching: every Fetch of an absent key calls the loader.
	NegativeTTL time.Duration

	// TTLJitter spreads expiries to avoid a thundering herd when many keys
	// were filled at once: each TTL is shortened by a random fraction up
	// to TTLJitter (0.1 = up to 10% shorter). If zero, no jitter. Must be
	// in [0, 1).
	TTLJitter float64

	// MaxValueSize is the largest encoded value, in bytes, that Set
	// accepts; larger values fail with ErrValueTooLarge before anything
	// is sent. If zero, the store's own limit when it reports one
	// (store.MaxValueSizer, memcached's item_size_max), else
	// DefaultMaxValueSize (4 MiB). Negative removes the limit.
	MaxValueSize int

	// WarnValueSize is the encoded size above which a write is counted in
	// Stats.LargeValues and reported to OnLargeValue: values this big cost
	// network time on every read (a 1.3 MB value took 8 s to SET on a
	// small cloud instance: a network problem, not a Redis one). If zero, DefaultWarnValueSize (100 KiB).
	// Negative disables the warning.
	WarnValueSize int

	// OnLargeValue, if set, is called (synchronously) for each write above
	// WarnValueSize with the key and the encoded size. It never sees the
	// value: cached values may hold personal data.
	OnLargeValue func(key string, size int)

	// OnError, if set, is called for each cache error that Fetch and
	// FetchMany absorb (they fall back to the loader instead of failing):
	// store errors, undecodable values, values too large to cache. The key
	// may be empty for whole-batch failures. It never sees values.
	OnError func(op Op, key string, err error)

	// StoreTimeout bounds the store work of one Fetch or FetchMany: the
	// read, the second look and the write-back together, so a slow or
	// stalled cache server costs a caller at most this much before the
	// loader's value is served (a write-back that finds the budget spent
	// is skipped and counted in Stats.BudgetSkips; a write-back under
	// leases the call holds gets one StoreTimeout of its own instead, since
	// skipping it would leave the leases held and other readers waiting
	// for them to expire). A dictionary lookup
	// a read's decode needs (codec.Options.DictionarySource) is in the
	// budget too: one the budget ends is a miss that loads but does not
	// replace the stored value. The loader's own time is not counted. If zero, DefaultStoreTimeout (250 ms); negative
	// means no bound beyond the caller's context.
	//
	// On a hit the budget costs no timer, context, goroutine or allocation,
	// whatever ctx the caller passes: the read's store call shares a
	// deadline with the reads that start within StoreTimeout/8 of it (so
	// it gets between 7/8 of the budget and all of it), and a caller's ctx
	// that can be cancelled is watched by the Cache, which polls such
	// callers every 5 ms while any of their reads is in flight (and not
	// at all otherwise): a cancellation ends the store call within about
	// 5 ms on a store that watches ctx.Done
	// (memcached; Redis once its connection pipelines, which it does as
	// soon as two calls overlap). A caller's deadline before the budget's
	// bounds the call on its own, on a stalled Redis too whatever its
	// connection has run: no call waits on another caller's redial
	// (redisstore's stall guard; docs/benchmarks/deadline.md).
	StoreTimeout time.Duration

	// LoadTimeout bounds a load that Fetch shares between concurrent
	// callers. The shared load runs on a context that keeps the first
	// caller's values but not its cancellation (a caller that gives up
	// does not cancel the load for the others), so this is what ends a
	// loader that hangs. If zero, DefaultLoadTimeout (30 s); negative
	// means no bound.
	LoadTimeout time.Duration

	// L1 configures an in-process tier of decoded values in front of the
	// store (see L1Options). The zero value is off.
	L1 L1Options

	// Leases chooses how Fetch and FetchMany coordinate the loads of a
	// missing key between processes (docs/leases.md). The zero value,
	// LeasesAuto, uses leases whenever the store has the capability
	// (Redis, Redis Cluster, memcached): one loader call per missing key
	// across every process, and no value that a load read before an
	// Invalidate is cached after it. LeasesOff is plain cache-aside (one
	// loader call per key per process; a fill may land after an
	// invalidation and serve the old value until its TTL ends).
	// LeasesRequired makes New fail for a store without leases.
	Leases LeaseMode

	// LeaseTTL is how long a lease lives when its holder neither fills
	// nor gives it up (the process died mid-load): then another caller
	// takes over. Keep it above the slowest normal load: a lease that
	// expires mid-load lets a second caller load too (its fill is still
	// conditional, so nothing stale is cached). memcached rounds it up to
	// whole seconds. If zero, DefaultLeaseTTL (10 s).
	LeaseTTL time.Duration

	// LeaseWait bounds how long a Fetch waits for another caller's load
	// of the same key (woken by the server on Redis, polling with backoff
	// on memcached; docs/leases.md, "Waiting"). When it passes, the caller
	// loads for itself and does not write the value back (fail open,
	// counted in Stats.LeaseFailOpen). The caller's ctx bounds the wait
	// too. If zero, DefaultLeaseWait (2 s).
	LeaseWait time.Duration

	// StaleWhileRevalidate, on memcached, makes Invalidate mark values
	// stale for this long instead of removing them: readers keep getting
	// the old value (Stats.StaleServed) while exactly one of them reloads
	// it. Stores without the capability (Redis) remove the value as
	// usual. If zero, off: after Invalidate no reader gets the old value.
	// Needs leases.
	StaleWhileRevalidate time.Duration

	// EarlyRefresh, when positive, refreshes hot keys before they expire
	// so that they never all miss at once: on memcached, when a key has
	// less than EarlyRefresh left, exactly one reader (memcached's R
	// flag) reloads it in the background while every reader, that one
	// included, gets the cached value; on Redis a reader decides by
	// XFetch from the value's envelope. Fetch and FetchMany both refresh
	// early; FetchMany reloads all its due keys with one loader call
	// (docs/leases.md). If zero, off. Needs leases.
	EarlyRefresh time.Duration
	// SchemaGrace is how long a value written for another Go type (one
	// that does not decode into V: a field renamed or retyped in a
	// deploy; see docs/FORMAT.md, "Schema evolution") is protected from
	// this Cache's read-through write-backs. Such a value is a miss
	// (counted in Stats.SchemaMismatches) and the loader's value is
	// served, but it is not written back while the other value is younger
	// than SchemaGrace (counted in Stats.SchemaKept), so during a rolling
	// deploy old and new processes do not overwrite each other's entries
	// on every read. Values without a write time (written by older kura
	// versions) are not protected. Set and SetMany always write. If zero,
	// DefaultSchemaGrace (1 minute); negative means no protection.
	SchemaGrace time.Duration

	// Tracer, if set, gives every call a span and every step of a read
	// (lookup, lease wait, load, fill) a child span: package kuraotel
	// implements it over OpenTelemetry (docs/telemetry.md). If nil, no
	// spans: each step costs one nil check.
	Tracer observe.Tracer
}

// EnvelopeForm is the choice of Options.Envelope.
type EnvelopeForm uint8

const (
	// EnvelopeCompact writes version 3 with struct fields named by the
	// field-name rule of docs/FORMAT.md (the zero value).
	EnvelopeCompact EnvelopeForm = iota
	// EnvelopeCompactPositional writes version 3 with structs stored by
	// position (serializer msgpack-array, codec.Options.PositionalStructs).
	EnvelopeCompactPositional
	// EnvelopeV2 writes version 2, which readers from before version 3
	// read (docs/FORMAT.md, "Rolling upgrade: readers first").
	EnvelopeV2
)

// codecOptions are the codec options of form; ok is false for a value
// outside the constants.
func (form EnvelopeForm) codecOptions() (o codec.Options, ok bool) {
	switch form {
	case EnvelopeCompact:
		return codec.Options{Compact: true}, true
	case EnvelopeCompactPositional:
		return codec.Options{Compact: true, PositionalStructs: true}, true
	case EnvelopeV2:
		return codec.Options{}, true
	}
	return o, false
}

// LeaseMode is the choice of Options.Leases.
type LeaseMode uint8

const (
	// LeasesAuto uses leases when the store has them (the zero value).
	LeasesAuto LeaseMode = iota
	// LeasesOff is plain cache-aside with per-process singleflight.
	LeasesOff
	// LeasesRequired is LeasesAuto, but New fails when the store has no
	// lease capability.
	LeasesRequired
)

// withDefaults is o with every default filled in (the one place that
// fills them), checked against the store s.
func (o Options) withDefaults(s store.Store) (Options, error) {
	if o.Name == "" {
		o.Name = "default"
	}
	co, ok := o.Envelope.codecOptions()
	switch {
	case !ok:
		return o, fmt.Errorf("kura: Options.Envelope: %d is not one of EnvelopeCompact, EnvelopeCompactPositional, EnvelopeV2", o.Envelope)
	case o.Codec == nil:
		c, err := codec.New(co)
		if err != nil {
			return o, err
		}
		o.Codec = c
	case o.Envelope != EnvelopeCompact && (o.Codec.Compact() != co.Compact || o.Codec.PositionalStructs() != co.PositionalStructs):
		return o, fmt.Errorf("kura: Options.Envelope: the Codec writes another form (codec.Options Compact %v, PositionalStructs %v); set them on the Codec, or leave Codec nil", o.Codec.Compact(), o.Codec.PositionalStructs())
	}
	if o.NegativeTTL == 0 {
		o.NegativeTTL = DefaultNegativeTTL
	}
	if o.TTL < 0 {
		return o, fmt.Errorf("kura: Options.TTL must not be negative, got %v (use 0 for no expiry)", o.TTL)
	}
	if o.TTLJitter < 0 || o.TTLJitter >= 1 {
		return o, fmt.Errorf("kura: Options.TTLJitter must be in [0, 1), got %v", o.TTLJitter)
	}
	if o.MaxValueSize == 0 {
		if m, ok := store.Find[store.MaxValueSizer](s); ok && m.MaxValueSize() > 0 {
			o.MaxValueSize = m.MaxValueSize()
		} else {
			o.MaxValueSize = DefaultMaxValueSize
		}
	}
	if o.WarnValueSize == 0 {
		o.WarnValueSize = DefaultWarnValueSize
	}
	if o.StoreTimeout == 0 {
		o.StoreTimeout = DefaultStoreTimeout
	}
	if o.LoadTimeout == 0 {
		o.LoadTimeout = DefaultLoadTimeout
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseWait == 0 {
		o.LeaseWait = DefaultLeaseWait
	}
	if err := o.checkLeases(s); err != nil {
		return o, err
	}
	if o.SchemaGrace == 0 {
		o.SchemaGrace = DefaultSchemaGrace
	}
	if o.L1.MaxTTL == 0 {
		o.L1.MaxTTL = DefaultL1MaxTTL
	}
	return o, nil
}

// jitter shortens ttl by a random fraction up to o.TTLJitter.
func (o *Options) jitter(ttl time.Duration) time.Duration {
	if o.TTLJitter == 0 || ttl <= 0 {
		return ttl
	}
	d := time.Duration(rand.Float64() * o.TTLJitter * float64(ttl))
	if ttl-d < time.Millisecond {
		return ttl
	}
	return ttl - d
}

// resolveTTL turns a call's TTL into the one to store: 0 means the
// Cache's Options.TTL, NoExpiry means none (0 at the store).
func (o *Options) resolveTTL(ttl time.Duration) (time.Duration, error) {
	switch {
	case ttl == 0:
		return o.TTL, nil
	case ttl == NoExpiry:
		return 0, nil
	}
	return ttl, store.CheckTTL(ttl)
}

// L1Options configures the in-process L1 tier of a Cache: decoded values
// kept in the process, so a hit costs neither a round trip nor a decode.
// The zero value (MaxBytes 0) turns it off.
//
// An L1 must not serve a value another process has changed. Over a store
// whose server reports changes (store.Tracker: redisstore with
// Options.Tracking, on Redis or Redis Cluster) a key read into the L1 is
// dropped when the server reports its change; over any other store
// (memcached, Redis without tracking) the L1 is refused unless
// MaxStaleness is set, and then a value is served from it for at most
// MaxStaleness after it was read, however it changed meanwhile.
type L1Options struct {
	// MaxBytes bounds the memory of the L1, as estimated per entry: the
	// key, the size of V itself, twice the serialized (uncompressed) size
	// of the value for what it points to (Go strings, slices and maps take
	// more room than msgpack), and 96 bytes of bookkeeping. Entries beyond
	// the bound are evicted by W-TinyLFU, which admits a new key only if it
	// is used more often than the one it would evict, so a scan of one-off
	// keys does not push out hot ones. Zero turns the L1 off; negative is
	// invalid.
	MaxBytes int64

	// MaxTTL bounds how long a value stays in the L1 without being read
	// from the server again, however long it lives there. It bounds the
	// harm of a report the server never sent (a cluster slot moved to
	// another node). It is kept to a coarse clock: a value may go up to
	// 10 ms before or after MaxTTL (docs/l1.md). If zero,
	// DefaultL1MaxTTL (5 minutes).
	MaxTTL time.Duration

	// MaxStaleness allows an L1 over a store with no server-assisted
	// invalidation (memcached; Redis without redisstore's
	// Options.Tracking), and is the staleness bound it then has: a value
	// is served from the L1 for at most MaxStaleness after the store read
	// that filled it began, even if another process changed or deleted it in
	// the meantime (writes through this Cache drop the key at once). If
	// zero, such a store with MaxBytes set is an error. Ignored over a
	// tracking store.
	MaxStaleness time.Duration
}

// Cloner is implemented by value types whose L1 hits should return a copy.
// A Cache with an L1 returns the value it holds to every caller that hits
// it: for a struct the struct itself is copied, but the slices, maps and
// pointers in it are shared, so callers must treat them as read-only. If V
// implements Cloner, every L1 hit returns v.Clone() instead (BENCHMARKS.md,
// "L1": shared vs copied hits).
type Cloner[V any] interface {
	Clone() V
}

// cloneFunc is what an L1 hit passes its value through: Clone when V is
// a Cloner, nil (the value shared) otherwise. A nil pointer is passed
// through as it is: there is nothing to copy, and a Clone with a pointer
// receiver dereferences it (every read of a key cached as a nil value
// panicked, from the fill of the L1 on).
func cloneFunc[V any]() func(V) V {
	var zero V
	if _, ok := any(zero).(Cloner[V]); !ok {
		return nil
	}
	if reflect.TypeFor[V]().Kind() == reflect.Pointer {
		return func(v V) V {
			if any(v) == any(zero) {
				return v
			}
			return any(v).(Cloner[V]).Clone()
		}
	}
	return func(v V) V { return any(v).(Cloner[V]).Clone() }
}

// checkLeases checks the lease options against the store (withDefaults
// fills their defaults).
func (o *Options) checkLeases(s store.Store) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"LeaseTTL", o.LeaseTTL}, {"LeaseWait", o.LeaseWait}, {"StaleWhileRevalidate", o.StaleWhileRevalidate}, {"EarlyRefresh", o.EarlyRefresh}} {
		if f.d < 0 {
			return fmt.Errorf("kura: Options.%s must not be negative, got %v", f.name, f.d)
		}
	}
	_, has := store.FindLeaser(s)
	switch o.Leases {
	case LeasesAuto:
	case LeasesOff:
		if o.StaleWhileRevalidate > 0 || o.EarlyRefresh > 0 {
			return errors.New("kura: Options.StaleWhileRevalidate and Options.EarlyRefresh need leases, but Options.Leases is LeasesOff")
		}
	case LeasesRequired:
		if !has {
			return fmt.Errorf("kura: Options.Leases is LeasesRequired but the store (%T) has no lease capability (store.Leaser)", s)
		}
	default:
		return fmt.Errorf("kura: Options.Leases has an unknown value %d", o.Leases)
	}
	return nil
}
