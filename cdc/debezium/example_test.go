package debezium_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/kuracache/kura/cdc/debezium"
)

// A change event as Debezium's PostgreSQL connector writes it to Kafka (schemas off), decoded.
func ExampleDecode() {
	key := []byte(`{"id":1}`)
	value := []byte(`{"before":{"id":1,"category":"tea","price_cents":1200},` +
		`"after":{"id":1,"category":"coffee","price_cents":1300},` +
		`"source":{"connector":"postgresql","name":"shop","db":"postgres","schema":"public","table":"products","ts_ms":1795925066993,"snapshot":"false","txId":735,"lsn":22225488},` +
		`"op":"u","ts_ms":1795925067137}`)
	m, err := debezium.Decode(key, value)
	if err != nil {
		log.Fatal(err)
	}
	c := m.Change
	id, _ := m.Key.Text("id")
	old, _ := c.Before.Text("category")
	now, _ := c.After.Text("category")
	fmt.Println(m.Kind, c.Op, c.Source.QualifiedTable(), "id", id, "category", old, "->", now)
	// Output: change u public.products id 1 category tea -> coffee
}

// A consumer group that commits offsets only after the Applier's invalidations landed. Run it
// as several processes with the same Group to share the topics' partitions.
func ExampleConsumer() {
	c, err := debezium.NewConsumer(debezium.Config{
		Brokers:    []string{"127.0.0.1:9092"},
		Group:      "kura-cache-eu",
		Topics:     []string{`^shop\.public\.(products|orders)$`},
		TopicRegex: true,
		Applier: debezium.ApplierFunc(func(ctx context.Context, batch []debezium.Event) error {
			for _, e := range batch {
				if e.Kind != debezium.KindChange {
					continue // tombstones, transaction records, heartbeats
				}
				// map e.Change's before and after rows to cache keys and invalidate them on
				// every target; return an error if any did not land
			}
			return nil
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := c.Run(ctx); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
