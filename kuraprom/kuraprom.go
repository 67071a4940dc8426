// Package kuraprom exports kura Cache statistics as Prometheus metrics.
//
// The Collector reads [kura.Stats] snapshots at scrape time; nothing is
// registered globally. Register it on the registry you serve:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(kuraprom.NewCollector(articles, users))
package kuraprom

import (
	"fmt"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kuracache/kura"
)

// Source is anything with kura statistics: every *kura.Cache[V].
type Source interface {
	Stats() kura.Stats
}

// Collector is a prometheus.Collector over one or more caches, labelled by
// their Options.Name ("cache" label).
type Collector struct {
	sources []Source

	requests, decodeErrs, storeErrs, loads, loadErrs *prometheus.Desc
	shared, large, rejected, bytes, latency          *prometheus.Desc
	panics, budgetSkips                              *prometheus.Desc
	l1Lookups, l1Bytes, l1Entries, l1Evictions       *prometheus.Desc
	l1Invalidations, l1Flushes                       *prometheus.Desc
	leases, coordination                             *prometheus.Desc
	schemaMismatches, schemaKept                     *prometheus.Desc
	dictBytes                                        *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector over the given caches. Give each cache
// a distinct Options.Name, or the registry rejects the duplicate series.
func NewCollector(caches ...Source) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kura_"+name, help, append([]string{"cache"}, labels...), nil)
	}
	return &Collector{
		sources:    caches,
		requests:   d("lookups_total", "Keys looked up, by result: hit, miss, or negative (cached as absent).", "result"),
		decodeErrs: d("decode_errors_total", "Cached values that failed to decode (counted as misses)."),
		storeErrs:  d("store_errors_total", "Failed store operations, per key in batches."),
		loads:      d("loader_calls_total", "Calls of Fetch/FetchMany loaders."),
		loadErrs:   d("loader_errors_total", "Loader calls that returned an error other than not-found."),
		shared:     d("shared_loads_total", "Fetch calls that waited for another caller's load of the same key."),
		large:      d("large_values_total", "Writes above the warning size (Options.WarnValueSize)."),
		rejected:   d("rejected_values_total", "Writes refused for exceeding the maximum value size."),
		bytes:      d("value_bytes_total", "Value bytes moved, by direction (read, write) and stage (raw = serialized before compression, stored = what crossed the network).", "direction", "stage"),
		latency:    d("operation_duration_seconds", "Latency of store operations and loader calls. Hits served by the L1 tier are not timed (they are counted, exactly, in kura_l1_lookups_total).", "op"),
		panics:     d("loader_panics_total", "Loader calls that panicked (also counted as loader errors)."),
		budgetSkips: d("budget_skips_total",
			"Store calls a read-through skipped because it had spent its StoreTimeout on a slow or stalled server."),
		l1Lookups:   d("l1_lookups_total", "Lookups of the in-process L1 tier, by result: hit (value or negative entry) or miss (went on to the store).", "result"),
		l1Bytes:     d("l1_bytes", "Estimated memory held by the L1 tier (bounded by Options.L1.MaxBytes)."),
		l1Entries:   d("l1_entries", "Entries held by the L1 tier."),
		l1Evictions: d("l1_evictions_total", "L1 entries evicted to stay within Options.L1.MaxBytes."),
		l1Invalidations: d("l1_invalidations_total",
			"Keys the server reported changed (Redis client tracking), each dropped from the L1."),
		l1Flushes: d("l1_flushes_total",
			"Times the whole L1 was dropped: a tracking connection broke, or the server was flushed."),
		leases:       d("lease_events_total", "Lease events, by event: wait (waited for another caller's load), fail_open (gave up waiting after LeaseWait and loaded without writing back), fill_lost (a fill refused because an invalidation voided its lease), stale_served (a stale value served under StaleWhileRevalidate), early_refresh (a background reload before expiry).", "event"),
		coordination: d("coordination_info", "1 for the guarantee this cache gives about loads of a missing key: leases (across processes) or process (per process only).", "coordination"),
		schemaMismatches: d("schema_mismatches_total",
			"Cached values written for another Go type (a field renamed or retyped) that did not decode (counted as misses)."),
		schemaKept: d("schema_kept_total",
			"Write-backs skipped so as not to overwrite a recent value of another type (rolling deploy, Options.SchemaGrace)."),
		dictBytes: d("dictionary_written_bytes_total",
			"Value bytes written, by the compression dictionary id in their header (8 hex digits; 00000000 = no dictionary).", "dictionary"),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.decodeErrs, c.storeErrs, c.loads, c.loadErrs,
		c.shared, c.large, c.rejected, c.bytes, c.latency, c.panics, c.budgetSkips, c.leases, c.coordination,
		c.schemaMismatches, c.schemaKept, c.dictBytes,
		c.l1Lookups, c.l1Bytes, c.l1Entries, c.l1Evictions, c.l1Invalidations, c.l1Flushes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, src := range c.sources {
		s := src.Stats()
		n := s.Name
		counter(c.requests, s.Hits, n, "hit")
		counter(c.requests, s.Misses, n, "miss")
		counter(c.requests, s.NegativeHits, n, "negative")
		counter(c.decodeErrs, s.DecodeErrors, n)
		counter(c.storeErrs, s.StoreErrors, n)
		counter(c.loads, s.LoaderCalls, n)
		counter(c.loadErrs, s.LoaderErrors, n)
		counter(c.shared, s.Shared, n)
		counter(c.panics, s.LoaderPanics, n)
		counter(c.budgetSkips, s.BudgetSkips, n)
		counter(c.leases, s.LeaseWaits, n, "wait")
		counter(c.leases, s.LeaseFailOpen, n, "fail_open")
		counter(c.leases, s.LeaseFillsLost, n, "fill_lost")
		counter(c.leases, s.StaleServed, n, "stale_served")
		counter(c.leases, s.EarlyRefreshes, n, "early_refresh")
		ch <- prometheus.MustNewConstMetric(c.coordination, prometheus.GaugeValue, 1, n, s.Coordination)
		counter(c.schemaMismatches, s.SchemaMismatches, n)
		counter(c.schemaKept, s.SchemaKept, n)
		counter(c.large, s.LargeValues, n)
		counter(c.rejected, s.RejectedValues, n)
		counter(c.bytes, s.BytesRead, n, "read", "stored")
		counter(c.bytes, s.BytesReadRaw, n, "read", "raw")
		counter(c.bytes, s.BytesWritten, n, "write", "stored")
		counter(c.bytes, s.BytesWrittenRaw, n, "write", "raw")
		counter(c.l1Lookups, s.L1.Hits, n, "hit")
		counter(c.l1Lookups, s.L1.Misses, n, "miss")
		ch <- prometheus.MustNewConstMetric(c.l1Bytes, prometheus.GaugeValue, float64(s.L1.Bytes), n)
		ch <- prometheus.MustNewConstMetric(c.l1Entries, prometheus.GaugeValue, float64(s.L1.Entries), n)
		counter(c.l1Evictions, s.L1.Evictions, n)
		counter(c.l1Invalidations, s.L1.Invalidations, n)
		counter(c.l1Flushes, s.L1.Flushes, n)
		for id, b := range s.BytesWrittenByDictionary {
			counter(c.dictBytes, b, n, fmt.Sprintf("%08x", id))
		}
		for op, h := range s.Latency {
			buckets := make(map[float64]uint64, len(h.Buckets))
			for i, b := range kura.LatencyBuckets() {
				buckets[b.Seconds()] = h.Buckets[i]
			}
			ch <- prometheus.MustNewConstHistogram(c.latency, h.Count, h.Sum.Seconds(), buckets, n, string(op))
		}
	}
}

