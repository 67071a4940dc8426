// Command nodeinterop is the Go side of the Node package's cross-language
// tests (js/test/interop.test.mjs): it writes one value of every kind with
// kura's Go Cache for Node to read, and reads back what Node wrote with
// the Go types, printing JSON either way. It is a test helper, not a tool.
//
//	nodeinterop write ADDR PREFIX   # writes PREFIX+kind keys, prints {key: value}
//	nodeinterop read ADDR PREFIX    # reads PREFIX+kind keys, prints {key: value|error}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store/redisstore"
)

// Article is the record both sides write; Node states its schema as
// {"id":int,"name":string,"tags":[]string,"body":string,"at":custom(time.Time)}.
type Article struct {
	ID   int64     `msgpack:"id" json:"id"`
	Name string    `msgpack:"name" json:"name"`
	Tags []string  `msgpack:"tags" json:"tags"`
	Body string    `msgpack:"body" json:"body"`
	At   time.Time `msgpack:"at" json:"at"`
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: nodeinterop write|read ADDR PREFIX")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := run(ctx, os.Args[1], os.Args[2], os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodeinterop:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}

// kind is one value kind: how to write it and how to read it, with Go types.
type kind struct {
	name  string
	write func(ctx context.Context, s *redisstore.Store, key string) (any, error)
	read  func(ctx context.Context, s *redisstore.Store, key string) (any, error)
}

func typed[V any](name string, opts kura.Options, v V) kind {
	mk := func(s *redisstore.Store) (*kura.Cache[V], error) { return kura.New[V](s, opts) }
	return kind{
		name: name,
		write: func(ctx context.Context, s *redisstore.Store, key string) (any, error) {
			c, err := mk(s)
			if err != nil {
				return nil, err
			}
			return v, c.Set(ctx, key, v, time.Minute)
		},
		read: func(ctx context.Context, s *redisstore.Store, key string) (any, error) {
			c, err := mk(s)
			if err != nil {
				return nil, err
			}
			return c.Get(ctx, key)
		},
	}
}

func kinds() ([]kind, error) {
	at := time.Date(2026, 11, 24, 22, 0, 0, 123e6, time.UTC)
	art := Article{ID: 42, Name: "記事 article", Tags: []string{"金利", "yen"}, At: at,
		Body: "The yen weakened as the central bank held rates. 日銀は金利を据え置いた。 The yen weakened as the central bank held rates."}
	jsonCodec, err := codec.New(codec.Options{Serializer: codec.JSON()})
	if err != nil {
		return nil, err
	}
	zstdCodec, err := codec.New(codec.Options{Compressor: codec.Zstd(3), MinCompressSize: -1})
	if err != nil {
		return nil, err
	}
	rawCodec, err := codec.New(codec.Options{Serializer: codec.Raw()})
	if err != nil {
		return nil, err
	}
	idCodec, err := codec.New(codec.Options{Serializer: codec.IDList()})
	if err != nil {
		return nil, err
	}
	big := art
	for i := 0; i < 20; i++ {
		big.Body += " The yen weakened as the central bank held rates."
	}
	neg := kind{
		name: "negative",
		write: func(ctx context.Context, s *redisstore.Store, key string) (any, error) {
			c, err := kura.New[Article](s, kura.Options{})
			if err != nil {
				return nil, err
			}
			_, err = c.Fetch(ctx, key, time.Minute, func(context.Context, string) (Article, error) { return Article{}, kura.ErrNotFound })
			if !errors.Is(err, kura.ErrNotFound) {
				return nil, fmt.Errorf("negative fetch: %v", err)
			}
			return nil, nil
		},
		read: func(ctx context.Context, s *redisstore.Store, key string) (any, error) {
			c, err := kura.New[Article](s, kura.Options{})
			if err != nil {
				return nil, err
			}
			_, err = c.Get(ctx, key)
			if errors.Is(err, kura.ErrNotFound) {
				return "not found", nil
			}
			return nil, fmt.Errorf("want ErrNotFound, got %v", err)
		},
	}
	return []kind{
		typed("record", kura.Options{}, art),
		typed("record-s2", kura.Options{}, big),
		typed("record-json", kura.Options{Codec: jsonCodec}, big),
		typed("record-zstd", kura.Options{Codec: zstdCodec}, big),
		typed("string", kura.Options{}, "héllo, 世界"),
		typed("int", kura.Options{}, int64(-1234567890123)),
		typed("float", kura.Options{}, 3.25),
		typed("bool", kura.Options{}, true),
		typed("list", kura.Options{}, []int{1, 2, 3}),
		typed("map", kura.Options{}, map[string]int{"a": 1, "b": 2}),
		typed("time", kura.Options{}, at),
		typed("raw", kura.Options{Codec: rawCodec}, []byte("raw bytes \x00\x01\x02")),
		typed("idlist", kura.Options{Codec: idCodec}, []int64{1, 2, 3, 100, 7, -5}),
		neg,
	}, nil
}

func run(ctx context.Context, cmd, addr, prefix string) (map[string]any, error) {
	s, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{addr}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ks, err := kinds()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, k := range ks {
		key := prefix + k.name
		var v any
		switch cmd {
		case "write":
			v, err = k.write(ctx, s, key)
		case "read":
			v, err = k.read(ctx, s, key)
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
