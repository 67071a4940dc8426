package cdc

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what a Run does. It is a prometheus.Collector (register
// it with a registry; every name starts with kura_cdc_) and gives the
// one-line Status. The zero value is not usable: use NewMetrics.
type Metrics struct {
	mu        sync.Mutex
	targets   []*targetMetrics
	confirmed string
	backlog   Backlog
	backlogAt time.Time
	sourceErr string
	// pending are the commit times of transactions received and not yet
	// applied, oldest first: the lag is the age of the first.
	pending []time.Time
	head    int // pending[head:] are pending
	last    Applied

	streamErrors  atomic.Int64
	mappingErrors atomic.Int64
	capped        atomic.Int64
	resets        atomic.Int64
	txns          atomic.Int64
	batches       atomic.Int64

	applyLatency  prometheus.Histogram
	commitLatency prometheus.Histogram
}

type targetMetrics struct {
	name          string
	invalidations atomic.Int64
	walked        atomic.Int64
	batches       atomic.Int64
	errors        atomic.Int64
	mu            sync.Mutex
	err           string
	since         time.Time
	busySince     time.Time // when the call in flight began (zero: none)
}

func (t *targetMetrics) busy(since time.Time) {
	t.mu.Lock()
	t.busySince = since
	t.mu.Unlock()
}

func (t *targetMetrics) setErr(err error, since time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.err, t.since = "", time.Time{}
		return
	}
	t.err, t.since = err.Error(), since
}

// NewMetrics returns empty metrics for one Run.
func NewMetrics() *Metrics {
	buckets := []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30}
	return &Metrics{
		applyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kura_cdc_apply_seconds", Help: "kura's own share of the lag: a transaction received from the source to its invalidations applied on every target.", Buckets: buckets}),
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kura_cdc_commit_to_applied_seconds", Help: "A transaction's commit in the database to its invalidations applied on every target (clocks of the database and this host).", Buckets: buckets}),
	}
}

func (m *Metrics) setTargets(ts []Target) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.targets = make([]*targetMetrics, len(ts))
	for i, t := range ts {
		m.targets[i] = &targetMetrics{name: t.Name}
	}
}

func (m *Metrics) target(i int) *targetMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.targets[i]
}

func (m *Metrics) received(commit time.Time) {
	m.mu.Lock()
	if m.head > 0 && m.head >= len(m.pending)/2 {
		m.pending = append(m.pending[:0], m.pending[m.head:]...)
		m.head = 0
	}
	m.pending = append(m.pending, commit)
	m.mu.Unlock()
}

func (m *Metrics) applied(a Applied) {
	m.txns.Add(int64(a.Txns))
	m.batches.Add(1)
	m.mu.Lock()
	m.head += min(a.Txns, len(m.pending)-m.head)
	m.last = a
	m.mu.Unlock()
	if a.Txns > 0 {
		m.applyLatency.Observe(a.At.Sub(a.First).Seconds())
		if !a.Commit.IsZero() {
			m.commitLatency.Observe(max(0, a.At.Sub(a.Commit).Seconds()))
		}
	}
}

func (m *Metrics) setConfirmed(p Position) {
	m.mu.Lock()
	m.confirmed = p.String()
	m.mu.Unlock()
}

func (m *Metrics) setBacklog(b Backlog) {
	m.mu.Lock()
	m.backlog, m.backlogAt = b, time.Now()
	m.sourceErr = ""
	m.mu.Unlock()
}

func (m *Metrics) setSourceErr(err error) {
	m.mu.Lock()
	m.sourceErr = err.Error()
	m.mu.Unlock()
}

// Lag is how long the oldest transaction received and not yet applied
// has been committed (0 when every received transaction is applied).
func (m *Metrics) Lag() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.head == len(m.pending) {
		return 0
	}
	return max(0, time.Since(m.pending[m.head]))
}

// Pending is how many received transactions wait to be applied.
func (m *Metrics) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending) - m.head
}

