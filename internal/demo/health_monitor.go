package demo

import (
	"context"

	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/redisstore"
)

// monitored is a store behind kura's per-node monitor.
type monitored struct {
	*health.Store
	inner *redisstore.Store
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
	hs, err := health.New(rs, health.Options{})
	if err != nil {
		rs.Close()
		return nil, err
	}
	return &monitored{Store: hs, inner: rs, downs: func() int64 {
		var n int64
		for _, s := range hs.Stats().Nodes {
			n += int64(s.Transitions[health.Down])
		}
		return n
	}}, nil
}

// Close stops the monitor and closes the Redis store under it.
func (m *monitored) Close() error {
	err := m.Store.Close()
	if cerr := m.inner.Close(); err == nil {
		err = cerr
	}
	return err
}
