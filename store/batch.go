package store

import (
	"context"
	"errors"
	"sync"
)

// fallbackParallelism bounds the concurrent single-key calls used when a
// Store does not implement the batch capabilities.
const fallbackParallelism = 16

// GetMany reads keys from s with one round trip per server when s
// implements BatchGetter (itself or through a Wrapper), and with
// concurrent Gets otherwise. See BatchGetter.GetMany for the result
// contract.
func GetMany(ctx context.Context, s Store, keys []string) ([][]byte, error) {
	if b, ok := Find[BatchGetter](s); ok {
		return b.GetMany(ctx, keys)
	}
	vals := make([][]byte, len(keys))
	errs := forEach(ctx, len(keys), func(i int) error {
		v, err := s.Get(ctx, keys[i])
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		vals[i] = v
		return err
	})
	return vals, BatchErrorOf("get", keys, errs)
}

// SetMany writes items to s, batched when s implements BatchSetter.
func SetMany(ctx context.Context, s Store, items []Item) error {
	if b, ok := Find[BatchSetter](s); ok {
		return b.SetMany(ctx, items)
	}
	keys := make([]string, len(items))
	for i := range items {
		keys[i] = items[i].Key
	}
	// The Sets run concurrently, so a key given twice would end with
	// whichever write landed last. Only its last item is written, as a
	// sequence of Sets would leave it, and the earlier ones share its fate.
	last := make(map[string]int, len(items))
	for i := range items {
		last[items[i].Key] = i
	}
	errs := forEach(ctx, len(items), func(i int) error {
		if last[items[i].Key] != i {
			return nil
		}
		return s.Set(ctx, items[i].Key, items[i].Value, items[i].TTL)
	})
	for i := range items {
		if j := last[items[i].Key]; j != i {
			errs[i] = errs[j]
		}
	}
	return BatchErrorOf("set", keys, errs)
}

// DeleteMany removes keys from s, batched when s implements BatchDeleter.
func DeleteMany(ctx context.Context, s Store, keys []string) error {
	if b, ok := Find[BatchDeleter](s); ok {
		return b.DeleteMany(ctx, keys)
	}
	errs := forEach(ctx, len(keys), func(i int) error {
		return s.Delete(ctx, keys[i])
	})
	return BatchErrorOf("delete", keys, errs)
}

func forEach(ctx context.Context, n int, fn func(i int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, fallbackParallelism)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(i)
		}(i)
	}
	wg.Wait()
	return errs
}