// Status is one line that says whether the cache is caught up: the
// confirmed position, the lag, the retained log and each target's state.
func (m *Metrics) Status() string {
	m.mu.Lock()
	pending, confirmed, bl, srcErr := len(m.pending)-m.head, m.confirmed, m.backlog, m.sourceErr
	ts := append([]*targetMetrics(nil), m.targets...)
	m.mu.Unlock()
	lag := m.Lag()
	var b strings.Builder
	failing := false
	var parts []string
	for _, t := range ts {
		t.mu.Lock()
		if t.err != "" {
			failing = true
			parts = append(parts, fmt.Sprintf("%s failing for %s (%s)", t.name, time.Since(t.since).Round(time.Second), t.err))
		} else if !t.busySince.IsZero() && time.Since(t.busySince) > 250*time.Millisecond {
			failing = true
			parts = append(parts, fmt.Sprintf("%s stalled for %s (no answer to an invalidation)", t.name, time.Since(t.busySince).Round(100*time.Millisecond)))
		} else {
			parts = append(parts, t.name+" ok")
		}
		t.mu.Unlock()
	}
	switch {
	case srcErr != "":
		b.WriteString("cdc: source down (" + srcErr + ")")
	case confirmed == "" && m.batches.Load() == 0:
		b.WriteString("cdc: starting")
	case bl.LagRecords < 0:
		fmt.Fprintf(&b, "cdc: lag unknown (%s), %d transactions pending", bl.Head, pending)
	case pending == 0 && !failing && bl.LagRecords == 0:
		b.WriteString("cdc: caught up")
	case pending == 0 && bl.LagRecords > 0:
		fmt.Fprintf(&b, "cdc: behind by %d records", bl.LagRecords)
	default:
		fmt.Fprintf(&b, "cdc: behind by %d transactions", pending)
	}
	if confirmed == "" {
		confirmed = "none yet"
	}
	fmt.Fprintf(&b, "; confirmed %s, lag %.3fs, retained %s; %s", confirmed, lag.Seconds(), bytesText(bl.RetainedBytes), strings.Join(parts, ", "))
	return b.String()
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

var (
	descLag       = prometheus.NewDesc("kura_cdc_lag_seconds", "Age of the oldest committed transaction received and not yet applied on every target (0 when caught up).", nil, nil)
	descRetained  = prometheus.NewDesc("kura_cdc_retained_bytes", "Log the upstream retains for this consumer (PostgreSQL: WAL held by the replication slot).", nil, nil)
	descLagRecs   = prometheus.NewDesc("kura_cdc_lag_records", "Records the upstream holds past the confirmed position (Kafka: the consumer group's lag; 0 for PostgreSQL).", nil, nil)
	descPending   = prometheus.NewDesc("kura_cdc_pending_transactions", "Transactions received and not yet applied on every target.", nil, nil)
	descConfirmed = prometheus.NewDesc("kura_cdc_confirmed_info", "The last position confirmed to the upstream, as a label.", []string{"position"}, nil)
	descTxns      = prometheus.NewDesc("kura_cdc_transactions_total", "Transactions applied on every target.", nil, nil)
	descBatches   = prometheus.NewDesc("kura_cdc_batches_total", "Batches applied (several transactions coalesce when the stream is behind).", nil, nil)
	descStreamErr = prometheus.NewDesc("kura_cdc_stream_errors_total", "Stream failures (each followed by a reconnect from the confirmed position).", nil, nil)
	descMapErr    = prometheus.NewDesc("kura_cdc_mapping_errors_total", "Rows whose columns did not make a key (their table was invalidated whole).", nil, nil)
	descCapped    = prometheus.NewDesc("kura_cdc_table_wide_total", "Transactions whose invalidation of a table became table-wide past max_txn_keys.", nil, nil)
	descResets    = prometheus.NewDesc("kura_cdc_resets_total", "Lost histories (new or recreated slot) answered by invalidating every mapped table.", nil, nil)
	descInv       = prometheus.NewDesc("kura_cdc_invalidations_total", "Keys invalidated, per target.", []string{"target"}, nil)
	descWalked    = prometheus.NewDesc("kura_cdc_walked_invalidations_total", "Keys invalidated by prefix walks (TRUNCATE, table-wide, reset), per target.", []string{"target"}, nil)
	descTErr      = prometheus.NewDesc("kura_cdc_target_errors_total", "Failed invalidation calls (each retried), per target.", []string{"target"}, nil)
	descTUp       = prometheus.NewDesc("kura_cdc_target_up", "1 when the target's last invalidation succeeded.", []string{"target"}, nil)
)

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLag, descRetained, descLagRecs, descPending, descConfirmed, descTxns, descBatches, descStreamErr, descMapErr, descCapped, descResets, descInv, descWalked, descTErr, descTUp} {
		ch <- d
	}
	m.applyLatency.Describe(ch)
	m.commitLatency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	confirmed, bl := m.confirmed, m.backlog
	ts := append([]*targetMetrics(nil), m.targets...)
	m.mu.Unlock()
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	c := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	g(descLag, m.Lag().Seconds())
	g(descRetained, float64(bl.RetainedBytes))
	g(descLagRecs, float64(bl.LagRecords))
	g(descPending, float64(m.Pending()))
	if confirmed != "" {
		g(descConfirmed, 1, confirmed)
	}
	c(descTxns, m.txns.Load())
	c(descBatches, m.batches.Load())
	c(descStreamErr, m.streamErrors.Load())
	c(descMapErr, m.mappingErrors.Load())
	c(descCapped, m.capped.Load())
	c(descResets, m.resets.Load())
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	for _, t := range ts {
		c(descInv, t.invalidations.Load(), t.name)
		c(descWalked, t.walked.Load(), t.name)
		c(descTErr, t.errors.Load(), t.name)
		t.mu.Lock()
		up := 1.0
		if t.err != "" {
			up = 0
		}
		t.mu.Unlock()
		g(descTUp, up, t.name)
	}
	m.applyLatency.Collect(ch)
	m.commitLatency.Collect(ch)
}

var _ prometheus.Collector = (*Metrics)(nil)

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
