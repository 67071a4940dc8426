package kura

import (
	"context"

	"github.com/kuracache/kura/observe"
)

// traced runs fn, the body of a Cache call, under the span of step when
// tr records it; with a nil tr, or a span tr does not record, fn runs on
// ctx as is (no allocation: BENCHMARKS.md, "OpenTelemetry").
func traced[T any](ctx context.Context, tr observe.Tracer, step observe.Step, key string, n int, fn func(context.Context) (T, error)) (v T, err error) {
	if tr == nil {
		return fn(ctx)
	}
	ctx, sp := tr.Start(ctx, step, key, n)
	if sp == nil {
		return fn(ctx)
	}
	defer observe.Finish(sp, &err)
	return fn(ctx)
}

// traced0 is traced for a call with no result but its error.
func traced0(ctx context.Context, tr observe.Tracer, step observe.Step, key string, n int, fn func(context.Context) error) error {
	_, err := traced(ctx, tr, step, key, n, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

func first(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