// IndexSource is anything with index-cache statistics: every
// *kura.Index[I, K, V].
type IndexSource interface {
	Name() string
	Stats() kura.IndexStats
}

// IndexCollector is a prometheus.Collector over index caches, labelled by
// the name of each index's id-list Cache ("index" label). The id-list
// Caches themselves are ordinary Caches: add them to a Collector for
// their lookups, bytes and latency.
type IndexCollector struct {
	sources                       []IndexSource
	lists, records, ghostsCounter *prometheus.Desc
}

var _ prometheus.Collector = (*IndexCollector)(nil)

// NewIndexCollector returns a Collector over the given indexes.
func NewIndexCollector(indexes ...IndexSource) *IndexCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kura_index_"+name, help, append([]string{"index"}, labels...), nil)
	}
	return &IndexCollector{
		sources:       indexes,
		lists:         d("list_lookups_total", "Id-list reads, by result: hit (from the cache) or miss (loaded from the database).", "result"),
		records:       d("records_loaded_total", "Records loaded from the database through the index (cache misses only)."),
		ghostsCounter: d("ghosts_total", "Ids named by a cached list whose record no longer exists (left out; the list is dropped)."),
	}
}

// Describe implements prometheus.Collector.
func (c *IndexCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lists
	ch <- c.records
	ch <- c.ghostsCounter
}

// Collect implements prometheus.Collector.
func (c *IndexCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, src := range c.sources {
		s, n := src.Stats(), src.Name()
		counter(c.lists, s.ListHits, n, "hit")
		counter(c.lists, s.ListMisses, n, "miss")
		counter(c.records, s.RecordsLoaded, n)
		counter(c.ghostsCounter, s.Ghosts, n)
	}
}
