package kuraotel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/kuracache/kura/store"
)

// StoreOptions configures WrapStore. The zero value works.
type StoreOptions struct {
	// TracerProvider makes the tracer. If nil, the global provider.
	TracerProvider trace.TracerProvider
	// System is db.system.name: "redis" or "memcached". If blank, it is
	// told from the innermost store's type (redisstore and redisring:
	// redis; memcache: memcached; others: "other").
	System string
	// RootSpans: as Options.RootSpans.
	RootSpans bool
}

// Store is a store.Store that records a span per call and, under it, a
// span per server batch that the wrapped store reports
// (store.RoundTrips). It has exactly the capabilities of the wrapped store
// and passes each through itself (the store.Wrapper rule): a capability
// found through it is traced; one the wrapped store lacks is reported as
// missing the way store/health does (CanLease, Tracking, LeaseWaker's
// watched) or, for those that cannot report it, is not found at all
// (store.Capable: store.Find of a store.MetaReader over memstore finds
// none).
type Store struct {
	store.Forward // Unwrap, and the pass-through of tracking and leases
	inner         store.Store
	tr            trace.Tracer
	system        attribute.KeyValue
	ops           map[string]string // store method -> the server's command, single-key calls
	root          bool
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.Wrapper        = (*Store)(nil)
	_ store.Batcher        = (*Store)(nil)
	_ store.Leaser         = (*Store)(nil)
	_ store.LeaseCapable   = (*Store)(nil)
	_ store.Tracker        = (*Store)(nil)
	_ store.NodeLocator    = (*Store)(nil)
	_ store.ServerLocator  = (*Store)(nil)
	_ store.NodeProber     = (*Store)(nil)
	_ store.HealthReporter = (*Store)(nil)
	_ store.ConnReporter   = (*Store)(nil)
	_ store.MaxValueSizer  = (*Store)(nil)
	_ store.Pinger         = (*Store)(nil)
	_ store.MetaReader     = (*Store)(nil)
	_ store.PrefixReader   = (*Store)(nil)
	_ store.KeyWalker      = (*Store)(nil)
	_ store.LeaseWaker     = (*Store)(nil)
	_ store.Capable        = (*Store)(nil)
)

// WrapStore returns s with spans. Put it outermost (around
// store/health's breaker): the breaker's fail-fast then shows on the
// span as error.type node_down.
func WrapStore(s store.Store, opts StoreOptions) *Store {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	sys := opts.System
	if sys == "" {
		sys = systemOf(s)
	}
	ops := map[string]string{"Get": "GET", "Set": "SET", "Delete": "DEL", "GetTracked": "GET"}
	switch sys {
	case "memcached":
		ops = map[string]string{"Get": "mg", "Set": "ms", "Delete": "md"}
	case "redis":
	default: // a store without a wire protocol kuraotel knows: its methods
		ops = map[string]string{"Get": "Get", "Set": "Set", "Delete": "Delete", "GetTracked": "GetTracked"}
	}
	return &Store{Forward: store.NewForward(s), inner: s, tr: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(SemconvVersion),
		trace.WithSchemaURL(semconv.SchemaURL)), system: semconv.DBSystemNameKey.String(sys), ops: ops, root: opts.RootSpans}
}

// systemOf tells db.system.name from the innermost store's type name (no
// import of the concrete stores: a store added later is "other").
func systemOf(s store.Store) string {
	for {
		w, ok := s.(store.Wrapper)
		if !ok {
			break
		}
		s = w.Unwrap()
	}
	switch t := fmt.Sprintf("%T", s); {
	case strings.HasPrefix(t, "*redisstore."), strings.HasPrefix(t, "*redisring."):
		return "redis"
	case strings.HasPrefix(t, "*memcache."):
		return "memcached"
	}
	return "other"
}

// call is one traced store call.
type call struct {
	s   *Store
	sp  trace.Span
	ctx context.Context // the call's span's
}

// start begins the span of a call of method on n keys (key: the first),
// or returns nil when ctx does not record. Batch calls ask the wrapped
// store for its server batches.
func (s *Store) start(ctx context.Context, method, key string, n int) (context.Context, *call) {
	if !s.root && !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{s.system}
	kind := trace.SpanKindInternal
	name := "kura.store." + method
	if op, ok := s.ops[method]; ok && n == 1 {
		// One key, one round trip: a client span per the conventions.
		kind, name = trace.SpanKindClient, op
		attrs = append(attrs, semconv.DBOperationName(op))
		attrs = append(attrs, serverAttrs(s.serverOf(key, method == "Get" || method == "GetTracked"))...)
	} else {
		attrs = append(attrs, KeyKeys.Int(n))
	}
	sctx, sp := s.tr.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	c := &call{s: s, sp: sp, ctx: sctx}
	if kind == trace.SpanKindInternal {
		// The closure captures c alone: capturing ctx would move it to
		// the heap on every call, recorded or not.
		return store.WithRoundTrips(sctx, c.roundTrip), c
	}
	return sctx, c
}

