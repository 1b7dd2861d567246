// Package telemetry names the daemon's trace spans and their attributes
// (docs/operations.md, "Traces"). Spans go to the global tracer provider,
// which package sdk/unstable/host/tracing sets up when OTEL_EXPORTER_OTLP_ENDPOINT is set;
// otherwise Start returns a no-op span at once (about 40 ns, no allocation:
// BenchmarkSpanNoop).
//
// Attributes describe the work, never its data: adapter kinds, tiers,
// effect kinds and indices, counts, verdicts and outcomes. No run parameter
// value, record, reason text, error text or secret is ever put on a span.
package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/verifierd/verifierd/sdk/unstable/host/tracing"
)

// The span names.
const (
	SpanBegin         = "session.begin"
	SpanVerify        = "session.verify"
	SpanConfigure     = "session.configure"
	SpanCaptureBefore = "capture.before"
	SpanCaptureAfter  = "capture.after"
	SpanCaptureCensus = "capture.census"
	SpanGroup         = "verify.group"
	SpanJudge         = "judge"
	SpanHook          = "adapter.verdict_hook"
	SpanCompensate    = "compensate"
	SpanStoreCreate   = "store.create_session"
	SpanStoreRead     = "store.read_session"
	SpanStoreBaseline = "store.read_baseline"
	SpanStoreFinish   = "store.finish_session"
)

// The attribute keys.
const (
	KeySession     = attribute.Key("verifierd.session.id")
	KeyDeployment  = attribute.Key("verifierd.deployment")
	KeyOutcome     = attribute.Key("verifierd.outcome")
	KeyReplay      = attribute.Key("verifierd.replay")
	KeyKind        = attribute.Key("verifierd.adapter.kind")
	KeyTier        = attribute.Key("verifierd.adapter.tier")
	KeyGroup       = attribute.Key("verifierd.capture.group")
	KeyRecords     = attribute.Key("verifierd.capture.records")
	KeyReachable   = attribute.Key("verifierd.capture.reachable")
	KeyEffectIndex = attribute.Key("verifierd.effect.index")
	KeyEffectKind  = attribute.Key("verifierd.effect.kind")
	KeyEffects     = attribute.Key("verifierd.effect.indices")
	KeyEffectKinds = attribute.Key("verifierd.effect.kinds")
	KeyVerdicts    = attribute.Key("verifierd.verdicts")
	KeyVerdict     = attribute.Key("verifierd.verdict")
	KeyDemoted     = attribute.Key("verifierd.hook.demoted")
	KeyHookPresent = attribute.Key("verifierd.hook.present")
	KeyDeleted     = attribute.Key("verifierd.compensate.deleted")
	KeyErrorKind   = attribute.Key("verifierd.error.kind")
	KeyCandidates  = attribute.Key("verifierd.candidates")
)

// tracer follows the global provider, also one set after this package
// was initialised.
var tracer = otel.Tracer("github.com/verifierd/verifierd")

// Start begins span name under ctx's span. When no exporting provider is
// set up (tracing.Active) it returns ctx and a no-op span straight away.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !tracing.Active() {
		return ctx, noopSpan
	}
	// A copy, so that the caller's attrs do not escape: off, they stay on
	// its stack.
	return tracer.Start(ctx, name, trace.WithAttributes(append([]attribute.KeyValue(nil), attrs...)...))
}

// Set adds attrs to span when it records; like Start, it leaves the
// caller's attrs on its stack when it does not.
func Set(span trace.Span, attrs ...attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(append([]attribute.KeyValue(nil), attrs...)...)
	}
}

// On reports whether spans are exported (tracing.Active): callers skip
// building attributes that cost more than a constant.
func On() bool { return tracing.Active() }

var noopSpan trace.Span = noop.Span{}

// Fail marks span failed with kind (a fixed word such as "refused" or
// "unreachable"), never an error's text: that may quote a value.
func Fail(span trace.Span, kind string) {
	span.SetStatus(codes.Error, kind)
	Set(span, KeyErrorKind.String(kind))
}

// HTTP wraps the daemon's HTTP listener so that each request is a span
// (under the caller's trace context, W3C traceparent), when traces are on;
// otherwise it returns h itself.
func HTTP(h http.Handler) http.Handler {
	if !tracing.Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, "verifierd.http",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
}
