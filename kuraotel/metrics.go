package kuraotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store"
)

// Source is anything with kura statistics: every *kura.Cache[V].
type Source interface {
	Stats() kura.Stats
}

// RegisterMetrics mirrors the Stats of caches, and the health of their
// store's nodes, as asynchronous instruments of meter, read at each
// collection. Names follow kuraprom's (kura_lookups_total becomes
// kura.lookups with unit {lookup}, which an OpenTelemetry Prometheus
// exporter writes back as kura_lookups_total); every series has a
// kura.cache attribute (Options.Name). docs/telemetry.md lists them.
//
// Latency is mirrored as two counters per operation, the sum
// (kura.operation.duration.sum, seconds) and the count: OpenTelemetry has
// no asynchronous histogram, and recording each call into a synchronous
// one would put a cost on the hit path. The returned Registration
// unregisters the callback.
func RegisterMetrics(meter metric.Meter, caches ...Source) (metric.Registration, error) {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	lookups := counter("kura.lookups", "{lookup}", "Keys looked up, by kura.result: hit, miss, or negative (cached as absent).")
	decodeErrs := counter("kura.decode_errors", "{value}", "Cached values that failed to decode (counted as misses).")
	storeErrs := counter("kura.store_errors", "{error}", "Failed store operations, per key in batches.")
	loads := counter("kura.loader_calls", "{call}", "Calls of Fetch/FetchMany loaders.")
	loadErrs := counter("kura.loader_errors", "{call}", "Loader calls that returned an error other than not-found.")
	panics := counter("kura.loader_panics", "{call}", "Loader calls that panicked (also counted as loader errors).")
	shared := counter("kura.shared_loads", "{call}", "Fetch calls that took another caller's load of the same key.")
	budget := counter("kura.budget_skips", "{call}", "Store calls a read-through skipped because it had spent its StoreTimeout.")
	leases := counter("kura.lease_events", "{event}", "Lease events, by kura.event: wait, fail_open, fill_lost, stale_served, early_refresh.")
	schemaMis := counter("kura.schema_mismatches", "{value}", "Cached values written for another Go type (counted as misses).")
	schemaKept := counter("kura.schema_kept", "{write}", "Write-backs skipped to keep a recent value of another type.")
	large := counter("kura.large_values", "{write}", "Writes above Options.WarnValueSize.")
	rejected := counter("kura.rejected_values", "{write}", "Writes refused for exceeding the maximum value size.")
	bytes := counter("kura.value_bytes", "By", "Value bytes moved, by kura.direction (read, write) and kura.stage (raw, stored).")
	durSum, err := meter.Float64ObservableCounter("kura.operation.duration.sum", metric.WithUnit("s"),
		metric.WithDescription("Total time of store operations and loader calls, by kura.op."))
	errs = append(errs, err)
	durCount := counter("kura.operation.duration.count", "{operation}", "Store operations and loader calls timed, by kura.op.")
	l1Lookups := counter("kura.l1.lookups", "{lookup}", "Lookups of the L1 tier, by kura.result: hit or miss.")
	l1Bytes := gauge("kura.l1.bytes", "By", "Estimated memory held by the L1 tier.")
	l1Entries := gauge("kura.l1.entries", "{entry}", "Entries held by the L1 tier.")
	l1Evictions := counter("kura.l1.evictions", "{entry}", "L1 entries evicted to stay within Options.L1.MaxBytes.")
	l1Inval := counter("kura.l1.invalidations", "{key}", "Keys the server reported changed, each dropped from the L1.")
	l1Flushes := counter("kura.l1.flushes", "{flush}", "Times the whole L1 was dropped.")
	nodeState := gauge("kura.node.state", "1", "1 for the state (kura.state: up, suspect, down, probing) each node (server.address) is in, 0 for the others.")
	nodeProbes := counter("kura.node.probes", "{probe}", "Health probes sent to each node, by kura.result: ok or failed.")
	nodeFails := counter("kura.node.request_failures", "{request}", "Requests whose error counted against the node.")
	nodeFast := counter("kura.node.fail_fast", "{key}", "Keys not sent because the node was down.")
	nodeInflight := gauge("kura.node.in_flight", "{key}", "Keys sent to the node whose answer has not come back.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	insts := []metric.Observable{lookups, decodeErrs, storeErrs, loads, loadErrs, panics, shared, budget, leases,
		schemaMis, schemaKept, large, rejected, bytes, durSum, durCount, l1Lookups, l1Bytes, l1Entries, l1Evictions,
		l1Inval, l1Flushes, nodeState, nodeProbes, nodeFails, nodeFast, nodeInflight}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, src := range caches {
			s := src.Stats()
			cache := attribute.String("kura.cache", s.Name)
			c := func(inst metric.Int64ObservableCounter, v uint64, more ...attribute.KeyValue) {
				o.ObserveInt64(inst, int64(v), metric.WithAttributes(append(more, cache)...))
			}
			g := func(inst metric.Int64ObservableGauge, v int64, more ...attribute.KeyValue) {
				o.ObserveInt64(inst, v, metric.WithAttributes(append(more, cache)...))
			}
			res := func(v string) attribute.KeyValue { return attribute.String("kura.result", v) }
			ev := func(v string) attribute.KeyValue { return attribute.String("kura.event", v) }
			c(lookups, s.Hits, res("hit"))
			c(lookups, s.Misses, res("miss"))
			c(lookups, s.NegativeHits, res("negative"))
			c(decodeErrs, s.DecodeErrors)
			c(storeErrs, s.StoreErrors)
			c(loads, s.LoaderCalls)
			c(loadErrs, s.LoaderErrors)
			c(panics, s.LoaderPanics)
			c(shared, s.Shared)
			c(budget, s.BudgetSkips)
			c(leases, s.LeaseWaits, ev("wait"))
			c(leases, s.LeaseFailOpen, ev("fail_open"))
			c(leases, s.LeaseFillsLost, ev("fill_lost"))
			c(leases, s.StaleServed, ev("stale_served"))
			c(leases, s.EarlyRefreshes, ev("early_refresh"))
			c(schemaMis, s.SchemaMismatches)
			c(schemaKept, s.SchemaKept)
			c(large, s.LargeValues)
			c(rejected, s.RejectedValues)
			dir := func(d, st string) []attribute.KeyValue {
				return []attribute.KeyValue{attribute.String("kura.direction", d), attribute.String("kura.stage", st)}
			}
			c(bytes, s.BytesRead, dir("read", "stored")...)
			c(bytes, s.BytesReadRaw, dir("read", "raw")...)
			c(bytes, s.BytesWritten, dir("write", "stored")...)
			c(bytes, s.BytesWrittenRaw, dir("write", "raw")...)
			for op, h := range s.Latency {
				a := attribute.String("kura.op", string(op))
				o.ObserveFloat64(durSum, h.Sum.Seconds(), metric.WithAttributes(a, cache))
				c(durCount, h.Count, a)
			}
			c(l1Lookups, s.L1.Hits, res("hit"))
			c(l1Lookups, s.L1.Misses, res("miss"))
			g(l1Bytes, int64(s.L1.Bytes))
			g(l1Entries, int64(s.L1.Entries))
			c(l1Evictions, s.L1.Evictions)
			c(l1Inval, s.L1.Invalidations)
			c(l1Flushes, s.L1.Flushes)
			for _, n := range s.Nodes {
				addr := attribute.String("server.address", n.Addr)
				for st := range n.Transitions {
					v := int64(0)
					if int(n.State) == st {
						v = 1
					}
					g(nodeState, v, addr, attribute.String("kura.state", stateName(st)))
				}
				c(nodeProbes, n.Probes-n.ProbeFailures, addr, res("ok"))
				c(nodeProbes, n.ProbeFailures, addr, res("failed"))
				c(nodeFails, n.RequestFailures, addr)
				c(nodeFast, n.FailFast, addr)
				g(nodeInflight, n.InFlight, addr)
			}
		}
		return nil
	}, insts...)
}

func stateName(st int) string { return store.NodeState(st).String() }
