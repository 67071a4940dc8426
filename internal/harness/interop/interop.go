// Package interop is the scaffolding the Go sides of the cross-language
// tests share (internal/harness/nodeinterop for Node, rbinterop for Ruby):
// value kinds written and read with kura's Go Cache, the write and read
// commands over them, the store an address names and JSON output. It is a
// test helper.
package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/redisstore"
)

// Emit prints out as JSON, or prog's err and exits 1.
func Emit[T any](prog string, out T, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}

// Kind is one value kind: how to write it and how to read it, with Go types.
type Kind struct {
	Name  string
	Write func(ctx context.Context, s store.Store, key string) (any, error)
	Read  func(ctx context.Context, s store.Store, key string) (any, error)
}

// Typed is the kind name: v written with a Cache[V] built with opts, and
// read back with one.
func Typed[V any](name string, opts kura.Options, v V) Kind {
	return Kind{
		Name: name,
		Write: func(ctx context.Context, s store.Store, key string) (any, error) {
			c, err := kura.New[V](s, opts)
			if err != nil {
				return nil, err
			}
			return v, c.Set(ctx, key, v, time.Minute)
		},
		Read: func(ctx context.Context, s store.Store, key string) (any, error) {
			c, err := kura.New[V](s, opts)
			if err != nil {
				return nil, err
			}
			return c.Get(ctx, key)
		},
	}
}

// Negative is the kind "negative": a Fetch of a Cache[V] whose loader
// answers kura.ErrNotFound, read back as "not found".
func Negative[V any]() Kind {
	return Kind{
		Name: "negative",
		Write: func(ctx context.Context, s store.Store, key string) (any, error) {
			c, err := kura.New[V](s, kura.Options{})
			if err != nil {
				return nil, err
			}
			_, err = c.Fetch(ctx, key, time.Minute, func(context.Context, string) (V, error) {
				var zero V
				return zero, kura.ErrNotFound
			})
			if !errors.Is(err, kura.ErrNotFound) {
				return nil, fmt.Errorf("negative fetch: %v", err)
			}
			return nil, nil
		},
		Read: func(ctx context.Context, s store.Store, key string) (any, error) {
			c, err := kura.New[V](s, kura.Options{})
			if err != nil {
				return nil, err
			}
			if _, err = c.Get(ctx, key); errors.Is(err, kura.ErrNotFound) {
				return "not found", nil
			}
			return nil, fmt.Errorf("want ErrNotFound, got %v", err)
		},
	}
}

// Codecs are the non-default codecs the kinds of both sides use.
type Codecs struct {
	JSON, Zstd, Raw, IDList *codec.Codec
}

// NewCodecs builds them: JSON, zstd level 3 on every value, Raw, IDList.
func NewCodecs() (Codecs, error) {
	var cs Codecs
	for _, c := range []struct {
		dst  **codec.Codec
		opts codec.Options
	}{
		{&cs.JSON, codec.Options{Serializer: codec.JSON()}},
		{&cs.Zstd, codec.Options{Compressor: codec.Zstd(3), MinCompressSize: -1}},
		{&cs.Raw, codec.Options{Serializer: codec.Raw()}},
		{&cs.IDList, codec.Options{Serializer: codec.IDList()}},
	} {
		var err error
		if *c.dst, err = codec.New(c.opts); err != nil {
			return Codecs{}, err
		}
	}
	return cs, nil
}

// Open connects to a redis-server ("host:port", a *redisstore.Store) or a
// memcached pool ("memcache://host:port,...", a *memcache.Store).
func Open(ctx context.Context, addr string) (store.Store, error) {
	if servers, ok := strings.CutPrefix(addr, "memcache://"); ok {
		return memcache.New(ctx, memcache.Options{Servers: strings.Split(servers, ",")})
	}
	return redisstore.New(ctx, redisstore.Options{Addrs: []string{addr}})
}

// Run writes (cmd "write") or reads (cmd "read") prefix+name for each
// kind on s, and returns what each wrote or read by key, or {"error": ...};
// bytes are {"bytes": hex}.
func Run(ctx context.Context, s store.Store, cmd, prefix string, ks []Kind) (map[string]any, error) {
	out := map[string]any{}
	for _, k := range ks {
		key := prefix + k.Name
		var v any
		var err error
		switch cmd {
		case "write":
			v, err = k.Write(ctx, s, key)
		case "read":
			v, err = k.Read(ctx, s, key)
		default:
			return nil, fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			out[key] = map[string]string{"error": err.Error()}
			continue
		}
		if b, ok := v.([]byte); ok {
			v = map[string]string{"bytes": fmt.Sprintf("%x", b)}
		}
		out[key] = v
	}
	return out, nil
}
