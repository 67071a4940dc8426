package health

import (
	"context"
	"errors"

	"github.com/kuracache/kura/store"
)

// split is a batch divided between the nodes that take requests (live)
// and those whose circuit is open (down), by position in the batch.
type split struct {
	nodes      []*node
	live, down []int
}

func (s *Store) split(n int, key func(int) string) split {
	sp := split{nodes: make([]*node, n), live: make([]int, 0, n)}
	for i := 0; i < n; i++ {
		nd, open := s.route(key(i))
		sp.nodes[i] = nd
		if open {
			sp.down = append(sp.down, i)
		} else {
			sp.live = append(sp.live, i)
		}
	}
	return sp
}

// observeBatch feeds the outcome of the sub-batch idx (positions in the
// caller's batch; keys are its keys) to the monitor: each node once per
// batch, failed if any of its keys failed in a way that counts.
func (s *Store) observeBatch(sp split, idx []int, keys []string, err error) {
	var failed map[*node]error
	var be *store.BatchError
	switch {
	case err == nil:
	case errors.As(err, &be):
		pos := make(map[string]int, len(keys))
		for j, k := range keys {
			pos[k] = idx[j]
		}
		for _, ke := range be.Errors {
			if !s.opts.IsFailure(ke.Err) {
				continue
			}
			n := s.m.node(ke.Addr)
			if n == nil {
				if i, ok := pos[ke.Key]; ok {
					n = sp.nodes[i]
				}
			}
			if n == nil {
				continue
			}
			if failed == nil {
				failed = map[*node]error{}
			}
			if _, ok := failed[n]; !ok {
				failed[n] = ke.Err
			}
		}
	case s.opts.IsFailure(err):
		// The whole batch failed: every node in it, unless the error
		// names one.
		failed = map[*node]error{}
		if ne := store.AsNodeError(err); ne != nil && s.m.node(ne.Addr) != nil {
			failed[s.m.node(ne.Addr)] = err
		} else {
			for _, i := range idx {
				if n := sp.nodes[i]; n != nil {
					failed[n] = err
				}
			}
		}
	}
	var seen []*node // nodes of a batch are few: a slice beats a map
	for _, i := range idx {
		n := sp.nodes[i]
		if n == nil {
			continue
		}
		dup := false
		for _, o := range seen {
			if o == n {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		seen = append(seen, n)
		if ferr, ok := failed[n]; ok {
			n.failure(ferr, false)
		} else {
			n.success(false)
		}
	}
}

// keyErrors turns the error of a sub-batch into per-key errors.
func keyErrors(dst []store.KeyError, err error, keys []string) []store.KeyError {
	if err == nil {
		return dst
	}
	var be *store.BatchError
	if errors.As(err, &be) {
		return append(dst, be.Errors...)
	}
	for _, k := range keys {
		ke := store.KeyError{Key: k, Err: err}
		if ne := store.AsNodeError(err); ne != nil {
			ke.Addr = ne.Addr
		}
		dst = append(dst, ke)
	}
	return dst
}

// releaseAll ends what split counted in flight.
func (sp split) releaseAll() {
	for _, i := range sp.live {
		release(sp.nodes[i])
	}
}

func pick[T any](all []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = all[i]
	}
	return out
}

func batchError(op string, errs []store.KeyError) error {
	if len(errs) == 0 {
		return nil
	}
	return &store.BatchError{Op: op, Errors: errs}
}

// GetMany reads the keys of healthy nodes in one batch (one round trip
// per node, as the wrapped store does it) and fails the keys of Down nodes
// at once, each with a KeyError matching ErrNodeDown, so the caller loads
// only those (with a gutter, they are read from the gutter).
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	sp := s.split(len(keys), func(i int) string { return keys[i] })
	if len(sp.down) == 0 {
		vals, err := store.GetMany(ctx, s.inner, keys)
		sp.releaseAll()
		s.observeBatch(sp, sp.live, keys, err)
		return vals, err
	}
	vals := make([][]byte, len(keys))
	var errs []store.KeyError
	if len(sp.live) > 0 {
		sub := pick(keys, sp.live)
		v, err := store.GetMany(ctx, s.inner, sub)
		sp.releaseAll()
		s.observeBatch(sp, sp.live, sub, err)
		var be *store.BatchError
		whole := err != nil && !errors.As(err, &be) // no value is valid
		if len(v) == len(sub) && !whole {
			for j, i := range sp.live {
				vals[i] = v[j]
			}
		}
		errs = keyErrors(errs, err, sub)
	}
	downKeys := pick(keys, sp.down)
	if s.opts.Gutter != nil {
		v, err := store.GetMany(ctx, s.opts.Gutter, downKeys)
		failed := map[string]error{}
		var be *store.BatchError
		if errors.As(err, &be) {
			failed = be.Failed()
		}
		for j, i := range sp.down {
			switch {
			case err != nil && be == nil, failed[keys[i]] != nil:
				s.gutterErrs.Add(1)
			case j < len(v) && v[j] != nil:
				vals[i] = v[j]
				s.gutterHits.Add(1)
			default:
				s.gutterMisses.Add(1)
			}
		}
		return vals, batchError("get", keyErrors(errs, err, downKeys))
	}
	for _, i := range sp.down {
		errs = append(errs, store.KeyError{Key: keys[i], Addr: sp.nodes[i].addr, Err: ErrNodeDown})
	}
	return vals, batchError("get", errs)
}

