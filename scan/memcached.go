package scan

import (
	"context"
	"fmt"

	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memcache/meta"
)

// memcachedWalker walks one memcached server with its own connections
// (the store's pool stays free for the application's traffic).
type memcachedWalker struct {
	c    *meta.Client
	opts Options
	pace *pacer
}

func memcachedWalkers(ms *memcache.Store, opts Options) ([]walker, error) {
	var out []walker
	for _, a := range ms.Ring().Servers() {
		out = append(out, &memcachedWalker{c: meta.NewClient(a, meta.Options{}), opts: opts, pace: newPacer(opts.Rate)})
	}
	return out, nil
}

func (w *memcachedWalker) addr() string    { return w.c.Addr() }
func (w *memcachedWalker) commands() int64 { return w.pace.count.Load() }
func (w *memcachedWalker) close()          { _ = w.c.Close() }

// walk lists the items with lru_crawler metadump and reads each value's
// length and TTL with mg s t (no value, no LRU bump), a batch at a time
// while the dump streams.
func (w *memcachedWalker) walk(ctx context.Context, add func(KeyInfo)) error {
	if err := w.pace.wait(ctx, 1); err != nil {
		return err
	}
	batch := make([]meta.DumpItem, 0, w.opts.Count)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch = batch[:0] }()
		reqs := make([]meta.Request, len(batch))
		for i, it := range batch {
			reqs[i] = meta.Request{Cmd: meta.Get, Key: it.Key, ReturnSize: true, ReturnTTL: true, NoBump: true}
		}
		if err := w.pace.wait(ctx, len(reqs)); err != nil {
			return err
		}
		var firstErr error
		err := w.c.Exec(ctx, reqs, func(i int, res *meta.Response, err error) {
			if err != nil || res.Status != meta.HD {
				if err != nil && firstErr == nil {
					firstErr = err
				}
				return // EN: expired or evicted since the dump
			}
			ki := KeyInfo{Key: batch[i].Key, Type: "item", Length: res.Size, ValueBytes: res.Size, MemoryBytes: batch[i].Size, Node: w.c.Addr(), TTLSeconds: -1}
			if res.TTL >= 0 {
				ki.TTLSeconds = float64(res.TTL)
			}
			add(ki)
		})
		if err == nil {
			err = firstErr
		}
		if err != nil {
			return fmt.Errorf("mg: %w", err)
		}
		return nil
	}
	err := w.c.Metadump(ctx, func(it meta.DumpItem) error {
		batch = append(batch, it)
		if len(batch) >= w.opts.Count {
			return flush()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("lru_crawler metadump: %w", err)
	}
	return flush()
}

func (w *memcachedWalker) fetch(ctx context.Context, keys []string) ([][]byte, error) {
	if err := w.pace.wait(ctx, len(keys)); err != nil {
		return nil, err
	}
	reqs := make([]meta.Request, len(keys))
	for i, k := range keys {
		reqs[i] = meta.Request{Cmd: meta.Get, Key: k, ReturnValue: true, NoBump: true}
	}
	out := make([][]byte, len(keys))
	var firstErr error
	err := w.c.Exec(ctx, reqs, func(i int, res *meta.Response, err error) {
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		if res.Status == meta.VA {
			out[i] = res.Value
		}
	})
	if err == nil {
		err = firstErr
	}
	return out, err
}
