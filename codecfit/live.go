package codecfit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/redisstore"
)

// ErrCannotList is returned by SampleStore for a store whose keys it
// cannot list (only Redis, Redis Cluster and memcached can be sampled).
var ErrCannotList = errors.New("kura: codecfit: this store's keys cannot be listed (Redis, Redis Cluster or memcached only)")

// SampleOptions configures SampleStore.
type SampleOptions struct {
	// Prefix keeps only keys that start with it ("" keeps all), for
	// per-kind dictionaries.
	Prefix string
	// N is the number of values sampled (uniformly among the keys
	// listed). If 0, 1,000.
	N int
	// MaxKeys bounds the keys listed before sampling. If 0, 1,000,000.
	MaxKeys int
	// Codec decodes kura envelopes found (give it the dictionaries or a
	// DictionarySource the writers use). If nil, a default Codec.
	Codec *codec.Codec
	// Seed makes the sample reproducible. If 0, a fixed seed.
	Seed uint64
}

// SampleStats says what SampleStore saw.
type SampleStats struct {
	// Listed is the number of keys listed; Read the values read.
	Listed, Read int
	// Kura, JSON and Raw count the values read by what they held: kura
	// envelopes (decoded to their value), JSON documents, other bytes.
	Kura, JSON, Raw int
	// Skipped counts keys that held no value (negative, lease or
	// tombstone entries, envelopes that do not decode, non-string types,
	// keys gone between listing and reading).
	Skipped int
}

// SampleStore lists the keys of a live Redis, Redis Cluster or memcached
// store, samples opts.N of them, and returns their values: kura envelopes
// decoded, JSON documents parsed, other bytes as they are. It reads with
// SCAN (Redis, every master of a Cluster) or `lru_crawler metadump`
// (memcached), so it never blocks a server the way KEYS would.
func SampleStore(ctx context.Context, st store.Store, opts SampleOptions) ([]Value, SampleStats, error) {
	var stats SampleStats
	if opts.N <= 0 {
		opts.N = 1000
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = 1_000_000
	}
	if opts.Seed == 0 {
		opts.Seed = 0x6b757261
	}
	if opts.Codec == nil {
		c, err := codec.New(codec.Options{})
		if err != nil {
			return nil, stats, err
		}
		opts.Codec = c
	}
	var keys []string
	var err error
	if rs, ok := store.Find[*redisstore.Store](st); ok {
		keys, err = redisKeys(ctx, rs, opts.Prefix, opts.MaxKeys)
	} else if ms, ok := store.Find[*memcache.Store](st); ok {
		keys, err = memcachedKeys(ctx, ms, opts.Prefix, opts.MaxKeys)
	} else {
		return nil, stats, ErrCannotList
	}
	if err != nil {
		return nil, stats, err
	}
	stats.Listed = len(keys)
	// The listing order depends on the servers (a Cluster's masters answer
	// in any order): sort first, so one seed always samples the same keys
	// and the train/measure split, and so the recommendation, is
	// reproducible.
	slices.Sort(keys)
	r := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5851f42d4c957f2d))
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	keys = keys[:min(len(keys), opts.N)]
	var out []Value
	for start := 0; start < len(keys); start += 500 {
		batch := keys[start:min(len(keys), start+500)]
		vals, err := store.GetMany(ctx, st, batch)
		var be *store.BatchError
		if err != nil && !errors.As(err, &be) {
			return nil, stats, err
		}
		for _, b := range vals {
			if b == nil {
				stats.Skipped++
				continue
			}
			stats.Read++
			v, kind, ok := valueOf(opts.Codec, b)
			if !ok {
				stats.Skipped++
				continue
			}
			switch kind {
			case "kura":
				stats.Kura++
			case "json":
				stats.JSON++
			default:
				stats.Raw++
			}
			out = append(out, v)
		}
	}
	return out, stats, nil
}

// valueOf turns stored bytes into a Value.
func valueOf(c *codec.Codec, b []byte) (Value, string, bool) {
	if len(b) >= 2 && b[0] == codec.Magic0 && b[1] == codec.Magic1 {
		var v any
		h, err := c.Decode(b, &v)
		if err != nil || h.Kind != codec.KindValue {
			return Value{}, "kura", false
		}
		fv, err := FromAny(v)
		if err != nil {
			// msgpack maps with non-string keys have no JSON form;
			// measure against the serialized size instead.
			return Value{V: v, JSONBytes: h.RawLen}, "kura", true
		}
		return fv, "kura", true
	}
	if json.Valid(b) {
		v, err := FromJSON(b)
		if err == nil {
			return v, "json", true
		}
	}
	return FromBytes(b), "raw", true
}

func redisKeys(ctx context.Context, rs *redisstore.Store, prefix string, max int) ([]string, error) {
	// The store connects in the background: Ping waits for the first
	// attempt and fails if it did not reach the server.
	if err := rs.Ping(ctx); err != nil {
		return nil, err
	}
	c := rs.Client()
	seen := map[string]struct{}{}
	var keys []string
	match := escapeGlob(prefix) + "*"
	nodes := map[string]any{"": nil}
	if rs.IsCluster() {
		nodes = map[string]any{}
		for addr := range c.Nodes() {
			nodes[addr] = nil
		}
	}
	for addr := range nodes {
		node := c
		if addr != "" {
			node = c.Nodes()[addr]
		}
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(match).Count(500).Build()).AsScanEntry()
			if err != nil {
				if addr != "" && strings.Contains(err.Error(), "READONLY") {
					break
				}
				return nil, fmt.Errorf("kura: codecfit: SCAN %s: %w", addr, err)
			}
			for _, k := range e.Elements {
				if _, dup := seen[k]; !dup && len(keys) < max {
					seen[k] = struct{}{}
					keys = append(keys, k)
				}
			}
			cursor = e.Cursor
			if cursor == 0 || len(keys) >= max {
				break
			}
		}
	}
	return keys, nil
}

// escapeGlob escapes SCAN MATCH's special characters in a literal prefix.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// memcachedKeys lists keys with `lru_crawler metadump all` on every server
// of the pool.
func memcachedKeys(ctx context.Context, ms *memcache.Store, prefix string, max int) ([]string, error) {
	var keys []string
	for _, addr := range ms.Ring().Servers() {
		ks, err := metadump(ctx, addr, prefix, max-len(keys))
		if err != nil {
			return nil, fmt.Errorf("kura: codecfit: lru_crawler metadump on %s: %w", addr, err)
		}
		keys = append(keys, ks...)
		if len(keys) >= max {
			break
		}
	}
	return keys, nil
}

func metadump(ctx context.Context, addr, prefix string, max int) ([]string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline := time.Now().Add(time.Minute)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte("lru_crawler metadump all\r\n")); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var keys []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "END":
			return keys, nil
		case strings.HasPrefix(line, "BUSY") || strings.HasPrefix(line, "ERROR") || strings.HasPrefix(line, "CLIENT_ERROR"):
			return nil, errors.New(line)
		case strings.HasPrefix(line, "key="):
			f := strings.Fields(line)
			k, err := url.QueryUnescape(strings.TrimPrefix(f[0], "key="))
			if err != nil {
				continue
			}
			if strings.HasPrefix(k, prefix) && len(keys) < max {
				keys = append(keys, k)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("connection closed before END")
}
