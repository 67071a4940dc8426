package redisstore

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

var _ store.MetaReader = (*Store)(nil)

// KeyMeta reports the TTL left (PTTL), the server's memory for the key
// (MEMORY USAGE, when the server allows the command) and the node that
// holds it, in one pipelined round trip. A missing key matches
// store.ErrNotFound.
func (s *Store) KeyMeta(ctx context.Context, key string) (store.KeyMeta, error) {
	cn, err := s.ready(ctx)
	if err != nil {
		return store.KeyMeta{}, err
	}
	addr := s.addrOf(key)
	res := cn.c.DoMulti(ctx,
		cn.c.B().Pttl().Key(key).Build(),
		cn.c.B().MemoryUsage().Key(key).Build())
	ms, err := res[0].AsInt64()
	if err != nil {
		return store.KeyMeta{}, s.wrapErr(addr, err)
	}
	m := store.KeyMeta{Node: addr}
	switch {
	case ms == -2:
		return m, store.ErrNotFound
	case ms == -1:
		m.NoTTL = true
	default:
		m.TTL = time.Duration(ms) * time.Millisecond
	}
	if n, err := res[1].AsInt64(); err == nil {
		m.ServerBytes = n
	} else if !rueidis.IsRedisNil(err) {
		m.ServerBytes = 0 // MEMORY is often disabled on managed services
	}
	return m, nil
}
