package loadgen

import (
	"context"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/storeurl"
)

// TestRedisRing loads 3 standalone shards through a redis+ring:// target
// (MGET split per shard, as kura's store sends it): every key is written
// to and read from the shard kura's redisring store finds it on, for the
// default ring and for one chosen in the URL.
func TestRedisRing(t *testing.T) {
	_, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
	for _, query := range []string{"", "?ring=ketama&weights=1,2,1"} {
		t.Run("ring"+query, func(t *testing.T) {
			target := "redis+ring://" + strings.Join(addrs, ",") + query
			prefix := "lg" + strings.NewReplacer("?", "", "=", "", "&", "", ",", "").Replace(query) + ":"
			res := mustRun(t, Config{Target: target, Command: CmdMGet, MultiKeys: 8, Connections: 2, Requests: 500,
				Prefill: true, Keys: 1000, KeyPrefix: prefix})
			if res.Errors != 0 || res.Hits != 8*500 || res.Nodes != 3 || res.Topology != "ring" {
				t.Fatalf("errors %d hits %d nodes %d topology %s: %v", res.Errors, res.Hits, res.Nodes, res.Topology, res.ErrorSamples)
			}
			if !strings.HasPrefix(res.Target, "redis+ring://") {
				t.Errorf("result names the target %q", res.Target)
			}
			for _, n := range res.Server.PerNode {
				if n.Commands == 0 {
					t.Errorf("shard %s took no command", n.Addr)
				}
			}
			// The bench put every key where a kura application looks.
			st, err := storeurl.Open(context.Background(), target)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for k := range uint64(1000) {
				key := string(appendKey(nil, prefix, k))
				if _, err := st.Get(context.Background(), key); err != nil {
					t.Fatalf("kura's redisring store: Get(%q): %v", key, err)
				}
			}
		})
	}
	if _, err := Run(context.Background(), Config{Target: "redis+ring://" + strings.Join(addrs, ","), Cluster: true, Requests: 10}); err == nil ||
		!strings.Contains(err.Error(), "redis+ring") {
		t.Errorf("--cluster with a ring target: err = %v, want it refused", err)
	}
}
