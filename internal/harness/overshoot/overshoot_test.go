package overshoot_test

import (
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/overshoot"
)

func TestRun(t *testing.T) {
	over := make([]time.Duration, 100)
	for i := range over {
		over[i] = time.Duration(99-i) * time.Millisecond
	}
	r := overshoot.NewRun(over, 80*time.Millisecond)
	if r.Quantile(0.5) != 50*time.Millisecond || r.Quantile(0.99) != 99*time.Millisecond || r.Max() != 99*time.Millisecond {
		t.Fatalf("p50 %v p99 %v max %v", r.Quantile(0.5), r.Quantile(0.99), r.Max())
	}
	if n := r.Late(25 * time.Millisecond); n != 74 {
		t.Fatalf("late = %d, want 74", n)
	}
	if !r.Starved(25 * time.Millisecond) {
		t.Fatal("a lag of 80ms explains a 99ms overshoot with 25ms slack")
	}
	if r.Starved(10 * time.Millisecond) {
		t.Fatal("a lag of 80ms does not explain a 99ms overshoot with 10ms slack")
	}
}

func TestProbeStops(t *testing.T) {
	p := overshoot.Start()
	time.Sleep(20 * time.Millisecond)
	if lag := p.Stop(); lag < 0 || lag > time.Second {
		t.Fatalf("lag %v on an idle process", lag)
	}
}
