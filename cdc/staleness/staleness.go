// Package staleness measures how right a cache is: an Inspector samples
// keys, reads each one's entry from the cache's store (decoded by the
// Cache's own codec), loads it fresh with the caller's loader, and counts
// the entries that differ from the source of truth and how long they had
// sat in the cache (the envelope's write time). Run it beside `kura cdc`
// (or any invalidation scheme, or none) to know the stale share instead
// of hoping for it: Uber's CacheFront and Meta's Polaris do the same for
// their caches.
//
// # What counts as stale
//
// A sampled key is read from the store (never from the L1 tier) at R,
// then loaded at L. If the loaded value equals the cached one (or both say
// the row does not exist), the key is fresh. If they differ, the write
// that made them differ may have landed between R and L, its invalidation
// still on its way (the change stream's normal lag): that is a race, not
// staleness. So a mismatch is only a suspect: Grace after L the key is
// read again, and it is stale only if the store still holds exactly the
// bytes read at R. Any write committed before L had Grace to be
// invalidated; bytes that changed or vanished meanwhile count as raced.
// Set Grace above the invalidation lag you accept (kura cdc's
// kura_cdc_commit_to_applied_seconds): a stale count then means entries
// older than that lag, which is what a missed invalidation looks like.
//
// A key absent from the cache (or holding a lease placeholder) is "not
// cached", never stale; a loader error (or a panic in the loader or in
// Equal) is counted and the key skipped; bytes the codec cannot read, a
// value of another type, or a store failure count as unreadable. An
// Inspector of a Cache[any] (V an interface type, as `kura cdc` uses)
// reads entries of any Go type, except structs stored by position
// (EnvelopeCompactPositional), which it counts as unreadable: only their
// Go type names their fields. Loads are paced (MaxLoadsPerSecond) and a
// round checks at most SampleSize keys, so the inspector's cost on the
// database is bounded and known. Nothing it logs or reports holds a
// cached value: only keys, counts and ages.
package staleness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// Bounds and defaults of Options.
const (
	// DefaultSampleSize is Options.SampleSize when left at zero.
	DefaultSampleSize = 100
	// MaxSampleSize bounds Options.SampleSize.
	MaxSampleSize = 10_000
	// DefaultEvery is Options.Every when left at zero.
	DefaultEvery = 10 * time.Second
	// MinEvery bounds Options.Every from below.
	MinEvery = 100 * time.Millisecond
	// DefaultMaxLoadsPerSecond is Options.MaxLoadsPerSecond when left at zero.
	DefaultMaxLoadsPerSecond = 50
	// DefaultGrace is Options.Grace when left at zero.
	DefaultGrace = 2 * time.Second
	// maxReportedKeys bounds Report.StaleKeys.
	maxReportedKeys = 10
)

// Options configure an Inspector. Keys and Load are required; the zero
// value of every other field is the default its comment names.
type Options[V any] struct {
	// Keys returns up to n keys to check in a round: random ids from the
	// database turned into keys, recently read keys, or the keys the
	// store holds under a prefix (StoreKeys). Keys beyond n are ignored.
	Keys func(ctx context.Context, n int) ([]string, error)
	// Load is the caller's loader: what the application's Fetch calls on
	// a miss, so the fresh value is built exactly as the cached one was.
	// An error matching kura.ErrNotFound means the row does not exist.
	Load kura.Loader[V]
	// Equal compares a cached value with a fresh one. If nil,
	// reflect.DeepEqual.
	Equal func(cached, fresh V) bool
	// SampleSize is how many keys a round checks. If zero,
	// DefaultSampleSize; at most MaxSampleSize.
	SampleSize int
	// Every is the pause between rounds in Run. If zero, DefaultEvery;
	// at least MinEvery.
	Every time.Duration
	// MaxLoadsPerSecond paces the loader calls (the inspector's load on
	// the database). If zero, DefaultMaxLoadsPerSecond.
	MaxLoadsPerSecond float64
	// Grace is how long after its load a mismatched key is read again
	// before it counts as stale (see the package doc). If zero,
	// DefaultGrace.
	Grace time.Duration
	// Logger receives round failures (never a value). If nil,
	// slog.Default().
	Logger *slog.Logger
}

