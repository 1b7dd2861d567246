// Package tracing switches OpenTelemetry traces on for a verifierd process,
// the daemon or an adapter, when the operator asks for them with
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and
// carries the trace context over the plugin connection so that an adapter's
// spans join the session's trace.
//
// An adapter author does not import it: plugin.Serve sets it up in the
// adapter's process. It sits under package host, the daemon's end, with
// the rest of what the daemon and the SDK's own packages share.
//
// Without either variable nothing is set up: the global tracer provider
// stays OpenTelemetry's no-op one, no gRPC stats handler is installed and
// no exporter runs.
//
// Spans are exported over OTLP http/protobuf with a batch processor; the
// exporter and the processor read the standard OTEL_EXPORTER_OTLP_* and
// OTEL_BSP_* variables themselves.
//
// Unstable: this package is under sdk/unstable/, the daemon's own support
// code that the SDK module carries because the SDK's packages need it too.
// It is not covered by the SDK's compatibility promise, is left out of the
// API snapshot (api/sdk.txt), and may change or go away in any release;
// adapter authors do not import it.
package tracing

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// The variables that switch traces on. Either one is enough.
const (
	EndpointEnv       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	TracesEndpointEnv = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// PassedEnv lists the variables the daemon hands to the adapter processes it
// starts (which otherwise get an empty environment): where and how to
// export, and the batching and sampling knobs. OTEL_EXPORTER_OTLP_HEADERS
// (and its _TRACES_ form) is deliberately not among them: it may carry a
// collector's credentials, and an adapter may be a third party's code.
// Export to a local collector that needs no headers, or one that adds them.
var PassedEnv = []string{
	EndpointEnv, TracesEndpointEnv,
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT",
	"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
}

// Enabled reports whether this process's environment asks for traces.
func Enabled() bool {
	return os.Getenv(EndpointEnv) != "" || os.Getenv(TracesEndpointEnv) != ""
}

// Setup installs a tracer provider exporting over OTLP as service, and the
// W3C trace-context propagator, when Enabled; otherwise it changes nothing.
// Call shutdown before the process exits: it flushes the spans still
// batched. An OTEL_EXPORTER_OTLP_PROTOCOL other than http/protobuf is
// refused (traces would silently go nowhere).
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !Enabled() {
		return noop, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(name); p != "" {
			if p != "http/protobuf" {
				return noop, fmt.Errorf("%s=%s: verifierd exports traces over OTLP http/protobuf only; set it to http/protobuf or unset it (and point %s at the collector's HTTP port, usually 4318)", name, p, EndpointEnv)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("traces (%s): %w", EndpointEnv, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return noop, fmt.Errorf("traces: describing the process: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(scrubExporter{exp}), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	active.Store(true)
	return tp.Shutdown, nil
}

// active is set once Setup installed an exporting provider.
var active atomic.Bool

// Active reports whether Setup installed an exporting tracer provider in
// this process. Code that builds span attributes can skip the work when it
// did not.
func Active() bool { return active.Load() }

// Env returns the entries of environ (KEY=value, as os.Environ gives them)
// named in PassedEnv, for a plugin's otherwise empty environment. It is
// never nil.
func Env(environ []string) []string {
	out := []string{}
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && slices.Contains(PassedEnv, name) {
			out = append(out, kv)
		}
	}
	return out
}

// propagator is explicit so that the context crosses the plugin connection
// whatever the global propagator is.
var propagator = propagation.TraceContext{}

// DialOptions are the gRPC client options that trace calls and send the
// trace context along, when Enabled; none otherwise.
func DialOptions() []grpc.DialOption {
	if !Enabled() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithPropagators(propagator), otelgrpc.WithFilter(traced)))}
}

// ServerOptions are the gRPC server options that trace calls under the
// caller's trace context, when Enabled; none otherwise.
func ServerOptions() []grpc.ServerOption {
	if !Enabled() {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithPropagators(propagator), otelgrpc.WithFilter(traced)))}
}

// traced leaves out the calls that are plumbing, not work: go-plugin's own
// services (its stdio stream lives as long as the plugin), health checks and
// reflection.
func traced(info *stats.RPCTagInfo) bool {
	for _, prefix := range []string{"/plugin.", "/grpc.health.", "/grpc.reflection."} {
		if strings.HasPrefix(info.FullMethodName, prefix) {
			return false
		}
	}
	return true
}

// scrubExporter drops the description of a failed span's status before
// export. The gRPC and HTTP instrumentation put a failed call's status
// message there, and that text (an adapter's error, say) may quote a value
// read or a run parameter. The status code and the rpc.grpc.status_code
// attribute stay; verifierd's own spans describe a failure by a fixed word
// in verifierd.error.kind.
type scrubExporter struct{ sdktrace.SpanExporter }

func (e scrubExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = s
		if s.Status().Description != "" {
			out[i] = scrubbedSpan{s}
		}
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

type scrubbedSpan struct{ sdktrace.ReadOnlySpan }

func (s scrubbedSpan) Status() sdktrace.Status {
	st := s.ReadOnlySpan.Status()
	st.Description = ""
	return st
}
