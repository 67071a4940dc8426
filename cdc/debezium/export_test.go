package debezium

import (
	"testing"

	"github.com/kuracache/kura/internal/harness/kafka"
)

// SharedBroker is the package's one broker, for the external tests.
func SharedBroker(t *testing.T) *kafka.Broker { return broker(t) }

// ProduceFixtures is produceFixtures, for the external tests.
func ProduceFixtures(t *testing.T, b *kafka.Broker, topic, file string) int {
	return produceFixtures(t, b, topic, file)
}

// Committed is the group's committed offsets on topic, summed.
func Committed(t *testing.T, b *kafka.Broker, group, topic string) int64 {
	return total(committed(t, b, group, topic))
}
