package cdc_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kuracache/kura/cdc"
)

func TestMetricsAreOnePrefixAndTheStatusSaysStarting(t *testing.T) {
	m := cdc.NewMetrics()
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "kura_cdc_") {
			t.Errorf("metric %s is outside the kura_cdc_ prefix", f.GetName())
		}
		names[f.GetName()] = true
	}
	for _, want := range []string{"kura_cdc_lag_seconds", "kura_cdc_retained_bytes", "kura_cdc_apply_seconds", "kura_cdc_commit_to_applied_seconds", "kura_cdc_transactions_total"} {
		if !names[want] {
			t.Errorf("no %s", want)
		}
	}
	if s := m.Status(); !strings.HasPrefix(s, "cdc: starting") {
		t.Errorf("status before anything ran: %q", s)
	}
}
