package kuraotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/kuraotel"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
)

// TestMetricsMirrorStats: the meter's counters equal the Cache's Stats,
// and each node's health state is a gauge.
func TestMetricsMirrorStats(t *testing.T) {
	rs := servertest.Redis(t, servers.RedisConfig{})
	hs, err := health.New(redisStore(t, rs.Addr), health.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.Close() })
	c, err := kura.New[string](hs, kura.Options{Name: "users"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		_, _ = c.Fetch(ctx, "u:1", time.Minute, func(context.Context, string) (string, error) { return "x", nil })
	}
	_, _ = c.Fetch(ctx, "u:gone", time.Minute, func(context.Context, string) (string, error) { return "", store.ErrNotFound })
	_, _ = c.Fetch(ctx, "u:gone", time.Minute, func(context.Context, string) (string, error) { return "", errors.New("not called") })

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(ctx) })
	reg, err := kuraotel.RegisterMetrics(mp.Meter(kuraotel.ScopeName), c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	got := map[string]int64{}
	var nodeUp int64 = -1
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if cache, _ := p.Attributes.Value("kura.cache"); cache.AsString() != "users" {
						t.Errorf("%s without kura.cache=users: %v", m.Name, p.Attributes)
					}
					key := m.Name
					if r, ok := p.Attributes.Value("kura.result"); ok {
						key += "/" + r.AsString()
					}
					got[key] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					st, _ := p.Attributes.Value("kura.state")
					if m.Name == "kura.node.state" && st.AsString() == "up" {
						nodeUp = p.Value
					}
				}
			}
		}
	}
	for k, want := range map[string]uint64{
		"kura.lookups/hit": s.Hits, "kura.lookups/miss": s.Misses, "kura.lookups/negative": s.NegativeHits,
		"kura.loader_calls": s.LoaderCalls, "kura.store_errors": s.StoreErrors,
	} {
		if got[k] != int64(want) {
			t.Errorf("%s = %d, Stats say %d", k, got[k], want)
		}
	}
	if s.Hits != 2 || s.NegativeHits != 1 || s.LoaderCalls != 2 {
		t.Errorf("stats %+v: want 2 hits, 1 negative hit, 2 loader calls", s)
	}
	if nodeUp != 1 {
		t.Errorf("kura.node.state{up} = %d, want 1", nodeUp)
	}
}
