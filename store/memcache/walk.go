package memcache

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache/meta"
)

// nodeWalker walks one memcached server with its own connections (the
// store's pool stays free for the application's traffic).
type nodeWalker struct {
	c    *meta.Client
	opts store.WalkOptions
}

// WalkNodes implements store.KeyWalker: one walker per server of the
// pool, in the order of Options.Servers, kind "memcached".
func (s *Store) WalkNodes(ctx context.Context) (string, []store.NodeWalker, error) {
	if s.closed.Load() {
		return "", nil, store.ErrClosed
	}
	var out []store.NodeWalker
	for _, a := range s.ring.Servers() {
		out = append(out, &nodeWalker{c: meta.NewClient(a, s.walkOpts)})
	}
	return "memcached", out, ctx.Err()
}

// Addr implements store.NodeWalker.
func (w *nodeWalker) Addr() string { return w.c.Addr() }

// Close implements store.NodeWalker.
func (w *nodeWalker) Close() error { return w.c.Close() }

func (w *nodeWalker) pace(ctx context.Context, n int) error {
	if w.opts.Pace == nil {
		return ctx.Err()
	}
	return w.opts.Pace(ctx, n)
}

// Walk implements store.NodeWalker: it lists the items with lru_crawler
// metadump and, unless opts.KeysOnly, reads each value's length and TTL
// with mg s t (no value, no LRU bump), a batch at a time.
func (w *nodeWalker) Walk(ctx context.Context, opts store.WalkOptions, add func(store.KeyInfo) error) error {
	if opts.Count <= 0 {
		opts.Count = 500
	}
	w.opts = opts
	if err := w.pace(ctx, 1); err != nil {
		return err
	}
	batch := make([]meta.DumpItem, 0, w.opts.Count)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch = batch[:0] }()
		if opts.KeysOnly {
			for _, it := range batch {
				if err := add(store.KeyInfo{Key: it.Key, Node: w.c.Addr()}); err != nil {
					return err
				}
			}
			return nil
		}
		reqs := make([]meta.Request, len(batch))
		for i, it := range batch {
			reqs[i] = meta.Request{Cmd: meta.Get, Key: it.Key, ReturnSize: true, ReturnTTL: true, NoBump: true}
		}
		if err := w.pace(ctx, len(reqs)); err != nil {
			return err
		}
		var firstErr, addErr error
		err := w.c.Exec(ctx, reqs, func(i int, res *meta.Response, err error) {
			if err != nil || res.Status != meta.HD || addErr != nil {
				if err != nil && firstErr == nil {
					firstErr = err
				}
				return // EN: expired or evicted since the dump
			}
			ki := store.KeyInfo{Key: batch[i].Key, Type: "item", Length: res.Size, ValueBytes: res.Size, MemoryBytes: batch[i].Size, Node: w.c.Addr(), TTLSeconds: -1}
			if res.TTL >= 0 {
				ki.TTLSeconds = float64(res.TTL)
			}
			addErr = add(ki)
		})
		if err == nil {
			err = firstErr
		}
		if err != nil {
			return store.NodeErr(w.c.Addr(), fmt.Errorf("mg: %w", err))
		}
		return addErr
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
			if !strings.HasPrefix(it.Key, opts.Prefix) {
				return nil
			}
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
		return store.NodeErr(w.c.Addr(), fmt.Errorf("lru_crawler metadump: %w", err))
	}
	return flush()
}

// replay reads the spooled dump back, a batch at a time.
func (w *nodeWalker) replay(spool *os.File, batch *[]meta.DumpItem, flush func() error) error {
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

// Read implements store.NodeWalker with mg v (no LRU bump).
func (w *nodeWalker) Read(ctx context.Context, keys []string) ([][]byte, error) {
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
	return out, store.NodeErr(w.c.Addr(), err)
}
