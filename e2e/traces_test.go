package e2e

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collectedSpan is one span an OTLP export delivered, with the service that
// sent it.
type collectedSpan struct {
	service string
	span    *tracepb.Span
}

func (s collectedSpan) id() string     { return hex.EncodeToString(s.span.GetSpanId()) }
func (s collectedSpan) parent() string { return hex.EncodeToString(s.span.GetParentSpanId()) }
func (s collectedSpan) trace() string  { return hex.EncodeToString(s.span.GetTraceId()) }

func (s collectedSpan) attr(key string) (string, bool) {
	for _, kv := range s.span.GetAttributes() {
		if kv.GetKey() == key {
			return anyText(kv.GetValue()), true
		}
	}
	return "", false
}

// anyText renders an attribute value, arrays and maps included.
func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return string(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyText(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *commonpb.AnyValue_KvlistValue:
		var parts []string
		for _, kv := range x.KvlistValue.GetValues() {
			parts = append(parts, kv.GetKey()+"="+anyText(kv.GetValue()))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return ""
}

// otlpCollector is an OTLP/HTTP trace receiver on 127.0.0.1: it decodes
// each export request's protobuf and keeps the spans, and every text the
// exports carried (attribute values, names, statuses, events) for the
// leak check.
type otlpCollector struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []collectedSpan
	texts    []string
	requests int
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	t.Helper()
	c := &otlpCollector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "only POST /v1/traces", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.add(&req)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *otlpCollector) add(req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
			c.texts = append(c.texts, kv.GetKey()+"="+anyText(kv.GetValue()))
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, collectedSpan{service: service, span: s})
				c.texts = append(c.texts, s.GetName(), s.GetStatus().GetMessage())
				for _, kv := range s.GetAttributes() {
					c.texts = append(c.texts, kv.GetKey()+"="+anyText(kv.GetValue()))
				}
				for _, e := range s.GetEvents() {
					c.texts = append(c.texts, e.GetName())
					for _, kv := range e.GetAttributes() {
						c.texts = append(c.texts, kv.GetKey()+"="+anyText(kv.GetValue()))
					}
				}
			}
		}
	}
}

func (c *otlpCollector) snapshot() ([]collectedSpan, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]collectedSpan(nil), c.spans...), append([]string(nil), c.texts...)
}

// spanTree indexes collected spans for the assertions.
type spanTree struct {
	t     *testing.T
	spans []collectedSpan
}

// one returns the single span matching, failing the test otherwise.
func (tr spanTree) one(what string, match func(collectedSpan) bool) collectedSpan {
	tr.t.Helper()
	var found []collectedSpan
	for _, s := range tr.spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		tr.t.Fatalf("%d spans are %s, want 1; spans:\n%s", len(found), what, tr.dump())
	}
	return found[0]
}

// child returns the single child of parent named name, sent by service.
func (tr spanTree) child(parent collectedSpan, service, name string) collectedSpan {
	tr.t.Helper()
	return tr.one(fmt.Sprintf("%s from %s under %s", name, service, parent.span.GetName()), func(s collectedSpan) bool {
		return s.service == service && s.span.GetName() == name && s.parent() == parent.id() && s.trace() == parent.trace()
	})
}

// children returns every child of parent named name.
func (tr spanTree) children(parent collectedSpan, name string) []collectedSpan {
	var out []collectedSpan
	for _, s := range tr.spans {
		if s.span.GetName() == name && s.parent() == parent.id() && s.trace() == parent.trace() {
			out = append(out, s)
		}
	}
	return out
}

func (tr spanTree) dump() string {
	var b strings.Builder
	for _, s := range tr.spans {
		fmt.Fprintf(&b, "  %s %s trace=%s id=%s parent=%s\n", s.service, s.span.GetName(), s.trace()[:8], s.id()[:8], s.parent())
	}
	return b.String()
}