// SetMany writes the items of healthy nodes in one batch; items of Down
// nodes fail at once with ErrNodeDown (with a gutter, they go there with
// their TTL capped at Options.GutterTTL).
func (s *Store) SetMany(ctx context.Context, items []store.Item) error {
	sp := s.split(len(items), func(i int) string { return items[i].Key })
	if len(sp.down) == 0 {
		err := store.SetMany(ctx, s.inner, items)
		sp.releaseAll()
		s.observeBatch(sp, sp.live, itemKeys(items), err)
		return err
	}
	var errs []store.KeyError
	if len(sp.live) > 0 {
		sub := pick(items, sp.live)
		err := store.SetMany(ctx, s.inner, sub)
		sp.releaseAll()
		keys := itemKeys(sub)
		s.observeBatch(sp, sp.live, keys, err)
		errs = keyErrors(errs, err, keys)
	}
	down := pick(items, sp.down)
	if s.opts.Gutter != nil {
		for j := range down {
			down[j].TTL = s.gutterTTL(down[j].TTL)
		}
		err := store.SetMany(ctx, s.opts.Gutter, down)
		return batchError("set", keyErrors(errs, err, itemKeys(down)))
	}
	for j, i := range sp.down {
		errs = append(errs, store.KeyError{Key: down[j].Key, Addr: sp.nodes[i].addr, Err: ErrNodeDown})
	}
	return batchError("set", errs)
}

// DeleteMany removes the keys of healthy nodes in one batch; keys of Down
// nodes cannot be deleted there and fail with ErrNodeDown (with a gutter,
// the gutter's copies are deleted too).
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	sp := s.split(len(keys), func(i int) string { return keys[i] })
	if len(sp.down) == 0 {
		err := store.DeleteMany(ctx, s.inner, keys)
		sp.releaseAll()
		s.observeBatch(sp, sp.live, keys, err)
		return err
	}
	var errs []store.KeyError
	if len(sp.live) > 0 {
		sub := pick(keys, sp.live)
		err := store.DeleteMany(ctx, s.inner, sub)
		sp.releaseAll()
		s.observeBatch(sp, sp.live, sub, err)
		errs = keyErrors(errs, err, sub)
	}
	downKeys := pick(keys, sp.down)
	if s.opts.Gutter != nil {
		errs = keyErrors(errs, store.DeleteMany(ctx, s.opts.Gutter, downKeys), downKeys)
	}
	for _, i := range sp.down {
		errs = append(errs, store.KeyError{Key: keys[i], Addr: sp.nodes[i].addr, Err: ErrNodeDown})
	}
	return batchError("delete", errs)
}

func itemKeys(items []store.Item) []string {
	keys := make([]string, len(items))
	for i := range items {
		keys[i] = items[i].Key
	}
	return keys
}
