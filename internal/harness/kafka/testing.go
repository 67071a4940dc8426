package kafka

import (
	"context"
	"errors"
	"os"
	"testing"
)

// Required reports whether a missing java or mvn must fail a test rather than skip it: under
// CI=true or KURA_REQUIRE_SERVERS=1 (what make test sets), as for the other servers.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("KURA_REQUIRE_SERVERS") == "1"
}

// Soak reports whether the full-size runs are asked for (KURA_SOAK set, as make soak does).
func Soak() bool { return os.Getenv("KURA_SOAK") != "" }

func handle(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNotInstalled) && !Required() {
		tb.Skipf("skipping: %v", err)
	}
	tb.Fatalf("kafka harness: %v", err)
}

// BrokerT starts a private broker for the test and stops it when the test ends. A missing java
// or mvn skips the test, except when Required; -short skips it too.
func BrokerT(tb testing.TB, cfg BrokerConfig) *Broker {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a Kafka broker (a JVM); -short skips it")
	}
	b, err := StartBroker(context.Background(), cfg)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(b.Stop)
	tb.Logf("kafka broker on %s started in %v (mvn: fresh=%v, took %v)", b.Addr, b.StartTook, b.Build.Fresh, b.Build.Took)
	return b
}

// EngineT starts a Debezium engine for the test and stops it when the test ends.
func EngineT(tb testing.TB, cfg EngineConfig) *Engine {
	tb.Helper()
	e, err := StartEngine(context.Background(), cfg)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(e.Stop)
	tb.Logf("debezium engine streaming after %v", e.StartTook)
	return e
}