// session returns the span name (session.begin or session.verify) of
// session id, and checks its outcome and that its parent is the daemon's
// gRPC server span of method.
func (tr spanTree) session(name, id, outcome, method string) collectedSpan {
	tr.t.Helper()
	span := tr.one(name+" of session "+id, func(s collectedSpan) bool {
		got, _ := s.attr("verifierd.session.id")
		return s.span.GetName() == name && got == id
	})
	if got, _ := span.attr("verifierd.outcome"); got != outcome {
		tr.t.Errorf("%s outcome %q, want %s", name, got, outcome)
	}
	rpc := tr.one("the parent of "+name, func(s collectedSpan) bool { return s.id() == span.parent() && s.trace() == span.trace() })
	if rpc.span.GetName() != "verifierd.verifier.v1.VerifierService/"+method || rpc.span.GetKind() != tracepb.Span_SPAN_KIND_SERVER || rpc.service != "verifierd" {
		tr.t.Errorf("%s's parent is %s (%s, %s), want the daemon's VerifierService/%s server span", name, rpc.span.GetName(), rpc.span.GetKind(), rpc.service, method)
	}
	return span
}

// adapterCall checks that parent made the adapter RPC method through the
// plugin connection: a client span in the daemon whose server span in the
// adapter process (service adapterService) is its child in the same trace.
func (tr spanTree) adapterCall(parent collectedSpan, adapterService, method string) {
	tr.t.Helper()
	name := "verifierd.adapter.v1.AdapterService/" + method
	client := tr.child(parent, "verifierd", name)
	if client.span.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		tr.t.Errorf("%s in the daemon is a %s span, want a client span", name, client.span.GetKind())
	}
	server := tr.child(client, adapterService, name)
	if server.span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		tr.t.Errorf("%s in the adapter is a %s span, want a server span", name, server.span.GetKind())
	}
}