// roundTrip records one server batch as a client span under the call.
func (c *call) roundTrip(rt store.RoundTrip) {
	attrs := []attribute.KeyValue{c.s.system, semconv.DBOperationName(rt.Op), KeyCommands.Int(rt.Commands), KeyKeys.Int(rt.Keys)}
	attrs = append(attrs, serverAttrs(rt.Addr)...)
	if rt.Commands > 1 {
		attrs = append(attrs, semconv.DBOperationBatchSize(rt.Commands))
	}
	_, sp := c.s.tr.Start(c.ctx, rt.Op, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(rt.Start),
		trace.WithAttributes(attrs...))
	if rt.Failed > 0 {
		sp.SetAttributes(semconv.ErrorTypeKey.String("node_error"), KeyStoreErrors.Int(rt.Failed))
		sp.SetStatus(codes.Error, "node_error")
	}
	sp.End(trace.WithTimestamp(rt.End))
}

// serverOf is the server a single-key call on key goes to: the wrapped
// store's ServerOf (the answering primary or replica of a Sentinel store,
// a replica with replica reads), or else its NodeOf.
func (s *Store) serverOf(key string, read bool) string {
	if l, ok := store.Find[store.ServerLocator](s.inner); ok {
		return l.ServerOf(key, read)
	}
	if l, ok := store.Find[store.NodeLocator](s.inner); ok {
		return l.NodeOf(key)
	}
	return ""
}

func serverAttrs(addr string) []attribute.KeyValue {
	if addr == "" {
		return nil
	}
	host, port, ok := cutPort(addr)
	if !ok {
		return []attribute.KeyValue{semconv.ServerAddress(addr)}
	}
	return []attribute.KeyValue{semconv.ServerAddress(host), semconv.ServerPort(port)}
}

func cutPort(addr string) (string, int, bool) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, false
	}
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", 0, false
	}
	return strings.Trim(addr[:i], "[]"), p, true
}

// end ends the call's span with err (a *store.BatchError: the count of
// keys that failed, and the first node that failed).
func (c *call) end(err error) {
	if c == nil {
		return
	}
	if be, ok := err.(*store.BatchError); ok {
		// Per-key failures: count them; a fill refused because its lease
		// was lost is the lease protocol at work, not a failure.
		err = nil
		failed, refused := 0, 0
		for _, ke := range be.Errors {
			if errors.Is(ke.Err, store.ErrNotStored) {
				refused++
				continue
			}
			if failed == 0 {
				err = ke.Err
			}
			failed++
		}
		if refused > 0 {
			c.sp.SetAttributes(KeyFillRefused.Int(refused), KeyRefusedReason.String("lease_lost"))
		}
		if failed > 0 {
			c.sp.SetAttributes(KeyStoreErrors.Int(failed))
		}
	}
	if ne := store.AsNodeError(err); ne != nil {
		c.sp.SetAttributes(serverAttrs(ne.Addr)...)
	}
	endSpan(c.sp, err)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, c := s.start(ctx, "Get", key, 1)
	b, err := s.inner.Get(ctx, key)
	c.end(err)
	return b, err
}

// Set implements store.Store.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	ctx, c := s.start(ctx, "Set", key, 1)
	err := s.inner.Set(ctx, key, value, ttl)
	c.end(err)
	return err
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	ctx, c := s.start(ctx, "Delete", key, 1)
	err := s.inner.Delete(ctx, key)
	c.end(err)
	return err
}

// Close closes the wrapped store.
func (s *Store) Close() error { return s.inner.Close() }

// GetMany implements store.BatchGetter (batched when the wrapped store
// is; see store.GetMany).
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	ctx, c := s.start(ctx, "GetMany", first(keys), len(keys))
	v, err := store.GetMany(ctx, s.inner, keys)
	c.end(err)
	return v, err
}

// SetMany implements store.BatchSetter.
func (s *Store) SetMany(ctx context.Context, items []store.Item) error {
	k := ""
	if len(items) > 0 {
		k = items[0].Key
	}
	ctx, c := s.start(ctx, "SetMany", k, len(items))
	err := store.SetMany(ctx, s.inner, items)
	c.end(err)
	return err
}

// DeleteMany implements store.BatchDeleter.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	ctx, c := s.start(ctx, "DeleteMany", first(keys), len(keys))
	err := store.DeleteMany(ctx, s.inner, keys)
	c.end(err)
	return err
}

func first(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
