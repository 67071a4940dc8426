package kuraotel_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kuracache/kura/internal/harness/proctest"
)

func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m, proctest.Workers{"hold": holdWorker}))
}

// recorder is an SDK TracerProvider sampling everything, with the SDK's
// in-memory exporter behind a synchronous processor.
type recorder struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newRecorder(t testing.TB) *recorder {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &recorder{tp: tp, exp: exp}
}

// request starts the application's span (the parent of kura's).
func (r *recorder) request(ctx context.Context) (context.Context, trace.Span) {
	return r.tp.Tracer("app").Start(ctx, "request")
}

func (r *recorder) spans() tracetest.SpanStubs { return r.exp.GetSpans() }

// named returns the ended spans called name.
func (r *recorder) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range r.spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// waitFor waits until a span called name has ended.
func (r *recorder) waitFor(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if s := r.named(name); len(s) > 0 {
			return s[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s span ended; spans: %s", name, tree(r.spans(), ""))
	return tracetest.SpanStub{}
}

// tree prints the spans under the span named root ("" = every root) as
// an indented outline, children in start order: the shape
// docs/telemetry.md promises.
func tree(spans tracetest.SpanStubs, root string) string {
	kids := map[trace.SpanID][]tracetest.SpanStub{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		p := s.Parent.SpanID()
		if s.Parent.IsValid() && ids[p] {
			kids[p] = append(kids[p], s)
		} else if root == "" || s.Name == root {
			roots = append(roots, s)
		}
	}
	if root != "" {
		roots = nil
		for _, s := range spans {
			if s.Name == root {
				roots = append(roots, s)
			}
		}
	}
	var b strings.Builder
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), s.Name)
		k := kids[s.SpanContext.SpanID()]
		slices.SortStableFunc(k, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		for _, c := range k {
			walk(c, depth+1)
		}
	}
	slices.SortStableFunc(roots, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// attr returns the attribute key of s, and whether it is there.
func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func mustAttr(t *testing.T, s tracetest.SpanStub, key string) attribute.Value {
	t.Helper()
	v, ok := attr(s, key)
	if !ok {
		t.Fatalf("span %s has no %s: %v", s.Name, key, s.Attributes)
	}
	return v
}

// childrenOf returns the spans whose parent is s.
func childrenOf(spans tracetest.SpanStubs, s tracetest.SpanStub) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, c := range spans {
		if c.Parent.SpanID() == s.SpanContext.SpanID() {
			out = append(out, c)
		}
	}
	return out
}