// TestTracesOfBeginAndVerify: with OTEL_EXPORTER_OTLP_ENDPOINT pointing at
// an in-test OTLP receiver, one Begin and one Verify through the sql
// adapter process each export a span tree: the gRPC server span, the
// session's spans for configure, capture, judge, hook and the store under
// it, and the adapter process's own spans joined to the daemon's calls. No
// exported text holds a run parameter's value or a secret.
func TestTracesOfBeginAndVerify(t *testing.T) {
	t.Parallel()
	col := newOTLPCollector(t)
	secret := fmt.Sprintf("trace-s3cr3t-%d", time.Now().UnixNano())
	c := newClinic(t)
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{
		args:      []string{"--http-listen", httpAddr},
		pluginDir: bins.pluginDir,
		config:    noChangeClaim + "secrets:\n  allow: [LEDGER_*]\n",
		env: []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.srv.URL,
			"OTEL_BSP_SCHEDULE_DELAY=50",
			"LEDGER_PASSWORD=" + secret,
		},
	})
	const patient, note = "patient-trace-90210", "note-trace-31337"
	b := d.begin(t, c, patient, note)
	c.save(t, patient, note, 1)
	if v := d.verify(t, b.SessionID); v.Outcome != "VERIFIED" {
		t.Fatalf("verify: %s, want VERIFIED", v.summary())
	}

	// A customer plugin (csv-ledger) given a secret: neither the secret
	// nor anything else it is configured with appears in a span.
	dir := t.TempDir()
	csvPath := writeFile(t, dir, "ledger.csv", "id,account,amount\n1,acme,10.50\n")
	dep := writeFile(t, dir, "ledger.yaml", fmt.Sprintf("effects:\n  kind: csv-ledger\n  options: {path: %s, id_column: id}\n  secret_env: {password: LEDGER_PASSWORD}\n", csvPath))
	effects := writeFile(t, dir, "effects.yaml", "- {kind: record_written, match: {account: acme}, forbid_collateral_loss: false}\n")
	out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, dep), "--effects", effects)
	if code != 0 {
		t.Fatalf("csv-ledger begin exit %d: %s", code, out)
	}
	ledgerID := mustJSON[beginOutput](t, out).SessionID
	if out, code := d.ctl(t, "verify", "--session", ledgerID); code != 0 {
		t.Fatalf("csv-ledger verify exit %d: %s", code, out)
	}

	// Over HTTP/JSON, a caller's W3C traceparent becomes the parent of the
	// daemon's request span.
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/v1/sessions/"+b.SessionID, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/sessions/%s: %d", b.SessionID, resp.StatusCode)
	}

	// Stopping the daemon stops its adapters gracefully: both flush.
	d.stop()
	var spans []collectedSpan
	var texts []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans, texts = col.snapshot()
		adapterSpans := 0
		for _, s := range spans {
			if s.service == "verifier-adapter-sql" {
				adapterSpans++
			}
		}
		if adapterSpans > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	tr := spanTree{t: t, spans: spans}

	// Begin.
	begin := tr.session("session.begin", b.SessionID, "BEGUN", "Begin")
	tr.child(begin, "verifierd", "session.configure")
	capture := tr.child(begin, "verifierd", "capture.before")
	for key, want := range map[string]string{
		"verifierd.adapter.kind": "sql", "verifierd.adapter.tier": "1", "verifierd.capture.group": "0",
		"verifierd.effect.indices": "[0,1]", "verifierd.effect.kinds": "[record_written,field_equals]",
		"verifierd.capture.records": "0", "verifierd.capture.reachable": "true",
	} {
		if got, ok := capture.attr(key); got != want {
			t.Errorf("capture.before %s = %q (present %v), want %q", key, got, ok, want)
		}
	}
	tr.adapterCall(capture, "verifier-adapter-sql", "CaptureBefore")
	tr.child(begin, "verifierd", "store.create_session")

	// Verify.
	verify := tr.session("session.verify", b.SessionID, "VERIFIED", "Verify")
	tr.child(verify, "verifierd", "store.read_session")
	tr.child(verify, "verifierd", "session.configure")
	group := tr.child(verify, "verifierd", "verify.group")
	if got, _ := group.attr("verifierd.verdicts"); got != "[CONFIRMED,CONFIRMED]" {
		t.Errorf("verify.group verdicts %s, want [CONFIRMED,CONFIRMED]", got)
	}
	tr.child(group, "verifierd", "store.read_baseline")
	reads := tr.children(group, "capture.after")
	judges := tr.children(group, "judge")
	if len(reads) == 0 || len(judges) != len(reads) {
		t.Fatalf("verify.group has %d capture.after and %d judge spans, want as many of each and at least one:\n%s", len(reads), len(judges), tr.dump())
	}
	for _, r := range reads {
		if got, _ := r.attr("verifierd.capture.records"); got != "1" {
			t.Errorf("capture.after read %s records, want 1", got)
		}
		tr.adapterCall(r, "verifier-adapter-sql", "CaptureAfter")
	}
	if got, _ := judges[len(judges)-1].attr("verifierd.verdicts"); got != "[CONFIRMED,CONFIRMED]" {
		t.Errorf("the last judge span's verdicts %s, want [CONFIRMED,CONFIRMED]", got)
	}
	hooks := tr.children(group, "adapter.verdict_hook")
	if len(hooks) != 2 {
		t.Fatalf("%d adapter.verdict_hook spans, want 2 (one per effect):\n%s", len(hooks), tr.dump())
	}
	// The sql adapter has no hook: the first call learns it through the
	// plugin connection, the instance remembers it for the second.
	asked := 0
	for _, h := range hooks {
		if kind, _ := h.attr("verifierd.adapter.kind"); kind != "sql" {
			t.Errorf("verdict hook span kind %q, want sql", kind)
		}
		if present, _ := h.attr("verifierd.hook.present"); present != "false" {
			t.Errorf("verdict hook span says verifierd.hook.present=%q, want false (the sql adapter has none)", present)
		}
		if len(tr.children(h, "verifierd.adapter.v1.AdapterService/Verdict")) > 0 {
			tr.adapterCall(h, "verifier-adapter-sql", "Verdict")
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("%d verdict hook spans called the adapter, want 1", asked)
	}
	tr.child(verify, "verifierd", "store.finish_session")

	// The customer plugin's process joined its session's trace too.
	ledgerBegin := tr.session("session.begin", ledgerID, "BEGUN", "Begin")
	tr.adapterCall(tr.child(ledgerBegin, "verifierd", "capture.before"), "verifier-adapter-csv-ledger", "CaptureBefore")

	httpSpan := tr.one("the HTTP request span", func(s collectedSpan) bool {
		return s.service == "verifierd" && s.span.GetName() == "GET /v1/sessions/"+b.SessionID
	})
	if httpSpan.trace() != callerTrace || httpSpan.parent() != callerSpan || httpSpan.span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the HTTP span is a %s span in trace %s under %s; want a server span in the caller's trace %s under %s",
			httpSpan.span.GetKind(), httpSpan.trace(), httpSpan.parent(), callerTrace, callerSpan)
	}

	for _, text := range texts {
		for _, v := range []string{patient, note, secret} {
			if strings.Contains(text, v) {
				t.Errorf("an exported span carries %q: %s", v, text)
			}
		}
	}
	if t.Failed() {
		t.Logf("daemon log:\n%s", d.logs())
	}
}