// Report is what one round found.
type Report struct {
	// At is when the round ended; Took how long it ran (pacing and grace
	// included).
	At   time.Time
	Took time.Duration
	// Checked is how many keys were read from the cache.
	Checked int
	// Fresh: the cached value equals the loaded one. Stale: it differs
	// and the cache still held it Grace after the load. NotCached: no
	// entry (or a lease placeholder). Raced: it differed, but the entry
	// changed or went away within Grace. LoadErrors: the loader failed.
	// Unreadable: the store failed or the bytes did not decode as V.
	Fresh, Stale, NotCached, Raced, LoadErrors, Unreadable int
	// StaleAges are how long each stale entry had been in the cache when
	// it was found stale (now − its write time; the compact envelope
	// keeps whole seconds). An entry without a write time has no age.
	StaleAges []time.Duration
	// StaleKeys are up to 10 of the stale keys (keys, never values).
	StaleKeys []string
}

// OldestStale is the largest of StaleAges (0 when none).
func (r Report) OldestStale() time.Duration {
	var m time.Duration
	for _, a := range r.StaleAges {
		m = max(m, a)
	}
	return m
}

// Stats are an Inspector's totals since New.
type Stats struct {
	// Rounds is how many rounds ran; RoundErrors how many could not
	// pick their keys (Options.Keys failed).
	Rounds, RoundErrors int64
	// The totals of Report's counts over every round.
	Checked, Fresh, Stale, NotCached, Raced, LoadErrors, Unreadable int64
	// OldestStale is the oldest stale entry seen in any round.
	OldestStale time.Duration
	// Last is the last round's report (zero before the first).
	Last Report
}

// Inspector checks a Cache's entries against fresh loads. It is safe for
// concurrent use; rounds are serialized. It implements
// prometheus.Collector (every name starts with kura_staleness_, labelled
// by the Cache's Options.Name as kuraprom labels it).
type Inspector[V any] struct {
	st     store.Store
	codec  *codec.Codec
	schema uint32
	// generic: V is an interface type (a Cache[any] reads entries of
	// any Go type, so the schema is not checked).
	generic bool
	name    string
	opts    Options[V]

	round sync.Mutex // one round at a time
	mu    sync.Mutex
	stats Stats
	descs descs
	ages  prometheus.Histogram
}

// New returns an Inspector of c's entries.
func New[V any](c *kura.Cache[V], opts Options[V]) (*Inspector[V], error) {
	switch {
	case c == nil:
		return nil, errors.New("staleness: New needs the Cache to inspect")
	case opts.Keys == nil:
		return nil, errors.New("staleness: Options.Keys is required: the keys a round checks")
	case opts.Load == nil:
		return nil, errors.New("staleness: Options.Load is required: the loader the application's Fetch uses")
	case opts.SampleSize < 0 || opts.SampleSize > MaxSampleSize:
		return nil, fmt.Errorf("staleness: Options.SampleSize must be in [0, %d], got %d", MaxSampleSize, opts.SampleSize)
	case opts.Every < 0 || (opts.Every > 0 && opts.Every < MinEvery):
		return nil, fmt.Errorf("staleness: Options.Every must be 0 or at least %v, got %v", MinEvery, opts.Every)
	case !(opts.MaxLoadsPerSecond >= 0) || opts.Grace < 0: // NaN too
		return nil, errors.New("staleness: Options.MaxLoadsPerSecond and Grace must not be negative")
	}
	if opts.SampleSize == 0 {
		opts.SampleSize = DefaultSampleSize
	}
	if opts.Every == 0 {
		opts.Every = DefaultEvery
	}
	if opts.MaxLoadsPerSecond == 0 {
		opts.MaxLoadsPerSecond = DefaultMaxLoadsPerSecond
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Equal == nil {
		opts.Equal = func(a, b V) bool { return reflect.DeepEqual(a, b) }
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cd := c.Codec()
	return &Inspector[V]{
		st: c.Store(), codec: cd, schema: cd.Fingerprint(reflect.TypeFor[V]()), name: c.Name(), opts: opts,
		generic: reflect.TypeFor[V]().Kind() == reflect.Interface, descs: newDescs(c.Name()),
		ages: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "kura_staleness_stale_age_seconds",
			Help:        "How long each entry found stale had been in the cache (now minus its write time).",
			ConstLabels: prometheus.Labels{"cache": c.Name()},
			Buckets:     []float64{1, 2, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600},
		}),
	}, nil
}

// suspect is a key whose cached value differed from its load.
type suspect struct {
	key      string
	raw      []byte
	written  time.Time
	loadedAt time.Time
}

