package kura_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store/memstore"
)

type Article struct {
	ID    int
	Title string
}

// db stands for the database behind the cache.
var db = map[string]Article{
	"article:1": {1, "Caching in front of PostgreSQL"},
	"article:2": {2, "Quiet mode in memcached"},
}

func ExampleCache_Fetch() {
	ctx := context.Background()
	st, _ := memstore.New(memstore.Options{}) // or redisstore / memcache
	articles, _ := kura.New[Article](st, kura.Options{})

	load := func(ctx context.Context, key string) (Article, error) {
		fmt.Println("loading", key)
		a, ok := db[key]
		if !ok {
			return Article{}, kura.ErrNotFound // cached negatively
		}
		return a, nil
	}
	a, _ := articles.Fetch(ctx, "article:1", time.Hour, load) // miss: loads
	a, _ = articles.Fetch(ctx, "article:1", time.Hour, load)  // hit
	fmt.Println(a.Title)

	_, err := articles.Fetch(ctx, "article:9", time.Hour, load)
	_, err = articles.Fetch(ctx, "article:9", time.Hour, load) // absence is cached
	fmt.Println(errors.Is(err, kura.ErrNotFound))
	// Output:
	// loading article:1
	// Caching in front of PostgreSQL
	// loading article:9
	// true
}

func ExampleCache_FetchMany() {
	ctx := context.Background()
	st, _ := memstore.New(memstore.Options{})
	articles, _ := kura.New[Article](st, kura.Options{})

	// One cache read for all keys, one loader call for all misses, one
	// batched write-back.
	loadMany := func(ctx context.Context, keys []string) (map[string]Article, error) {
		fmt.Println("loading", len(keys), "keys")
		out := map[string]Article{}
		for _, k := range keys {
			if a, ok := db[k]; ok {
				out[k] = a
			}
		}
		return out, nil
	}
	keys := []string{"article:1", "article:2", "article:3"}
	got, _ := articles.FetchMany(ctx, keys, time.Hour, loadMany)
	got, _ = articles.FetchMany(ctx, keys, time.Hour, loadMany) // all cached now
	titles := []string{}
	for _, a := range got {
		titles = append(titles, a.Title)
	}
	sort.Strings(titles)
	fmt.Println(titles)
	// Output:
	// loading 3 keys
	// [Caching in front of PostgreSQL Quiet mode in memcached]
}
