package demo

import (
	"context"
	"fmt"
	"sync"

	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/redisstore"
)

// monitored is a store behind kura's per-node monitor.
type monitored struct {
	*health.Store
	inner *redisstore.Store

	mu     sync.Mutex
	causes []string
	// downs counts the times the monitor declared a node Down.
	downs func() int64
}

// newMonitored connects to the redis-server at addr and puts kura's
// per-node monitor (store/health, default options) in front of it.
func newMonitored(ctx context.Context, addr string) (*monitored, error) {
	rs, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{addr}})
	if err != nil {
		return nil, err
	}
	m := &monitored{inner: rs}
	hs, err := health.New(rs, health.Options{OnStateChange: func(t health.Transition) {
		if t.To != health.Down || t.Cause == nil {
			return
		}
		by := "requests"
		if t.Probe {
			by = "a probe"
		}
		m.mu.Lock()
		m.causes = append(m.causes, fmt.Sprintf("%s (%s)", t.Cause, by))
		m.mu.Unlock()
	}})
	if err != nil {
		rs.Close()
		return nil, err
	}
	m.Store = hs
	m.downs = func() int64 {
		var n int64
		for _, s := range hs.Stats().Nodes {
			n += int64(s.Transitions[health.Down])
		}
		return n
	}
	return m, nil
}

// downCauses returns why the monitor declared a node down, each distinct
// cause once, oldest first, with how many times it came.
func (m *monitored) downCauses() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	n := map[string]int{}
	for _, c := range m.causes {
		if n[c] == 0 {
			out = append(out, c)
		}
		n[c]++
	}
	for i, c := range out {
		if n[c] > 1 {
			out[i] = fmt.Sprintf("%s (%d times)", c, n[c])
		}
	}
	return out
}

// Close stops the monitor and closes the Redis store under it.
func (m *monitored) Close() error {
	err := m.Store.Close()
	if cerr := m.inner.Close(); err == nil {
		err = cerr
	}
	return err
}
