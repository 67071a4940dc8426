package cdc

import (
	"strings"
	"testing"
)

// TestStatusCaughtUpNeedsNoRecordLag: a source that counts its upstream's records (Kafka's
// consumer lag) is caught up only at 0, however empty delivery is; a count it could not read
// is no catching up either.
func TestStatusCaughtUpNeedsNoRecordLag(t *testing.T) {
	m := NewMetrics()
	m.setTargets([]Target{{Name: "redis"}})
	m.applied(Applied{Txns: 1})
	m.setBacklog(Backlog{LagRecords: 7})
	if s := m.Status(); !strings.HasPrefix(s, "cdc: behind by 7 records") {
		t.Errorf("status with 7 records of lag: %q", s)
	}
	m.setBacklog(Backlog{LagRecords: -1, Head: "the broker did not answer"})
	if s := m.Status(); !strings.HasPrefix(s, "cdc: lag unknown (the broker did not answer)") {
		t.Errorf("status with the lag unknown: %q", s)
	}
	m.setBacklog(Backlog{})
	if s := m.Status(); !strings.HasPrefix(s, "cdc: caught up") {
		t.Errorf("status with no lag: %q", s)
	}
}
