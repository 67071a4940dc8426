package codecfit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
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
	keys, err := listKeys(ctx, st, opts.Prefix, opts.MaxKeys)
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

// errEnough ends a walk that has listed enough keys.
var errEnough = errors.New("enough keys")

// listKeys lists up to max keys starting with prefix on every node of st
// (store.KeyWalker: SCAN on every Redis master, lru_crawler metadump on
// every memcached server).
func listKeys(ctx context.Context, st store.Store, prefix string, max int) ([]string, error) {
	kw, ok := store.Find[store.KeyWalker](st)
	if !ok {
		return nil, ErrCannotList
	}
	_, nodes, err := kw.WalkNodes(ctx)
	if errors.Is(err, store.ErrCannotWalk) {
		return nil, ErrCannotList
	}
	if err != nil {
		return nil, fmt.Errorf("kura: codecfit: %w", err)
	}
	defer func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	}()
	seen := map[string]struct{}{}
	var keys []string
	for _, n := range nodes {
		err := n.Walk(ctx, store.WalkOptions{Prefix: prefix, KeysOnly: true}, func(k store.KeyInfo) error {
			if len(keys) >= max {
				return errEnough
			}
			if _, dup := seen[k.Key]; !dup {
				seen[k.Key] = struct{}{}
				keys = append(keys, k.Key)
			}
			return nil
		})
		if errors.Is(err, errEnough) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("kura: codecfit: listing keys: %w", err)
		}
	}
	return keys, nil
}
