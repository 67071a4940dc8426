package memcache

import (
	"context"
	"errors"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache/meta"
)

var _ store.PrefixReader = (*Store)(nil)

// GetPrefix returns key's value if it is at most max bytes, and its size.
// memcached cannot send part of a value, so the size is asked first (mg
// with the s flag, no value); a larger value is not read (nil, size). A
// value that grows between the two requests is read whole but returned
// cut to max bytes: what the server's item size limit allows.
func (s *Store) GetPrefix(ctx context.Context, key string, max int) ([]byte, int64, error) {
	if max <= 0 {
		return nil, 0, errors.New("kura: memcache: GetPrefix: max must be positive")
	}
	cl, err := s.client(key)
	if err != nil {
		return nil, 0, err
	}
	var res meta.Response
	if err := cl.Do(ctx, &meta.Request{Cmd: meta.Get, Key: key, ReturnSize: true, NoBump: true}, &res); err != nil {
		return nil, 0, store.NodeErr(cl.Addr(), err)
	}
	switch res.Status {
	case meta.EN:
		return nil, 0, store.ErrNotFound
	case meta.HD, meta.VA:
	default:
		return nil, 0, store.NodeErr(cl.Addr(), res.Err())
	}
	if res.Size > int64(max) {
		return nil, res.Size, nil
	}
	v, err := s.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	if len(v) > max {
		return v[:max:max], int64(len(v)), nil
	}
	return v, int64(len(v)), nil
}
