package tracing

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/stats"
)

// unsetAll clears every variable that could switch traces on, for the
// test's duration.
func unsetAll(t *testing.T) {
	for _, name := range PassedEnv {
		t.Setenv(name, "")
	}
}

// countingReceiver accepts OTLP/HTTP exports on addr and counts them; it
// returns the address it listens on.
func countingReceiver(t *testing.T, addr string) (*atomic.Int64, string, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	var n atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return &n, lis.Addr().String(), nil
}

// TestOffWithoutEndpoint: with no endpoint variable, Setup leaves the
// global no-op provider in place (a span does not record), the gRPC options
// are empty, and nothing reaches a receiver on the exporter's default
// address, 127.0.0.1:4318 (when that port is free to listen on).
func TestOffWithoutEndpoint(t *testing.T) {
	unsetAll(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	exports, _, listenErr := countingReceiver(t, "127.0.0.1:4318")
	if Enabled() {
		t.Fatal("Enabled() with no endpoint variable set")
	}
	shutdown, err := Setup(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Fatal("Setup installed an SDK tracer provider without an endpoint")
	}
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	if span.IsRecording() {
		t.Error("a span records without an endpoint")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if got := len(DialOptions()) + len(ServerOptions()); got != 0 {
		t.Errorf("%d gRPC options without an endpoint, want none", got)
	}
	if listenErr != nil {
		t.Logf("the default OTLP port is taken (%v): the no-export check is skipped", listenErr)
	} else if n := exports.Load(); n != 0 {
		t.Errorf("%d exports reached the default OTLP address without an endpoint", n)
	}
}

// TestOnWithEndpoint: with the endpoint set, Setup installs an exporting
// provider whose spans reach the receiver on shutdown.
func TestOnWithEndpoint(t *testing.T) {
	unsetAll(t)
	exports, addr, err := countingReceiver(t, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EndpointEnv, "http://"+addr)
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	shutdown, err := Setup(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	if !span.IsRecording() {
		t.Error("a span does not record with an endpoint set")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := exports.Load(); n != 1 {
		t.Errorf("%d exports reached the receiver, want 1", n)
	}
	if len(DialOptions()) != 1 || len(ServerOptions()) != 1 {
		t.Errorf("gRPC options with an endpoint: %d dial, %d server; want 1 each", len(DialOptions()), len(ServerOptions()))
	}
}

func TestSetupRefusesGRPCProtocol(t *testing.T) {
	unsetAll(t)
	t.Setenv(EndpointEnv, "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	_, err := Setup(context.Background(), "test")
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc") || !strings.Contains(err.Error(), "http/protobuf") {
		t.Fatalf("Setup with protocol grpc: %v; want an error naming the variable and the fix", err)
	}
}

func TestEnvPassesOnlyTheTraceVariables(t *testing.T) {
	got := Env([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer x",
		"OTEL_BSP_SCHEDULE_DELAY=50",
		"LEDGER_PASSWORD=secret",
		"HOME=/root",
		"OTEL_SERVICE_NAME=verifierd",
		"malformed",
	})
	want := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_BSP_SCHEDULE_DELAY=50"}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}
	if got := Env(nil); got == nil || len(got) != 0 {
		t.Errorf("Env(nil) = %#v, want an empty, non-nil slice", got)
	}
}

func TestTracedLeavesPlumbingOut(t *testing.T) {
	for method, want := range map[string]bool{
		"/verifierd.adapter.v1.AdapterService/CaptureBefore": true,
		"/verifierd.verifier.v1.VerifierService/Begin":       true,
		"/plugin.GRPCStdio/StreamStdio":                      false,
		"/plugin.GRPCController/Shutdown":                    false,
		"/grpc.health.v1.Health/Check":                       false,
	} {
		if got := traced(&stats.RPCTagInfo{FullMethodName: method}); got != want {
			t.Errorf("traced(%s) = %v, want %v", method, got, want)
		}
	}
}

// TestScrubExporter: a failed span's status description (possibly an
// adapter's error text) never reaches the exporter; the code does.
func TestScrubExporter(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(scrubExporter{mem}))
	_, span := tp.Tracer("test").Start(context.Background(), "call")
	span.SetStatus(codes.Error, "row patient-4711 not found")
	span.End() // the syncer exports here
	got := mem.GetSpans()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d spans exported, want 1", len(got))
	}
	if got[0].Status.Code != codes.Error || got[0].Status.Description != "" {
		t.Errorf("exported status %+v, want code Error with no description", got[0].Status)
	}
}
