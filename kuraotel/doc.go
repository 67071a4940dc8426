// Package kuraotel is kura's OpenTelemetry instrumentation: spans for
// every Cache call and every step of a read (NewTracer, set as
// kura.Options.Tracer), spans for the store's round trips, one per server
// batch (WrapStore), and the Cache's Stats and node health as metrics
// through the OpenTelemetry meter (RegisterMetrics).
//
// The span tree, the attribute keys and the semantic-conventions version
// (v1.43.0) are a stable interface, written down in docs/telemetry.md.
//
// Spans are started only inside a recording span of the caller (the
// request's span), unless Options.RootSpans: a Cache call in a request
// that is not sampled costs no allocation. Keys are not recorded unless
// Options.Keys says how; cached values and error messages (which name
// keys) never are.
//
// kuraotel is its own Go module (github.com/kuracache/kura/kuraotel), so
// that the OpenTelemetry SDK is not a dependency of kura itself.
package kuraotel
