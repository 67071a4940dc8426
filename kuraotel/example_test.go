package kuraotel_test

import (
	"context"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/kuraotel"
	"github.com/kuracache/kura/store/memstore"
)

// A Cache with spans: the Tracer for the read path's steps, the store
// wrapped for its round trips. The request's span is the parent: kura
// records nothing in a request that is not sampled.
func ExampleNewTracer() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())

	ms, _ := memstore.New(memstore.Options{})
	cache, _ := kura.New[string](kuraotel.WrapStore(ms, kuraotel.StoreOptions{TracerProvider: tp}),
		kura.Options{Tracer: kuraotel.NewTracer(kuraotel.Options{TracerProvider: tp})})

	ctx, req := tp.Tracer("app").Start(context.Background(), "GET /users/1")
	_, _ = cache.Fetch(ctx, "user:1", time.Minute, func(ctx context.Context, key string) (string, error) {
		return "ada", nil // a database query here nests under kura.load
	})
	req.End()
	fmt.Print(tree(exp.GetSpans(), "GET /users/1"))
	// Output:
	// GET /users/1
	//   kura.Fetch
	//     kura.lookup
	//       Get
	//     kura.load
	//     kura.fill
	//       Set
}
