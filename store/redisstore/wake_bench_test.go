package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// serverCPU is redis-server's CPU time so far.
func serverCPU(tb testing.TB, r *servers.Redis) time.Duration {
	d, err := r.CPU(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// nudge wakes a waiter without blocking the connection's reader.
func nudge(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// BenchmarkLeaseWakeServerCPU: what waking lease waiters costs the
// server, per invalidation cycle, for each way a waiter can learn that a
// holder filled the key: 4 waiters ("processes", a connection each) wait
// while a holder takes the lease, holds it 5 ms and fills; then the key
// is deleted (the invalidation) and the cycle starts again.
//
//   - tracking: the lease path's push client (CLIENT TRACKING, default
//     mode): each waiter's read arms a report of the next change.
//   - keyspace: keyspace notifications (notify-keyspace-events K$g), each
//     waiter subscribed to its key's channel for the whole run (the
//     cheapest way to use them: no SUBSCRIBE per wait).
//   - poll: the read repeated at 1 ms doubling to 20 ms (kura before).
//
// The figure is the server's CPU time per cycle (server-cpu-us/cycle);
// set-us/op is the CPU time of one plain SET from another client while the
// mechanism is configured: keyspace notifications tax every write on the
// server, tracking only the writes of keys someone reads through it.
func BenchmarkLeaseWakeServerCPU(b *testing.B) {
	for _, mode := range []string{"tracking", "keyspace", "poll"} {
		b.Run(mode, func(b *testing.B) {
			r := servertest.Redis(b, servers.RedisConfig{})
			ctx := context.Background()
			holder, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer holder.Close()
			key := "wake:hot"
			const waiters = 4
			woke := make(chan struct{}, 64)
			var wait func(i int) // waiter i: block until the fill is seen
			switch mode {
			case "tracking":
				ws := make([]*redisstore.Store, waiters)
				chans := make([]chan struct{}, waiters)
				for i := range ws {
					s, err := redisstore.NewFromURL(ctx, r.URL(), redisstore.Options{})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					ch := make(chan struct{}, 1)
					defer s.WatchLeases(func([]string) { nudge(ch) })()
					ws[i], chans[i] = s, ch
				}
				opts := store.LeaseOptions{TTL: time.Second, Placeholder: []byte("ph")}
				wait = func(i int) {
					for {
						res, watched, err := ws[i].WatchedLeaseGet(ctx, []string{key}, opts)
						if err != nil {
							b.Error(err)
							return
						}
						if res[0].Value != nil && string(res[0].Value) != "ph" {
							return
						}
						if !watched {
							time.Sleep(time.Millisecond)
							continue
						}
						<-chans[i]
					}
				}
			case "keyspace":
				if _, err := r.Do(ctx, "CONFIG", "SET", "notify-keyspace-events", "K$g"); err != nil {
					b.Fatal(err)
				}
				cs := make([]rueidis.Client, waiters)
				chans := make([]chan struct{}, waiters)
				for i := range cs {
					c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					ch := make(chan struct{}, 1)
					go c.Receive(ctx, c.B().Subscribe().Channel("__keyspace@0__:"+key).Build(), func(rueidis.PubSubMessage) { nudge(ch) })
					cs[i], chans[i] = c, ch
				}
				time.Sleep(100 * time.Millisecond) // subscribed
				wait = func(i int) {
					for {
						v, err := cs[i].Do(ctx, cs[i].B().Get().Key(key).Build()).ToString()
						if err == nil && v != "ph" {
							return
						}
						<-chans[i]
					}
				}
			case "poll":
				cs := make([]rueidis.Client, waiters)
				for i := range cs {
					c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					cs[i] = c
				}
				wait = func(i int) {
					for d := time.Millisecond; ; d = min(2*d, 20*time.Millisecond) {
						v, err := cs[i].Do(ctx, cs[i].B().Get().Key(key).Build()).ToString()
						if err == nil && v != "ph" {
							return
						}
						time.Sleep(d/2 + rand.N(d/2))
					}
				}
			}
			cycle := func() {
				if err := holder.Do(ctx, holder.B().Set().Key(key).Value("ph").Nx().PxMilliseconds(1000).Build()).Error(); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < waiters; i++ {
					go func() { wait(i); woke <- struct{}{} }()
				}
				time.Sleep(5 * time.Millisecond) // the load
				if err := holder.Do(ctx, holder.B().Set().Key(key).Value("value").Build()).Error(); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < waiters; i++ {
					<-woke
				}
				if err := holder.Do(ctx, holder.B().Del().Key(key).Build()).Error(); err != nil {
					b.Fatal(err)
				}
			}
			cycle() // connect, subscribe, open the push clients
			cycle()
			cpu0 := serverCPU(b, r)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cycle()
			}
			b.StopTimer()
			b.ReportMetric(float64((serverCPU(b, r)-cpu0).Microseconds())/float64(b.N), "server-cpu-us/cycle")
			// The tax on other clients' writes: 20,000 SETs of other keys.
			const sets = 20000
			cmds := make(rueidis.Commands, 0, 100)
			cpu0 = serverCPU(b, r)
			for i := 0; i < sets; i += 100 {
				cmds = cmds[:0]
				for j := i; j < i+100; j++ {
					cmds = append(cmds, holder.B().Set().Key("other:"+strconv.Itoa(j)).Value("v").Build())
				}
				for _, res := range holder.DoMulti(ctx, cmds...) {
					if err := res.Error(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64((serverCPU(b, r)-cpu0).Microseconds())/sets, "set-us/op")
		})
	}
}
