package kuraprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kuracache/kura/store"
)

// ConnCollector is a prometheus.Collector over the connections of one
// network store (redisstore, memcache: store.ConnReporter): whether it
// has reached its servers yet (a process may start while its cache is
// down), its background connection attempts, and per server address the
// connections opened, failures, reconnections, name lookups and address
// changes, labelled by the store's name ("store") and the address as
// configured ("node"). Find the reporter through wrappers with
// store.Find[store.ConnReporter](s).
type ConnCollector struct {
	name string
	src  store.ConnReporter

	connected, attempts, attemptFails, resolved        *prometheus.Desc
	dials, dialFails, reconnects, lookups, lookupFails *prometheus.Desc
	changes                                            *prometheus.Desc
	primary, failovers, trackFlushes, notReplicated    *prometheus.Desc
	replicaReads, slotSplits, orphans                  *prometheus.Desc
}

var _ prometheus.Collector = (*ConnCollector)(nil)

// NewConnCollector returns a ConnCollector for src, named name (give each
// store a distinct name).
func NewConnCollector(name string, src store.ConnReporter) *ConnCollector {
	d := func(metric, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kura_store_"+metric, help, append([]string{"store"}, labels...), nil)
	}
	return &ConnCollector{
		name:         name,
		src:          src,
		connected:    d("connected", "1 once the store has reached its servers (Redis: a seed answered; memcached: every server answered once), 0 before."),
		attempts:     d("connect_attempts_total", "Background attempts to connect a store started while its servers were down (Redis)."),
		attemptFails: d("connect_failures_total", "Background connection attempts that failed."),
		resolved:     d("node_address_info", "1 for the address the node's last connection used (its name resolved to resolved).", "node", "resolved"),
		dials:        d("node_dials_total", "Connections opened to the node.", "node"),
		dialFails:    d("node_dial_failures_total", "Connection attempts to the node that failed (name not resolved, refused, timed out).", "node"),
		reconnects:   d("node_reconnects_total", "Connections opened to the node after a failed attempt (it came back).", "node"),
		lookups:      d("node_resolves_total", "Lookups of the node's host name (one per new connection).", "node"),
		lookupFails:  d("node_resolve_failures_total", "Lookups of the node's host name that failed.", "node"),
		changes:      d("node_address_changes_total", "Connections whose address differed from the previous one's: the name moved.", "node"),
		primary:      d("primary_info", "1 for the server a store with failover (Redis Sentinel) follows now.", "primary"),
		failovers:    d("failovers_total", "Times the primary a store with failover follows changed (a replica was promoted)."),
		trackFlushes: d("tracking_flushes_total", "Times server-assisted invalidation had to drop every key (a tracking connection broke: failover, restart; FLUSHALL); each flushes the L1 of every Cache on the store."),
		notReplicated: d("invalidations_not_replicated_total",
			"Invalidations the primary applied that not enough replicas acknowledged in time (redisstore InvalidateWait)."),
		replicaReads: d("replica_reads_total", "Commands sent to a replica (redisstore ReadFromReplicas)."),
		orphans: d("orphaned_leases_released_total",
			"Leases whose Fill or Release got no answer (a broken connection), released in the background once the server answered again."),
		slotSplits: d("slot_migration_splits_total",
			"Batches of several keys of one Redis Cluster slot that met TRYAGAIN while the slot was migrated, sent again one key per command."),
	}
}

// Describe implements prometheus.Collector.
func (c *ConnCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.attempts, c.attemptFails, c.resolved,
		c.dials, c.dialFails, c.reconnects, c.lookups, c.lookupFails, c.changes,
		c.primary, c.failovers, c.trackFlushes, c.notReplicated, c.replicaReads, c.slotSplits, c.orphans} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ConnCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{c.name}, labels...)...)
	}
	st := c.src.ConnStats()
	connected := 0.0
	if st.Connected {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, connected, c.name)
	counter(c.attempts, st.ConnectAttempts)
	counter(c.attemptFails, st.ConnectFailures)
	counter(c.failovers, st.Failovers)
	counter(c.trackFlushes, st.TrackingFlushes)
	counter(c.notReplicated, st.NotReplicated)
	counter(c.replicaReads, st.ReplicaReads)
	counter(c.slotSplits, st.SlotSplits)
	counter(c.orphans, st.OrphanedLeases)
	if st.Primary != "" {
		ch <- prometheus.MustNewConstMetric(c.primary, prometheus.GaugeValue, 1, c.name, st.Primary)
	}
	for _, n := range st.Nodes {
		if n.Resolved != "" {
			ch <- prometheus.MustNewConstMetric(c.resolved, prometheus.GaugeValue, 1, c.name, n.Addr, n.Resolved)
		}
		counter(c.dials, n.Dials, n.Addr)
		counter(c.dialFails, n.DialFailures, n.Addr)
		counter(c.reconnects, n.Reconnects, n.Addr)
		counter(c.lookups, n.Resolves, n.Addr)
		counter(c.lookupFails, n.ResolveFailures, n.Addr)
		counter(c.changes, n.AddrChanges, n.Addr)
	}
}