// Check checks keys (at most Options.SampleSize of them) and returns what
// it found; the counts are added to Stats and the metrics. Only a ctx that
// ends makes it return an error: every other failure is counted.
func (in *Inspector[V]) Check(ctx context.Context, keys []string) (Report, error) {
	in.round.Lock()
	defer in.round.Unlock()
	start := time.Now()
	if len(keys) > in.opts.SampleSize {
		keys = keys[:in.opts.SampleSize]
	}
	var r Report
	var suspects []suspect
	pace := paceOf(in.opts.MaxLoadsPerSecond)
	var next time.Time
	for _, key := range keys {
		if err := sleepUntil(ctx, next); err != nil {
			return r, err
		}
		s, ok := in.checkOne(ctx, key, &r)
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if ok {
			next = time.Now().Add(pace) // a load was made: pace the next
		}
		if s != nil {
			suspects = append(suspects, *s)
		}
	}
	for _, s := range suspects {
		if err := sleepUntil(ctx, s.loadedAt.Add(in.opts.Grace)); err != nil {
			return r, err
		}
		raw, err := in.st.Get(ctx, s.key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			r.Unreadable++ // the store failed: neither stale nor raced is known
			continue
		}
		if err != nil || !bytes.Equal(raw, s.raw) {
			r.Raced++ // invalidated or refilled since: the change was in flight
			continue
		}
		r.Stale++
		if len(r.StaleKeys) < maxReportedKeys {
			r.StaleKeys = append(r.StaleKeys, s.key)
		}
		if !s.written.IsZero() {
			age := max(0, time.Since(s.written))
			r.StaleAges = append(r.StaleAges, age)
			in.ages.Observe(age.Seconds())
		}
		in.opts.Logger.Debug("staleness: stale entry", "cache", in.name, "key", s.key, "written", s.written)
	}
	r.At = time.Now()
	r.Took = r.At.Sub(start)
	in.add(r)
	return r, nil
}

// checkOne reads key from the cache and loads it; it counts the outcome
// in r, or returns a suspect. loaded reports a loader call.
func (in *Inspector[V]) checkOne(ctx context.Context, key string, r *Report) (s *suspect, loaded bool) {
	r.Checked++
	raw, err := in.st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		r.NotCached++
		return nil, false
	}
	if err != nil {
		r.Unreadable++
		return nil, false
	}
	var cached V
	h, err := in.codec.DecodeContext(ctx, raw, &cached)
	switch {
	case err != nil:
		r.Unreadable++
		return nil, false
	case h.Kind != codec.KindValue && h.Kind != codec.KindNegative:
		r.NotCached++ // a lease placeholder or a tombstone: no value served
		return nil, false
	case h.Kind == codec.KindValue && !in.generic && h.Fields.HasSchema && h.Fields.Schema != in.schema:
		r.Unreadable++ // a value of another type under this key
		return nil, false
	case h.Kind == codec.KindValue && in.generic && h.Serializer == codec.IDMsgPackArray:
		r.Unreadable++ // structs by position: only their Go type names the fields
		return nil, false
	}
	same, err := in.compare(ctx, key, cached, h.Kind == codec.KindNegative)
	if err != nil {
		r.LoadErrors++
		return nil, true
	}
	if same {
		r.Fresh++
		return nil, true
	}
	return &suspect{key: key, raw: raw, written: h.Fields.Written, loadedAt: time.Now()}, true
}

// compare loads key and compares it with what the cache holds (negative:
// cached as absent). A loader error other than not-found, or a panic in
// the loader or in Equal, is an error: the inspector never takes the
// program down with it.
func (in *Inspector[V]) compare(ctx context.Context, key string, cached V, negative bool) (same bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			same, err = false, fmt.Errorf("staleness: the loader or Equal panicked on %q", key)
		}
	}()
	fresh, err := in.opts.Load(ctx, key)
	absent := errors.Is(err, kura.ErrNotFound)
	if err != nil && !absent {
		return false, err
	}
	return negative == absent && (negative || in.opts.Equal(cached, fresh)), nil
}

// paceOf is the pause between two loads at rate loads a second. A rate
// so small that the pause overflows a Duration waits as long as one can:
// the conversion alone made it negative, so no pause at all.
func paceOf(rate float64) time.Duration {
	p := float64(time.Second) / rate
	if p >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(p)
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

func (in *Inspector[V]) add(r Report) {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := &in.stats
	s.Rounds++
	s.Checked += int64(r.Checked)
	s.Fresh += int64(r.Fresh)
	s.Stale += int64(r.Stale)
	s.NotCached += int64(r.NotCached)
	s.Raced += int64(r.Raced)
	s.LoadErrors += int64(r.LoadErrors)
	s.Unreadable += int64(r.Unreadable)
	s.OldestStale = max(s.OldestStale, r.OldestStale())
	s.Last = r
}

// Round picks up to Options.SampleSize keys with Options.Keys and checks
// them. A Keys that panics fails the round as an error would.
func (in *Inspector[V]) Round(ctx context.Context) (Report, error) {
	keys, err := in.pick(ctx)
	if err != nil {
		in.mu.Lock()
		in.stats.RoundErrors++
		in.mu.Unlock()
		return Report{}, fmt.Errorf("staleness: picking keys: %w", err)
	}
	return in.Check(ctx, keys)
}

// pick calls Options.Keys, turning its panic into an error: the inspector
// never takes the program down with it.
func (in *Inspector[V]) pick(ctx context.Context) (keys []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			keys, err = nil, errors.New("Options.Keys panicked")
		}
	}()
	return in.opts.Keys(ctx, in.opts.SampleSize)
}

