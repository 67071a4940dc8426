package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// nodeWalker walks one master on the store's client for that node.
type nodeWalker struct {
	address string
	c       rueidis.Client
	opts    store.WalkOptions
	// noMemory: MEMORY USAGE is refused here (disabled or not allowed).
	noMemory bool
}

// WalkNodes implements store.KeyWalker: one walker per master (ROLE on
// every node the client knows, replicas skipped so no key is listed
// twice), kind "redis" or "redis-cluster". It waits for the store's first
// connection attempt and fails if that did not reach the server.
func (s *Store) WalkNodes(ctx context.Context) (string, []store.NodeWalker, error) {
	if err := s.Ping(ctx); err != nil {
		return "", nil, err
	}
	kind := "redis"
	if s.IsCluster() {
		kind = "redis-cluster"
	}
	nodes, err := s.masterWalkers(ctx)
	return kind, nodes, err
}

func (s *Store) masterWalkers(ctx context.Context) ([]store.NodeWalker, error) {
	nodes := s.Client().Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	var out []store.NodeWalker
	for _, a := range addrs {
		nc := nodes[a]
		role, err := nc.Do(ctx, nc.B().Role().Build()).ToArray()
		if err != nil {
			return nil, store.NodeErr(a, fmt.Errorf("ROLE: %w", err))
		}
		if len(role) == 0 {
			continue
		}
		if r, _ := role[0].ToString(); r != "master" {
			continue
		}
		out = append(out, &nodeWalker{address: a, c: nc})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("redisstore: no Redis master among %s", strings.Join(addrs, ", "))
	}
	return out, nil
}

// Addr implements store.NodeWalker.
func (w *nodeWalker) Addr() string { return w.address }

// Close implements store.NodeWalker: the walker borrows the store's
// client, which the store closes.
func (w *nodeWalker) Close() error { return nil }

func (w *nodeWalker) pace(ctx context.Context, n int) error {
	if w.opts.Pace == nil {
		return ctx.Err()
	}
	return w.opts.Pace(ctx, n)
}

// lengthCmd is the command that reads a key's length for its type.
func (w *nodeWalker) lengthCmd(typ, key string) (rueidis.Completed, bool) {
	b := w.c.B()
	switch typ {
	case "string":
		return b.Strlen().Key(key).Build(), true
	case "hash":
		return b.Hlen().Key(key).Build(), true
	case "list":
		return b.Llen().Key(key).Build(), true
	case "set":
		return b.Scard().Key(key).Build(), true
	case "zset":
		return b.Zcard().Key(key).Build(), true
	case "stream":
		return b.Xlen().Key(key).Build(), true
	}
	return rueidis.Completed{}, false
}

// Walk implements store.NodeWalker with SCAN (MATCH for a prefix) and,
// unless opts.KeysOnly, pipelines that describe the keys found.
func (w *nodeWalker) Walk(ctx context.Context, opts store.WalkOptions, fn func(store.KeyInfo) error) error {
	if opts.Count <= 0 {
		opts.Count = 500
	}
	w.opts = opts
	var cursor uint64
	for {
		if err := w.pace(ctx, 1); err != nil {
			return err
		}
		b := w.c.B().Scan().Cursor(cursor)
		var cmd rueidis.Completed
		if opts.Prefix != "" {
			cmd = b.Match(escapeGlob(opts.Prefix) + "*").Count(int64(opts.Count)).Build()
		} else {
			cmd = b.Count(int64(opts.Count)).Build()
		}
		e, err := w.c.Do(ctx, cmd).AsScanEntry()
		if err != nil {
			return store.NodeErr(w.address, fmt.Errorf("SCAN: %w", err))
		}
		if opts.KeysOnly {
			for _, k := range e.Elements {
				if err := fn(store.KeyInfo{Key: k, Node: w.address}); err != nil {
					return err
				}
			}
		} else if len(e.Elements) > 0 {
			if err := w.describe(ctx, e.Elements, fn); err != nil {
				return err
			}
		}
		cursor = e.Cursor
		if cursor == 0 {
			return nil
		}
	}
}

