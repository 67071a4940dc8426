package readthrough

import (
	"errors"
	"testing"
	"time"
)

// TestStrictIsolation: every pipeline's isolation keeps a caller that
// starts after an Invalidate from any load the Invalidate overtook.
func TestStrictIsolation(t *testing.T) {
	p, _ := newWarmBatch(t, 0)
	if _, ok := p.iso.(strict[[]byte]); !ok {
		t.Fatalf("a pipeline's isolation is %T, want strict", p.iso)
	}
	checkIsolation(t, p, true)
}

// TestInjectFaultBreaksIsolationOfNewPipelines: the fault suites' seam
// changes the pipelines New makes after it, not those made before.
func TestInjectFaultBreaksIsolationOfNewPipelines(t *testing.T) {
	before, _ := newWarmBatch(t, 0)
	InjectFault(JoinAfterInvalidate)
	t.Cleanup(func() { InjectFault(NoFault) })
	after, _ := newWarmBatch(t, 0)
	if _, ok := before.iso.(strict[[]byte]); !ok {
		t.Errorf("a pipeline made before the fault has isolation %T, want strict", before.iso)
	}
	checkIsolation(t, after, false)
	InjectFault(NoFault)
	again, _ := newWarmBatch(t, 0)
	checkIsolation(t, again, true)
}

func checkIsolation(t *testing.T, p *Pipeline[[]byte], strict bool) {
	t.Helper()
	_, led := p.group.Claim("k", false)
	_, hled := p.iso.claimHolder("k")
	if !led || !hled {
		t.Fatalf("first claims: led %v, %v", led, hled)
	}
	if _, again := p.iso.claimHolder("k"); again != strict {
		t.Errorf("a second lease winner leads a new holder flight: %v, want %v", again, strict)
	}
	p.iso.forget([]string{"k"})
	if got := p.group.Lookup("k") == nil; got != strict {
		t.Errorf("Invalidate hid the process flight: %v, want %v", got, strict)
	}
	now := time.Now()
	r := vouched[[]byte]{at: now}
	if p.iso.takes(r, now.Add(-time.Millisecond)) != true || p.iso.takes(r, now.Add(time.Millisecond)) != !strict {
		t.Errorf("takes: a caller that asked before the result's store operation takes it; after it: %v", !strict)
	}
	other := errors.New("load failed")
	if got := p.iso.voided(nil); errors.Is(got, errVoided) != strict {
		t.Errorf("voided(nil) = %v (strict %v)", got, strict)
	}
	if got := p.iso.voided(other); got != other {
		t.Errorf("voided keeps a load's own error: got %v", got)
	}
	if p.iso.late(2, 1) != strict || p.iso.late(1, 1) {
		t.Errorf("late: a waiter registered after the read was sent waits for the next one (%v)", strict)
	}
}