// Run checks a round every Options.Every until ctx ends; it then returns
// nil. A round that cannot pick its keys is logged and counted.
func (in *Inspector[V]) Run(ctx context.Context) error {
	t := time.NewTicker(in.opts.Every)
	defer t.Stop()
	for {
		if _, err := in.Round(ctx); err != nil && ctx.Err() == nil {
			in.opts.Logger.Warn("staleness: round failed", "cache", in.name, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Stats returns the totals since New.
func (in *Inspector[V]) Stats() Stats {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := in.stats
	s.Last.StaleAges = append([]time.Duration(nil), s.Last.StaleAges...)
	s.Last.StaleKeys = append([]string(nil), s.Last.StaleKeys...)
	return s
}

// Status is one line for a status display (kura cdc prints it after its
// own): the last round's counts and the totals.
func (in *Inspector[V]) Status() string {
	s := in.Stats()
	if s.Rounds == 0 {
		return fmt.Sprintf("staleness %s: no round yet", in.name)
	}
	l := s.Last
	line := fmt.Sprintf("staleness %s: %d stale of %d cached in the last round (%d not cached, %d raced, %d load errors, %d unreadable)",
		in.name, l.Stale, l.Fresh+l.Stale+l.Raced, l.NotCached, l.Raced, l.LoadErrors, l.Unreadable)
	if l.Stale > 0 {
		line += fmt.Sprintf(", oldest %s", l.OldestStale().Round(time.Second))
	}
	return line + fmt.Sprintf("; %d stale of %d checked since start", s.Stale, s.Checked)
}

// descs are an Inspector's metric descriptions, labelled with its
// cache's name (so that the inspectors of several caches register on one
// registry, as kuraprom's collector labels them).
type descs struct {
	checks, rounds, roundErrs, lastStale, lastCompared *prometheus.Desc
}

func newDescs(cache string) descs {
	l := prometheus.Labels{"cache": cache}
	return descs{
		checks: prometheus.NewDesc("kura_staleness_checks_total",
			"Sampled keys, by result: fresh, stale, not_cached, raced (changed within the grace), load_error, unreadable.", []string{"result"}, l),
		rounds:       prometheus.NewDesc("kura_staleness_rounds_total", "Inspection rounds run.", nil, l),
		roundErrs:    prometheus.NewDesc("kura_staleness_round_errors_total", "Rounds that could not pick their keys.", nil, l),
		lastStale:    prometheus.NewDesc("kura_staleness_last_stale", "Stale entries found by the last round.", nil, l),
		lastCompared: prometheus.NewDesc("kura_staleness_last_compared", "Entries the last round compared with a load (fresh, stale or raced).", nil, l),
	}
}

// Describe implements prometheus.Collector.
func (in *Inspector[V]) Describe(ch chan<- *prometheus.Desc) {
	d := &in.descs
	for _, d := range []*prometheus.Desc{d.checks, d.rounds, d.roundErrs, d.lastStale, d.lastCompared} {
		ch <- d
	}
	in.ages.Describe(ch)
}

// Collect implements prometheus.Collector.
func (in *Inspector[V]) Collect(ch chan<- prometheus.Metric) {
	s := in.Stats()
	c := func(d *prometheus.Desc, t prometheus.ValueType, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, float64(v), l...)
	}
	for _, r := range []struct {
		name string
		n    int64
	}{{"fresh", s.Fresh}, {"stale", s.Stale}, {"not_cached", s.NotCached}, {"raced", s.Raced}, {"load_error", s.LoadErrors}, {"unreadable", s.Unreadable}} {
		c(in.descs.checks, prometheus.CounterValue, r.n, r.name)
	}
	c(in.descs.rounds, prometheus.CounterValue, s.Rounds)
	c(in.descs.roundErrs, prometheus.CounterValue, s.RoundErrors)
	c(in.descs.lastStale, prometheus.GaugeValue, int64(s.Last.Stale))
	c(in.descs.lastCompared, prometheus.GaugeValue, int64(s.Last.Fresh+s.Last.Stale+s.Last.Raced))
	in.ages.Collect(ch)
}

var _ prometheus.Collector = (*Inspector[int])(nil)
