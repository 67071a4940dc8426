package redisring_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
)

func TestTmpDebugFetchMany(t *testing.T) {
	f := newBenchFixture(t)
	var n atomic.Int64
	c, err := kura.New[[]byte](f.s, kura.Options{OnError: func(op kura.Op, key string, err error) {
		if n.Add(1) < 5 {
			t.Logf("OnError %v %q: %v", op, key, err)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fails := 0
	for i := 0; i < 20000; i++ {
		_, err := c.FetchMany(ctx, f.ckeys[i%len(f.ckeys)], time.Hour, func(context.Context, []string) (map[string][]byte, error) {
			return nil, fmt.Errorf("no load expected")
		})
		if err != nil {
			fails++
			if fails < 5 {
				t.Logf("call %d: %v", i, err)
			}
		}
	}
	t.Logf("fails %d onerror %d", fails, n.Load())
}
