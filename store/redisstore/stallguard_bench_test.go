package redisstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// nopClient answers every command at once with an empty reply, so that a
// benchmark over it measures what wraps it.
type nopClient struct{ rueidis.Client }

func (nopClient) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	return rueidis.RedisResult{}
}

func (nopClient) DoMulti(_ context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	return make([]rueidis.RedisResult, len(multi))
}

// BenchmarkStallGuard is the stall guard's own cost per call, guard
// against no guard in the same run: over a client that answers at once
// (the guard's bookkeeping alone, one goroutine and all of them), and
// over a real redis-server GET (the guard against a round trip). "cluster"
// is clusterGuard (a hash slot's count through the slot map); a pipeline
// of 8 MGETs over 3 masters is its DoMulti.
func BenchmarkStallGuard(b *testing.B) {
	ctx := context.Background()
	cmdsOf := func(c rueidis.Client, n int) []rueidis.Completed {
		out := make([]rueidis.Completed, n)
		for i := range out {
			out[i] = c.B().Get().Key(fmt.Sprintf("k%d", i)).Build().Pin()
		}
		return out
	}
	// A slot map of three masters, as CLUSTER SLOTS gives.
	m := &slotMap{}
	for i := range m.addr {
		m.addr[i] = fmt.Sprintf("127.0.0.1:%d", 7000+3*i/numSlots)
	}
	type subject struct {
		name string
		c    rueidis.Client
	}
	inner := nopClient{}
	rs := servertest.Redis(b, servers.RedisConfig{})
	real, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rs.Addr}, DisableCache: true, PipelineMultiplex: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(real.Close)
	if err := real.Do(ctx, real.B().Set().Key("k0").Value("v").Build()).Error(); err != nil {
		b.Fatal(err)
	}
	// The nop client has no builder: commands come from the real one.
	cmds := cmdsOf(real, 8)
	newCluster := func(c rueidis.Client) rueidis.Client {
		g := &clusterGuard{Client: c}
		g.update(m)
		return g
	}
	for _, s := range []struct {
		base  string
		inner rueidis.Client
	}{{"nop", inner}, {"redis", real}} {
		subjects := []subject{
			{"off", s.inner},
			{"standalone", &stallGuard{Client: s.inner}},
			{"standalone+replica-route", &stallGuard{Client: s.inner, replica: func(rueidis.Completed) bool { return false }}},
		}
		if s.base == "nop" {
			subjects = append(subjects, subject{"cluster", newCluster(s.inner)})
		}
		for _, sub := range subjects {
			b.Run(s.base+"/Do/"+sub.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := sub.c.Do(ctx, cmds[0]).NonRedisError(); err != nil {
						b.Fatal(err)
					}
				}
			})
			if s.base != "nop" {
				continue
			}
			b.Run(s.base+"/Do-parallel/"+sub.name, func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						_ = sub.c.Do(ctx, cmds[0])
					}
				})
			})
			b.Run(s.base+"/DoMulti8/"+sub.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = sub.c.DoMulti(ctx, cmds...)
				}
			})
		}
	}
}
