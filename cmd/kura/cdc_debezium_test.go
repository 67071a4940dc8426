package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kuracache/kura/internal/harness/kafka"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestCDCUntilCaughtUpDebezium: kura cdc --until-caught-up with the Debezium source exits on
// its own once the group committed past the topic's end read at the start, with the change
// events there applied (their keys gone from Redis, over two partitions) and a key with no
// event still cached. It starts a Kafka broker (a JVM), so it runs under KURA_SOAK=1 (make
// soak) or KURA_DEBEZIUM=1.
func TestCDCUntilCaughtUpDebezium(t *testing.T) {
	if !kafka.Soak() && os.Getenv("KURA_DEBEZIUM") == "" {
		t.Skip("starts a Kafka broker: runs under KURA_SOAK=1 (make soak) or KURA_DEBEZIUM=1")
	}
	b := kafka.BrokerT(t, kafka.BrokerConfig{})
	r := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	rs, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{r.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	const topic, events = "dbz.public.items", 50
	for id := 1; id <= events+1; id++ {
		if err := rs.Set(ctx, fmt.Sprintf("item:%d", id), []byte("cached"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.CreateTopic(ctx, topic, 2); err != nil {
		t.Fatal(err)
	}
	cl, err := b.Client(kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ev := `{"before":{"id":%[1]d,"name":"item %[1]d","qty":1},"after":{"id":%[1]d,"name":"item %[1]d","qty":2},"source":{"connector":"postgresql","name":"dbz","db":"postgres","schema":"public","table":"items","ts_ms":%[2]d},"op":"u","ts_ms":%[2]d}`
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for id := from; id <= to; id++ {
			now := time.Now().UnixMilli()
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, `{"id":%d}`, id), Value: fmt.Appendf(nil, ev, id, now)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(1, events)
	conf := fmt.Sprintf(`{"source": {"kind": "debezium", "brokers": [%q], "group": "g-until", "topics": [%q], "session_timeout_ms": 1500},
 "targets": [{"name": "redis", "url": "redis://%s"}],
 "tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"}]}]}`, b.Addr, topic, r.Addr)
	path := filepath.Join(t.TempDir(), "cdc.json")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	const limit = 90 * time.Second
	start := time.Now()
	out := runAllWithin(t, limit, "cdc", "--config", path, "--until-caught-up", "--status-every", "1s")
	took := time.Since(start)
	if took > limit-5*time.Second || !strings.Contains(out, "caught up: the group committed past") {
		t.Fatalf("kura cdc --until-caught-up did not exit on its own (%v):\n%s", took.Round(time.Millisecond), out)
	}
	for id := 1; id <= events; id++ {
		if _, err := rs.Get(ctx, fmt.Sprintf("item:%d", id)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("item:%d still cached after --until-caught-up exited (%v):\n%s", id, err, out)
		}
	}
	if _, err := rs.Get(ctx, fmt.Sprintf("item:%d", events+1)); err != nil {
		t.Fatalf("item:%d, with no event, is gone (%v)", events+1, err)
	}
	t.Logf("exited after %v: %s", took.Round(time.Millisecond), lastLine(out))
}

// lastLine is out's last non-empty line.
func lastLine(out string) string {
	ls := strings.Split(strings.TrimSpace(out), "\n")
	return ls[len(ls)-1]
}
