package scan

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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
	// The dump goes to a temporary file as fast as the server sends it,
	// and the mg batches read it back: a crawl held up by our mg calls
	// would leave the LRU maintainer time to move items from lists not
	// yet crawled into lists already crawled, and they would be missed.
	// Memory stays bounded (the keys are on disk, not in memory).
	spool, err := os.CreateTemp("", "kura-scan-metadump-")
	if err != nil {
		return fmt.Errorf("metadump spool: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	bw := bufio.NewWriterSize(spool, 256<<10)
	var rec []byte
	dump := func() error {
		return w.c.Metadump(ctx, func(it meta.DumpItem) error {
			rec = binary.AppendUvarint(rec[:0], uint64(len(it.Key)))
			rec = append(rec, it.Key...)
			rec = binary.AppendUvarint(rec, uint64(it.Size))
			_, err := bw.Write(rec)
			return err
		})
	}
	err = dump()
	// The crawler serves one request at a time: wait for another tool's
	// dump to end, a few times, before giving up.
	for try := 0; try < 10 && errors.Is(err, meta.ErrCrawlerBusy); try++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if _, serr := spool.Seek(0, io.SeekStart); serr != nil {
			return serr
		}
		if serr := spool.Truncate(0); serr != nil {
			return serr
		}
		bw.Reset(spool)
		err = dump()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = w.replay(spool, &batch, flush)
	}
	if err != nil {
		return fmt.Errorf("lru_crawler metadump: %w", err)
	}
	return flush()
}

// replay reads the spooled dump back, a batch at a time.
func (w *memcachedWalker) replay(spool *os.File, batch *[]meta.DumpItem, flush func() error) error {
	end, err := spool.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	br := bufio.NewReaderSize(io.LimitReader(spool, end), 256<<10)
	for {
		n, err := binary.ReadUvarint(br)
		if err == io.EOF {
			return nil
		}
		if err != nil || n > 1<<20 {
			return fmt.Errorf("metadump spool: corrupt (%v)", err)
		}
		key := make([]byte, n)
		if _, err := io.ReadFull(br, key); err != nil {
			return fmt.Errorf("metadump spool: %w", err)
		}
		size, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("metadump spool: %w", err)
		}
		*batch = append(*batch, meta.DumpItem{Key: string(key), Size: int64(size)})
		if len(*batch) >= w.opts.Count {
			if err := flush(); err != nil {
				return err
			}
		}
	}
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
