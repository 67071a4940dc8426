package health

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/store"
)

// monitor owns the nodes and their probe loops: one goroutine per node
// (so at most one probe per node is in flight) and one that follows the
// node list.
type monitor struct {
	opts   Options
	prober store.NodeProber // nil: no probes, requests alone drive the states

	nodes atomic.Pointer[map[string]*node] // replaced, never changed in place

	mu     sync.Mutex // guards changes to nodes and closed
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newMonitor(opts Options, prober store.NodeProber, initial []string) *monitor {
	m := &monitor{opts: opts, prober: prober}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	empty := map[string]*node{}
	m.nodes.Store(&empty)
	m.sync(initial)
	if prober != nil {
		m.wg.Add(1)
		go m.refreshLoop()
	}
	return m
}

// node returns the node at addr, or nil when it is not watched.
func (m *monitor) node(addr string) *node {
	if addr == "" {
		return nil
	}
	return (*m.nodes.Load())[addr]
}

// sync makes the watched nodes those in addrs: new ones start Up with a
// probe loop, gone ones stop.
func (m *monitor) sync(addrs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	old := *m.nodes.Load()
	same := len(old) == len(addrs)
	for _, a := range addrs {
		if _, ok := old[a]; !ok {
			same = false
			break
		}
	}
	if same {
		return
	}
	next := make(map[string]*node, len(addrs))
	for _, a := range addrs {
		if a == "" {
			continue
		}
		if n, ok := old[a]; ok {
			next[a] = n
			continue
		}
		n := newNode(m, a)
		next[a] = n
		if m.prober != nil {
			m.wg.Add(1)
			go m.probeLoop(n)
		} else {
			close(n.done)
		}
	}
	m.nodes.Store(&next)
	for a, n := range old {
		if _, ok := next[a]; !ok {
			close(n.stop)
		}
	}
}

func (m *monitor) refreshLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.opts.NodeRefresh)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			if addrs := m.prober.Nodes(); len(addrs) > 0 {
				m.sync(addrs)
			}
		}
	}
}

// probeLoop probes n: every ProbeInterval while Up or Probing, at once
// when it becomes Suspect, with back-off while Down.
func (m *monitor) probeLoop(n *node) {
	defer m.wg.Done()
	defer close(n.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-n.stop:
			return
		case <-n.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
		m.probe(n)
		timer.Reset(n.wait())
	}
}

func (m *monitor) probe(n *node) {
	ctx, cancel := context.WithTimeout(m.ctx, m.opts.ProbeTimeout)
	start := time.Now()
	err := m.prober.ProbeNode(ctx, n.addr)
	d := time.Since(start)
	cancel()
	if m.ctx.Err() != nil {
		return // closing: the answer says nothing about the node
	}
	n.probes.Add(1)
	if err != nil {
		n.failure(err, true)
		return
	}
	n.recordLatency(d)
	n.success(true)
}

func (m *monitor) notify(t *Transition) {
	if t != nil && m.opts.OnStateChange != nil {
		m.opts.OnStateChange(*t)
	}
}

func (m *monitor) stats() []NodeStats {
	nodes := *m.nodes.Load()
	out := make([]NodeStats, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.stats())
	}
	slices.SortFunc(out, func(a, b NodeStats) int {
		switch {
		case a.Addr < b.Addr:
			return -1
		case a.Addr > b.Addr:
			return 1
		}
		return 0
	})
	return out
}

// close stops every loop and waits for them.
func (m *monitor) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}
