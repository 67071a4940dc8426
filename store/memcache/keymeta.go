package memcache

import (
	"context"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache/meta"
)

var _ store.MetaReader = (*Store)(nil)

// KeyMeta reports the TTL left and the server that holds key, read with
// mg's t and s flags without bumping the item in the LRU. memcached keeps
// no per-key memory figure beyond the value size, so ServerBytes is the
// item's value size. A missing key matches store.ErrNotFound.
func (s *Store) KeyMeta(ctx context.Context, key string) (store.KeyMeta, error) {
	cl, err := s.client(key)
	if err != nil {
		return store.KeyMeta{}, err
	}
	var res meta.Response
	if err := cl.Do(ctx, &meta.Request{Cmd: meta.Get, Key: key, ReturnTTL: true, ReturnSize: true, NoBump: true}, &res); err != nil {
		return store.KeyMeta{}, err
	}
	m := store.KeyMeta{Node: cl.Addr()}
	switch res.Status {
	case meta.EN:
		return m, store.ErrNotFound
	case meta.HD, meta.VA:
	default:
		return m, res.Err()
	}
	if res.TTL < 0 {
		m.NoTTL = true
	} else {
		m.TTL = time.Duration(res.TTL) * time.Second
	}
	m.ServerBytes = res.Size
	return m, nil
}
