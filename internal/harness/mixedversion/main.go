// Command mixedversion is one process of a rolling upgrade: it reads
// through a kura Cache over a shared key space on a Redis server and
// prints how many times its loader ran. scripts/mixed-version.sh builds it
// twice, from the release before the compact envelope (an old reader) and
// from this tree (a new process, with the compact write switch off or
// on), and runs both side by side (BENCHMARKS.md, "Small values").
//
// The source compiles against both releases: the write switch is set by
// reflection, so an old tree without codec.Options.Compact builds it too.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store/redisstore"
)

// Stock is the cached record ({42, "apple", 3}).
type Stock struct {
	ID   int64  `msgpack:"id"`
	Name string `msgpack:"name"`
	Qty  int    `msgpack:"qty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "redis address")
	keys := flag.Int("keys", 200, "keys in the shared key space")
	rounds := flag.Int("rounds", 20, "reads of every key")
	compact := flag.Bool("compact", false, "write the compact envelope (new release only)")
	start := flag.Int64("start", 0, "Unix milliseconds to start at (a barrier between processes)")
	name := flag.String("name", "proc", "label in the output")
	flag.Parse()
	ctx := context.Background()
	var opts codec.Options
	if *compact {
		f := reflect.ValueOf(&opts).Elem().FieldByName("Compact")
		if !f.IsValid() {
			fmt.Fprintln(os.Stderr, "mixedversion: this release has no codec.Options.Compact")
			os.Exit(2)
		}
		f.SetBool(true)
	}
	cd, err := codec.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	st, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{*addr}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := kura.New[Stock](st, kura.Options{Codec: cd})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if d := time.Until(time.UnixMilli(*start)); d > 0 {
		time.Sleep(d)
	}
	loads := 0
	for r := 0; r < *rounds; r++ {
		for i := 0; i < *keys; i++ {
			k := fmt.Sprintf("mv:%d", (i*7+r*13)%*keys)
			_, err := c.Fetch(ctx, k, time.Hour, func(context.Context, string) (Stock, error) {
				loads++
				return Stock{ID: int64(i), Name: "apple", Qty: 3}, nil
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	out, _ := json.Marshal(map[string]any{"name": *name, "compact": *compact, "fetches": *keys * *rounds, "loader_calls": loads})
	fmt.Println(string(out))
}
