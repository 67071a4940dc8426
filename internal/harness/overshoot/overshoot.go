// Package overshoot measures how far past their deadline a test's
// callers return, and how long the test process itself went without
// running meanwhile: on a busy machine (two cores shared by many
// processes) a whole process can wait tens or hundreds of milliseconds
// for a core, and every caller then returns late at once. A test that
// bounds its callers' time tells that apart from a caller that waited on
// something it should not have (see Run.Starved), and runs again.
package overshoot

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// tick is how often a Probe wakes.
const tick = time.Millisecond

// Probe wakes every millisecond and records the longest it woke late.
// Start one with Start; its zero value is not usable.
type Probe struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	max  time.Duration
}

// Start starts a Probe; call Stop when the measured span ends.
func Start() *Probe {
	p := &Probe{stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *Probe) run() {
	defer close(p.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			now := time.Now() // when this goroutine ran, not when the tick was due
			if late := now.Sub(last) - tick; late > 0 {
				p.mu.Lock()
				p.max = max(p.max, late)
				p.mu.Unlock()
			}
			last = now
		}
	}
}

// Stop ends the Probe and returns the longest it woke late: a lower
// bound on the longest the process (or its Go scheduler) did not run.
func (p *Probe) Stop() time.Duration {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

// Run is one run of callers: how far past its deadline each returned,
// and the longest the process went without running (a Probe's).
type Run struct {
	Over []time.Duration // sorted by NewRun
	Lag  time.Duration
}

// NewRun sorts over (one entry per caller, at least one) into a Run.
func NewRun(over []time.Duration, lag time.Duration) Run {
	slices.Sort(over)
	return Run{Over: over, Lag: lag}
}

// Quantile is the q-quantile (0 to 1) of the overshoots.
func (r Run) Quantile(q float64) time.Duration {
	return r.Over[min(len(r.Over)-1, int(q*float64(len(r.Over))))]
}

// Max is the latest caller's overshoot.
func (r Run) Max() time.Duration { return r.Over[len(r.Over)-1] }

// Late counts the callers more than slack past their deadline.
func (r Run) Late(slack time.Duration) int {
	n := 0
	for _, o := range r.Over {
		if o > slack {
			n++
		}
	}
	return n
}

// Starved reports whether the process went without running long enough
// to explain the latest caller's overshoot beyond slack: a run to repeat,
// not a failure.
func (r Run) Starved(slack time.Duration) bool { return r.Lag >= r.Max()-slack }

func (r Run) String() string {
	return fmt.Sprintf("overshoot p50 %v p99 %v max %v (%d callers); the process went without running for up to %v",
		r.Quantile(0.5), r.Quantile(0.99), r.Max(), len(r.Over), r.Lag)
}
