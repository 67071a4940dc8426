package redisring_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisring"
)

// TestReadsEveryKindOfValue reads, over 3 shards, values of every kind:
// empty, binary with CR LF and NUL bytes, 1 MiB (more than a connection's
// read buffer), a missing key, and a key holding a list (MGET answers nil
// for it): GetMany and LeaseGet return every key as stored, the missing
// one and the list as nil (the missing one a won lease, the list a failed
// key: its SET NX finds the key taken, so no placeholder replaces it, and
// a GET says WRONGTYPE).
func TestReadsEveryKindOfValue(t *testing.T) {
	addrs := shards(t, 3)
	s := open(t, redisring.Options{Servers: addrs})
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	want := map[string][]byte{}
	var keys []string
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("kind:%d", i)
		keys = append(keys, k)
		switch i % 5 {
		case 0:
			want[k] = []byte{}
		case 1:
			want[k] = []byte("a\r\nb\x00c\r\n$-1\r\n")
		case 2:
			want[k] = big
		case 3:
			want[k] = nil // missing
		default:
			want[k] = []byte(k)
		}
		if want[k] != nil {
			if err := s.Set(ctx, k, want[k], time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := "kind:list"
	keys = append(keys, list)
	c := redis.NewClient(&redis.Options{Addr: s.NodeOf(list)})
	defer c.Close()
	if err := c.RPush(ctx, list, "x").Err(); err != nil {
		t.Fatal(err)
	}
	last := len(keys) - 1
	for round := 0; round < 2; round++ { // the second on workers that ran before
		vals, err := s.GetMany(ctx, keys)
		if err != nil {
			t.Fatalf("round %d: GetMany: %v", round, err)
		}
		for i, k := range keys[:30] {
			if w := want[k]; !bytes.Equal(vals[i], w) || (w == nil) != (vals[i] == nil) {
				t.Fatalf("round %d: GetMany %s = %d bytes (nil %v), want %d (nil %v)", round, k, len(vals[i]), vals[i] == nil, len(w), w == nil)
			}
		}
		if vals[last] != nil { // MGET answers nil for a key that holds no string
			t.Fatalf("round %d: GetMany of a list = %q, want nil (a miss)", round, vals[last])
		}
	}
	res, err := s.LeaseGet(ctx, keys, store.LeaseOptions{TTL: time.Second, Placeholder: []byte("\x00ph")})
	var be *store.BatchError
	if !errors.As(err, &be) || len(res) != len(keys) {
		t.Fatalf("LeaseGet = %d results, %v; want every result and a *store.BatchError for the list", len(res), err)
	}
	if failed := be.Failed(); len(failed) != 1 || failed[list] == nil {
		t.Fatalf("LeaseGet failed %v; want the list alone", failed)
	}
	for i, k := range keys[:30] {
		r := res[i]
		switch w := want[k]; {
		case w == nil && (!r.Won || r.Value != nil || r.Lease.Key != k):
			t.Fatalf("LeaseGet %s = %+v, want a won lease", k, r)
		case w != nil && (!bytes.Equal(r.Value, w) || r.Value == nil || r.Won || !bytes.Equal(r.Lease.Token, w)):
			t.Fatalf("LeaseGet %s = %d bytes, won %v, want its %d bytes", k, len(r.Value), r.Won, len(w))
		}
	}
	// A list is not overwritten by a lease's placeholder (SET NX finds
	// the key taken), and it is a failure of that key (WRONGTYPE), not a
	// lease held by another caller: its readers load without waiting.
	if r := res[last]; r.Won || r.Value != nil || r.Held {
		t.Fatalf("LeaseGet of a list = %+v, want a failed key (not won, not held, no value)", r)
	}
	if typ, err := c.Type(ctx, list).Result(); err != nil || typ != "list" {
		t.Fatalf("TYPE %s = %q, %v; the list was replaced", list, typ, err)
	}
}

// TestManyCallersAtOnce reads from 24 goroutines at once, more than a
// ring has workers (the shards' parts that find none idle run on
// goroutines of their own): every call gets every value, under the race
// detector too.
func TestManyCallersAtOnce(t *testing.T) {
	s := open(t, redisring.Options{Servers: shards(t, 3)})
	ctx := context.Background()
	keys := make([]string, 60)
	var items []store.Item
	for i := range keys {
		keys[i] = fmt.Sprintf("many:%d", i)
		items = append(items, store.Item{Key: keys[i], Value: []byte("v:" + keys[i])})
	}
	if err := s.SetMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for g := 0; g < 24; g++ {
		wg.Go(func() {
			for n := 0; n < 30; n++ {
				part := keys[(g+n)%30 : (g+n)%30+30]
				vals, err := s.GetMany(ctx, part)
				if err != nil {
					errs <- err
					return
				}
				res, err := s.LeaseGet(ctx, part, store.LeaseOptions{TTL: time.Second, Placeholder: []byte("\x00ph")})
				if err != nil {
					errs <- err
					return
				}
				for i, k := range part {
					if string(vals[i]) != "v:"+k || string(res[i].Value) != "v:"+k {
						errs <- fmt.Errorf("%s = %q / %q", k, vals[i], res[i].Value)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
