// Package telemetry names the daemon's trace spans and their attributes
// (docs/operations.md, "Traces"). Spans go to the global tracer provider,
// which package sdk/tracing sets up when OTEL_EXPORTER_OTLP_ENDPOINT is set;
// otherwise it is OpenTelemetry's no-op provider and a span costs a few
// nanoseconds.
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

	"github.com/verifierd/verifierd/sdk/tracing"
)

// The span names.
const (
	SpanBegin         = "session.begin"
	SpanVerify        = "session.verify"
	SpanConfigure     = "session.configure"
	SpanCaptureBefore = "capture.before"
	SpanCaptureAfter  = "capture.after"
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

// Start begins span name under ctx's span.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// Fail marks span failed with kind (a fixed word such as "refused" or
// "unreachable"), never an error's text: that may quote a value.
func Fail(span trace.Span, kind string) {
	span.SetStatus(codes.Error, kind)
	span.SetAttributes(KeyErrorKind.String(kind))
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
