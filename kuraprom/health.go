package kuraprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kuracache/kura/store"
)

// HealthSource is anything with node-health statistics: every
// *health.Store (whose Stats is a store.HealthStats).
type HealthSource interface {
	Stats() store.HealthStats
}

// HealthCollector is a prometheus.Collector over the node monitor and
// circuit breaker of one store (package store/health), labelled by the
// store's name ("store" label) and each node's address ("node").
type HealthCollector struct {
	name string
	src  HealthSource

	state, probes, probeFails, probeLat, reqFails, failFast, trans, gutter *prometheus.Desc
}

var _ prometheus.Collector = (*HealthCollector)(nil)

// NewHealthCollector returns a HealthCollector for src, named name (give
// each store a distinct name).
func NewHealthCollector(name string, src HealthSource) *HealthCollector {
	d := func(metric, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kura_node_"+metric, help, append([]string{"store"}, labels...), nil)
	}
	return &HealthCollector{
		name:       name,
		src:        src,
		state:      d("state", "1 for the node's current state (up, suspect, down, probing), 0 for the others.", "node", "state"),
		probes:     d("probes_total", "Health probes sent to the node (PING or mn on a dedicated connection).", "node"),
		probeFails: d("probe_failures_total", "Health probes that failed or timed out.", "node"),
		probeLat:   d("probe_duration_seconds", "Latency of successful health probes.", "node"),
		reqFails:   d("request_failures_total", "Requests whose error counted against the node.", "node"),
		failFast:   d("fail_fast_total", "Keys not sent to the node because it was down (circuit open).", "node"),
		trans:      d("transitions_total", "Breaker state transitions, by the state entered.", "node", "to"),
		gutter:     prometheus.NewDesc("kura_gutter_reads_total", "Reads of down nodes' keys served by the gutter pool, by result.", []string{"store", "result"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *HealthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.probes, c.probeFails, c.probeLat, c.reqFails, c.failFast, c.trans, c.gutter} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *HealthCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{c.name}, labels...)...)
	}
	st := c.src.Stats()
	bounds := store.ProbeBuckets()
	for _, n := range st.Nodes {
		for s := range store.NodeStates {
			v := 0.0
			if n.State == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, c.name, n.Addr, s.String())
			counter(c.trans, n.Transitions[s], n.Addr, s.String())
		}
		counter(c.probes, n.Probes, n.Addr)
		counter(c.probeFails, n.ProbeFailures, n.Addr)
		counter(c.reqFails, n.RequestFailures, n.Addr)
		counter(c.failFast, n.FailFast, n.Addr)
		buckets := make(map[float64]uint64, len(bounds))
		var cum, count uint64
		for i, b := range bounds {
			cum += n.ProbeLatency[i]
			buckets[b.Seconds()] = cum
		}
		for _, v := range n.ProbeLatency {
			count += v
		}
		ch <- prometheus.MustNewConstHistogram(c.probeLat, count, n.ProbeLatencySum.Seconds(), buckets, c.name, n.Addr)
	}
	counter(c.gutter, st.GutterHits, "hit")
	counter(c.gutter, st.GutterMisses, "miss")
	counter(c.gutter, st.GutterErrors, "error")
}
