package redisstore

import (
	"context"
	"errors"

	"github.com/kuracache/kura/store"
)

var _ store.PrefixReader = (*Store)(nil)

// GetPrefix returns at most the first max bytes of key's value (GETRANGE)
// and its full size (STRLEN) in one pipelined round trip, so a value of
// any size costs at most max bytes on the wire and in memory. A missing
// key matches store.ErrNotFound.
func (s *Store) GetPrefix(ctx context.Context, key string, max int) ([]byte, int64, error) {
	cn, err := s.ready(ctx)
	if err != nil {
		return nil, 0, err
	}
	if err := store.CheckKey(key); err != nil {
		return nil, 0, err
	}
	if max <= 0 {
		return nil, 0, errors.New("kura: redisstore: GetPrefix: max must be positive")
	}
	res := cn.c.DoMulti(ctx,
		cn.c.B().Exists().Key(key).Build(),
		cn.c.B().Strlen().Key(key).Build(),
		cn.c.B().Getrange().Key(key).Start(0).End(int64(max)-1).Build())
	addr := s.addrOf(key)
	n, err := res[0].AsInt64()
	if err != nil {
		return nil, 0, s.wrapErr(addr, err)
	}
	if n == 0 {
		return nil, 0, store.ErrNotFound
	}
	size, err := res[1].AsInt64()
	if err != nil {
		return nil, 0, s.wrapErr(addr, err)
	}
	b, err := res[2].AsBytes()
	if err != nil {
		return nil, 0, s.wrapErr(addr, err)
	}
	return nonNil(b), size, nil
}
