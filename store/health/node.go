package health

import (
	"errors"
	"github.com/kuracache/kura/store"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNodeDown is the error of a request that was not sent because its
// node is Down (the circuit is open). It comes wrapped in a
// *store.NodeError naming the node. kura's Fetch and FetchMany absorb it
// and call the loader.
var ErrNodeDown = errors.New("kura: node down, request not sent (circuit open)")

// State is a node's health as the monitor sees it (store.NodeState, so
// a Cache reports it without importing this package).
type State = store.NodeState

// The states of a node; see the package documentation.
const (
	Up        = store.NodeUp
	Suspect   = store.NodeSuspect
	Down      = store.NodeDown
	Probing   = store.NodeProbing
	numStates = store.NodeStates
)

// States lists every State, in order, for exporters.
func States() []State { return []State{Up, Suspect, Down, Probing} }

// Transition is one change of a node's state.
type Transition struct {
	// Addr is the node.
	Addr string
	// From and To are the states before and after.
	From, To State
	// At is when it happened.
	At time.Time
	// Cause is the failure that caused it (nil for a recovery).
	Cause error
	// Probe reports whether a probe (rather than a request) caused it.
	Probe bool
}

// probeBuckets are the upper bounds of the probe latency histogram in
// NodeStats, from 50µs to 1s (probes slower than ProbeTimeout fail).
var probeBuckets = [14]time.Duration(store.ProbeBuckets())

// ProbeBuckets returns the upper bounds of NodeStats.ProbeLatency's
// buckets (a copy: callers may not change them).
func ProbeBuckets() []time.Duration { return store.ProbeBuckets() }

// NodeStats is a snapshot of one node's health (store.NodeHealth).
type NodeStats = store.NodeHealth

// node is the monitor's view of one server.
type node struct {
	addr string
	m    *monitor

	state atomic.Int32
	fails atomic.Int32 // failures in a row (Up: a hint to skip the lock when zero)

	mu      sync.Mutex
	okRun   int // successes in a row while Probing
	backoff time.Duration
	since   time.Time

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	inflight                               atomic.Int64
	probes, probeFails, reqFails, failFast atomic.Uint64
	lastProbe, latSum                      atomic.Int64
	lat                                    [len(probeBuckets) + 1]atomic.Uint64
	trans                                  [numStates]atomic.Uint64
}

func newNode(m *monitor, addr string) *node {
	return &node{addr: addr, m: m, since: time.Now(), backoff: m.opts.BackoffMin,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// open reports whether requests to the node must fail fast.
func (n *node) open() bool { return State(n.state.Load()) == Down }

// success records a successful request or probe.
func (n *node) success(probe bool) {
	if State(n.state.Load()) == Up && n.fails.Load() == 0 {
		return // the hot path: no lock
	}
	n.mu.Lock()
	var t *Transition
	switch State(n.state.Load()) {
	case Up:
		n.fails.Store(0)
	case Suspect:
		t = n.set(Up, nil, probe)
	case Probing:
		n.okRun++
		if n.okRun >= n.m.opts.RecoverAfter {
			t = n.set(Up, nil, probe)
		}
	case Down:
		if probe {
			n.okRun = 1
			to := Probing
			if n.okRun >= n.m.opts.RecoverAfter {
				to = Up
			}
			t = n.set(to, nil, probe)
		}
		// A request that was in flight when the node went down says
		// nothing new; only a probe reopens the circuit.
	}
	n.mu.Unlock()
	n.m.notify(t)
}

// failure records a failed request or probe.
func (n *node) failure(err error, probe bool) {
	if probe {
		n.probeFails.Add(1)
	} else {
		n.reqFails.Add(1)
	}
	n.mu.Lock()
	var t *Transition
	kick := false
	fails := n.fails.Add(1)
	switch State(n.state.Load()) {
	case Up:
		t = n.set(Suspect, err, probe)
		kick = !probe // after a probe, the probe loop goes on at once by itself
	case Suspect:
		if probe || int(fails) >= n.m.opts.FailureThreshold {
			t = n.set(Down, err, probe)
		}
	case Probing:
		n.backoff = min(n.backoff*2, n.m.opts.BackoffMax)
		t = n.set(Down, err, probe)
	case Down:
		if probe {
			n.backoff = min(n.backoff*2, n.m.opts.BackoffMax)
		}
	}
	n.mu.Unlock()
	if kick {
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
	n.m.notify(t)
}

// set moves the node to state to; n.mu is held.
func (n *node) set(to State, cause error, probe bool) *Transition {
	from := State(n.state.Load())
	if from == to {
		return nil
	}
	now := time.Now()
	switch to {
	case Up:
		n.fails.Store(0)
		n.backoff = n.m.opts.BackoffMin
	case Down:
		n.okRun = 0
	case Suspect:
	case Probing:
		n.fails.Store(0)
	}
	n.state.Store(int32(to))
	n.since = now
	n.trans[to].Add(1)
	return &Transition{Addr: n.addr, From: from, To: to, At: now, Cause: cause, Probe: probe}
}

// wait returns how long the probe loop waits before the next probe.
func (n *node) wait() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch State(n.state.Load()) {
	case Suspect:
		return 0
	case Down:
		return n.backoff
	}
	return n.m.opts.ProbeInterval
}

func (n *node) recordLatency(d time.Duration) {
	n.lastProbe.Store(int64(d))
	n.latSum.Add(int64(d))
	i := 0
	for i < len(probeBuckets) && d > probeBuckets[i] {
		i++
	}
	n.lat[i].Add(1)
}

func (n *node) stats() NodeStats {
	n.mu.Lock()
	st := NodeStats{Addr: n.addr, State: State(n.state.Load()), Since: n.since}
	n.mu.Unlock()
	st.Probes = n.probes.Load()
	st.ProbeFailures = n.probeFails.Load()
	st.LastProbe = time.Duration(n.lastProbe.Load())
	st.ProbeLatencySum = time.Duration(n.latSum.Load())
	st.ProbeLatency = make([]uint64, len(n.lat))
	for i := range n.lat {
		st.ProbeLatency[i] = n.lat[i].Load()
	}
	st.RequestFailures = n.reqFails.Load()
	st.FailFast = n.failFast.Load()
	st.InFlight = n.inflight.Load()
	for i := range n.trans {
		st.Transitions[i] = n.trans[i].Load()
	}
	return st
}
