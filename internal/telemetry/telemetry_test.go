package telemetry

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

type plain struct{}

func (plain) ServeHTTP(http.ResponseWriter, *http.Request) {}

// With no provider set up (no OTEL_EXPORTER_OTLP_ENDPOINT), a span does
// not record and the HTTP handler is the one given.
func TestNoopWithoutProvider(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	ctx, span := Start(context.Background(), SpanJudge, KeyKind.String("sql"))
	defer span.End()
	if span.IsRecording() {
		t.Error("a span records without a tracer provider")
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("a no-op span has a valid span context")
	}
	if got := HTTP(plain{}); got != http.Handler(plain{}) {
		t.Errorf("HTTP wrapped the handler (%T) without an endpoint", got)
	}
}

// BenchmarkSpanNoop is the cost of one session span when traces are off:
// Start with two attributes, SetAttributes, End.
func BenchmarkSpanNoop(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := Start(ctx, SpanCaptureAfter, KeyGroup.Int(0), KeyKind.String("sql"))
		Set(span, KeyRecords.Int(1), KeyReachable.Bool(true))
		span.End()
	}
}
