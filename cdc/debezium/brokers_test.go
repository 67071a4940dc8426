package debezium

import (
	"context"
	"strings"
	"testing"
)

// TestBrokersNotShown: a broker written with a password (as a URL, or
// with user information) is refused without being shown. The Kafka
// client took "user:PASSWORD@host:9092" whole for a host name, and its
// lookup error, quoting it, reached kura cdc's status line through
// Backlog; a password after the colon was quoted as a port that did not
// parse.
func TestBrokersNotShown(t *testing.T) {
	const secret = "Sekr1t"
	apply := ApplierFunc(func(context.Context, []Event) error { return nil })
	for _, b := range []string{"user:" + secret + "@127.0.0.1:9092", "SASL_SSL://user:" + secret + "@127.0.0.1:9092",
		secret + "@localhost:9092", "127.0.0.1:" + secret, "127.0.0.1:9092 " + secret, ":9092"} {
		c, err := NewConsumer(Config{Brokers: []string{"127.0.0.1:9092", b}, Group: "g", Topics: []string{"t"}, Applier: apply})
		if err == nil {
			c.Close()
			t.Errorf("broker %q accepted", b)
			continue
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "broker 2 of 2") {
			t.Errorf("broker %q: %v", b, err)
		}
	}
	for _, b := range []string{"127.0.0.1:9092", "localhost", "[::1]:9092", "kafka-0.kafka.svc:19092"} {
		c, err := NewConsumer(Config{Brokers: []string{b}, Group: "g", Topics: []string{"t"}, Applier: apply})
		if err != nil {
			t.Errorf("broker %q: %v", b, err)
			continue
		}
		c.Close()
	}
}
