package debezium_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/cdcconf"
	"github.com/kuracache/kura/cdc/debezium"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/store"
)

// TestConfigSelectsDebezium: kura cdc's JSON config with source.kind "debezium" streams the
// fixtures from Kafka into a real memcached through cdcconf.Open and cdc.Run.
func TestConfigSelectsDebezium(t *testing.T) {
	b := debezium.SharedBroker(t)
	topic, group := "config-source", "g-config"
	n := debezium.ProduceFixtures(t, b, topic, "postgres15-json.jsonl")
	c := cdctest.StartCaches(t)
	conf, err := cdcconf.Parse(fmt.Appendf(nil, `{"source": {"kind": "debezium", "brokers": [%q], "group": %q, "topics": [%q], "session_timeout_ms": 1500},
		"targets": [{"name": "mc", "url": "memcached://%s"}],
		"tables": [{"table": "public.products", "keys": [{"prefix": "product:", "column": "id"}, {"template": "products_by_category:{category}"}]}]}`,
		b.Addr, group, topic, c.Memcached.Addr))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"product:1", "product:2", "product:3", "product:10", "products_by_category:tea", "products_by_category:coffee"}
	for _, k := range keys {
		if err := c.MS.Set(context.Background(), k, []byte("cached"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts, src, err := conf.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer cdcconf.CloseTargets(opts.Targets)
	if _, ok := opts.Source.(*debezium.KafkaSource); !ok {
		t.Fatalf("source %T, want *debezium.KafkaSource", opts.Source)
	}
	done := make(chan error, 1)
	go func() { done <- cdc.Run(ctx, opts) }()
	deadline := time.Now().Add(60 * time.Second)
	for debezium.Committed(t, b, group, topic) != int64(n) {
		if time.Now().After(deadline) {
			t.Fatal("offsets not all committed within 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, err := c.MS.Get(context.Background(), k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want not found after its offset was committed", k, err)
		}
	}
}
