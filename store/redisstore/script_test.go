package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestFillSendsNoScriptLoad: a Fill or Release is one EVALSHA per key and
// nothing else (rueidis's ExecMulti sent SCRIPT LOAD to every node before
// each batch: a round trip more per fill, and a script compile on the
// server), and still works on a server that does not have the script
// (SCRIPT FLUSH, a fresh or promoted node: EVAL once, then EVALSHA again),
// on Redis and on a Cluster.
func TestFillSendsNoScriptLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	cl := servertest.RedisCluster(t)
	for _, tc := range []struct {
		name, url string
		nodes     []*servers.Redis
	}{
		{"redis", r.URL(), []*servers.Redis{r}},
		{"cluster", cl.URL(), cl.Nodes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, tc.url, redisstore.Options{})
			ctx := context.Background()
			opts := store.LeaseOptions{TTL: time.Minute, Placeholder: []byte("ph")}
			keys := make([]string, 12)
			for i := range keys {
				keys[i] = fmt.Sprintf("script:%s:%d", tc.name, i)
			}
			cmds := []string{"script|load", "evalsha", "eval"}
			// The first round meets a server without the scripts, the
			// third one that just flushed them.
			for round, flush := range []bool{false, false, true, false} {
				if flush {
					for _, n := range tc.nodes {
						if _, err := n.Do(ctx, "SCRIPT", "FLUSH"); err != nil {
							t.Fatal(err)
						}
					}
				}
				res, err := s.LeaseGet(ctx, keys, opts)
				if err != nil {
					t.Fatal(err)
				}
				fills := make([]store.Fill, 0, len(keys))
				var rel []store.Lease
				for i, r := range res {
					if !r.Won {
						t.Fatalf("round %d: no lease on %s", round, keys[i])
					}
					if i%2 == 0 {
						fills = append(fills, store.Fill{Lease: r.Lease, Value: []byte("v"), TTL: time.Minute})
					} else {
						rel = append(rel, r.Lease)
					}
				}
				before := calls(t, tc.nodes, cmds...)
				if err := s.Fill(ctx, fills); err != nil {
					t.Fatalf("round %d: Fill: %v", round, err)
				}
				if err := s.Release(ctx, rel); err != nil {
					t.Fatalf("round %d: Release: %v", round, err)
				}
				d := delta(calls(t, tc.nodes, cmds...), before)
				n := int64(len(keys))
				unloaded := flush || round == 0
				switch {
				case d["script|load"] != 0:
					t.Errorf("round %d: %d SCRIPT LOADs for %d fills and releases", round, d["script|load"], n)
				case !unloaded && (d["evalsha"] != n || d["eval"] != 0):
					t.Errorf("round %d: %v; want %d EVALSHA and no EVAL", round, d, n)
				case unloaded && (d["evalsha"] != n || d["eval"] == 0 || d["eval"] > n):
					t.Errorf("round %d, the scripts not loaded: %v; want %d EVALSHA, then EVAL for those the server lacked", round, d, n)
				}
				for i, k := range keys {
					v, err := s.Get(ctx, k)
					switch {
					case i%2 == 0 && (err != nil || string(v) != "v"):
						t.Fatalf("round %d: %s = %q, %v: want the fill", round, k, v, err)
					case i%2 == 1 && !errors.Is(err, store.ErrNotFound):
						t.Fatalf("round %d: %s = %q, %v: want it released", round, k, v, err)
					}
				}
				if err := s.DeleteMany(ctx, keys); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