// describe reads TTL, memory and length of keys. Caches hold strings
// mostly, so the first pipeline asks PTTL, MEMORY USAGE and STRLEN per key
// (3 commands); a key that answers STRLEN with WRONGTYPE is a collection,
// and only those get TYPE and their length command in a second pipeline.
func (w *nodeWalker) describe(ctx context.Context, keys []string, add func(store.KeyInfo) error) error {
	per := 3
	if w.noMemory {
		per = 2
	}
	cmds := make(rueidis.Commands, 0, per*len(keys))
	b := w.c.B()
	for _, k := range keys {
		cmds = append(cmds, b.Pttl().Key(k).Build(), b.Strlen().Key(k).Build())
		if !w.noMemory {
			cmds = append(cmds, b.MemoryUsage().Key(k).Build())
		}
	}
	if err := w.pace(ctx, len(cmds)); err != nil {
		return err
	}
	res := w.c.DoMulti(ctx, cmds...)
	var others []store.KeyInfo
	for i, k := range keys {
		r := res[i*per : i*per+per]
		ki := store.KeyInfo{Key: k, Node: w.address}
		ms, err := r[0].AsInt64()
		if err != nil {
			return fmt.Errorf("PTTL: %w", err)
		}
		switch {
		case ms == -2:
			continue // deleted or expired since SCAN listed it
		case ms < 0:
			ki.TTLSeconds = -1
		default:
			ki.TTLSeconds = float64(ms) / 1000
		}
		if per == 3 {
			if n, err := r[2].AsInt64(); err == nil {
				ki.MemoryBytes = n
			} else if !rueidis.IsRedisNil(err) {
				// Disabled (managed services) or not allowed by the ACL:
				// stop asking.
				w.noMemory = true
			}
		}
		n, err := r[1].AsInt64()
		switch {
		case err == nil:
			ki.Type, ki.Length, ki.ValueBytes = "string", n, n
			if err := add(ki); err != nil {
				return err
			}
		case isRedisErr(err):
			others = append(others, ki) // WRONGTYPE: a collection
		default:
			return fmt.Errorf("STRLEN: %w", err)
		}
	}
	if len(others) == 0 {
		return nil
	}
	cmds = cmds[:0]
	for _, ki := range others {
		cmds = append(cmds, b.Type().Key(ki.Key).Build())
	}
	if err := w.pace(ctx, len(cmds)); err != nil {
		return err
	}
	var infos []store.KeyInfo
	lens := make(rueidis.Commands, 0, len(others))
	for i, r := range w.c.DoMulti(ctx, cmds...) {
		typ, err := r.ToString()
		if err != nil {
			return fmt.Errorf("TYPE: %w", err)
		}
		ki := others[i]
		ki.Type = typ
		if typ == "none" {
			continue
		}
		c, ok := w.lengthCmd(typ, ki.Key)
		if !ok || typ == "string" {
			ki.ValueBytes = ki.MemoryBytes
			if err := add(ki); err != nil {
				return err
			}
			continue
		}
		infos = append(infos, ki)
		lens = append(lens, c)
	}
	if len(lens) == 0 {
		return nil
	}
	if err := w.pace(ctx, len(lens)); err != nil {
		return err
	}
	for i, r := range w.c.DoMulti(ctx, lens...) {
		n, err := r.AsInt64()
		if err != nil {
			if isRedisErr(err) {
				continue // the key changed type since TYPE: skip it
			}
			return fmt.Errorf("%s: %w", cmdName(infos[i].Type), err)
		}
		ki := infos[i]
		ki.Length, ki.ValueBytes = n, ki.MemoryBytes
		if err := add(ki); err != nil {
			return err
		}
	}
	return nil
}

func cmdName(typ string) string {
	return map[string]string{"string": "STRLEN", "hash": "HLEN", "list": "LLEN", "set": "SCARD", "zset": "ZCARD", "stream": "XLEN"}[typ]
}

// Read implements store.NodeWalker with pipelined GETs.
func (w *nodeWalker) Read(ctx context.Context, keys []string) ([][]byte, error) {
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = w.c.B().Get().Key(k).Build()
	}
	out := make([][]byte, len(keys))
	for i, r := range w.c.DoMulti(ctx, cmds...) {
		b, err := r.AsBytes()
		switch {
		case err == nil:
			out[i] = b
		case rueidis.IsRedisNil(err), isRedisErr(err):
			// gone, or no longer a string
		default:
			return nil, store.NodeErr(w.address, err)
		}
	}
	return out, nil
}

// isRedisErr reports an error reply from the server (as opposed to a
// connection failure).
func isRedisErr(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
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
