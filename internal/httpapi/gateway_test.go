package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/server"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// stubVerifier answers Unimplemented for every method except those the
// error tests need.
type stubVerifier struct {
	verifierv1.UnimplementedVerifierServiceServer
}

func (stubVerifier) Begin(_ context.Context, req *verifierv1.BeginRequest) (*verifierv1.BeginResponse, error) {
	switch req.GetDeploymentName() {
	case "inline":
		return nil, status.Error(codes.PermissionDenied, "inline deployments are refused")
	case "bad":
		return nil, status.Error(codes.InvalidArgument, "deployment_name: bad")
	case "panic":
		panic("boom")
	}
	return &verifierv1.BeginResponse{SessionId: "s-" + req.GetDeploymentName()}, nil
}

func (stubVerifier) GetSession(_ context.Context, req *verifierv1.GetSessionRequest) (*verifierv1.GetSessionResponse, error) {
	return nil, status.Error(codes.NotFound, "no session "+req.GetSessionId())
}

func serveGateway(t *testing.T) client {
	t.Helper()
	api := New(token)
	if err := RegisterGateway(api, stubVerifier{}, server.Chain(server.Options{BearerToken: token})); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return client{t: t, url: srv.URL, bodies: new([]string)}
}

// openAPIOps reads the served document, checks it with kin-openapi (as
// Swagger 2.0, then converted to OpenAPI 3 and validated) and returns its
// operations as "METHOD path" → operationId.
func openAPIOps(t *testing.T, c client) map[string]string {
	t.Helper()
	res, err := http.Get(c.url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/openapi.json without the token: %d, want 401", res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, c.url+"/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Body.Close()
	var doc2 openapi2.T
	if err := json.NewDecoder(res2.Body).Decode(&doc2); err != nil {
		t.Fatalf("/openapi.json: %v", err)
	}
	doc3, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		t.Fatalf("converting to OpenAPI 3: %v", err)
	}
	if err := doc3.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document does not validate: %v", err)
	}
	ops := map[string]string{}
	for path, item := range doc2.Paths {
		for method, op := range item.Operations() {
			ops[method+" "+path] = op.OperationID
		}
	}
	return ops
}

// TestGatewayMatchesOpenAPI: every operation of the generated document
// reaches its method through the listener, and every listener pattern
// leading to the gateway serves some operation of the document.
func TestGatewayMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	c := serveGateway(t)
	ops := openAPIOps(t, c)
	if len(ops) != 12 {
		t.Errorf("the document has %d operations, want 12 (VerifierService without ExportLedger): %v", len(ops), ops)
	}
	patterns := http.NewServeMux()
	for _, p := range gatewayRoutes {
		patterns.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	used := map[string]bool{}
	for op, id := range ops {
		method, path, _ := strings.Cut(op, " ")
		path = strings.ReplaceAll(path, "{sessionId}", "s1")
		path = strings.ReplaceAll(path, "{runId}", "r1")
		r := httptest.NewRequest(method, path, nil)
		_, pattern := patterns.Handler(r)
		if pattern == "" {
			t.Errorf("%s (%s): no listener pattern leads to the gateway", op, id)
			continue
		}
		used[pattern] = true
		code, body := c.do(method, path, "{}", token)
		name := strings.TrimPrefix(id, "VerifierService_")
		if name == "Begin" || name == "GetSession" {
			continue // answered by the stub
		}
		msg, _ := body["message"].(string)
		if code != http.StatusNotImplemented || !strings.Contains(msg, "method "+name+" not implemented") {
			t.Errorf("%s %s: %d %v, want 501 from method %s", method, path, code, body, name)
		}
	}
	for _, p := range gatewayRoutes {
		if !used[p] {
			t.Errorf("listener pattern %q serves no operation of the OpenAPI document", p)
		}
	}
}

// TestGatewayErrors: gRPC codes become HTTP statuses with the gRPC status
// as the JSON body; the token is required; panics are Internal.
func TestGatewayErrors(t *testing.T) {
	t.Parallel()
	c := serveGateway(t)
	code, body := c.do("POST", "/v1/sessions", `{"deploymentName": "clinic"}`, token)
	if code != http.StatusOK || body["sessionId"] != "s-clinic" {
		t.Fatalf("Begin: %d %v", code, body)
	}
	if code, body := c.do("POST", "/v1/sessions", `{"deployment_name": "clinic"}`, ""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d %v, want 401", code, body)
	}
	cases := []struct {
		name, path, body string
		status           int
		code             codes.Code
	}{
		{"permission denied", "/v1/sessions", `{"deployment_name": "inline"}`, http.StatusForbidden, codes.PermissionDenied},
		{"invalid argument", "/v1/sessions", `{"deployment_name": "bad"}`, http.StatusBadRequest, codes.InvalidArgument},
		{"unknown key", "/v1/sessions", `{"deployment": "x"}`, http.StatusBadRequest, codes.InvalidArgument},
		{"not JSON", "/v1/sessions", `{`, http.StatusBadRequest, codes.InvalidArgument},
		{"panic", "/v1/sessions", `{"deployment_name": "panic"}`, http.StatusInternalServerError, codes.Internal},
		// The gateway's own routing answer for a verb it has no rule for.
		{"unknown verb", "/v1/sessions/s1:explode", `{}`, http.StatusNotImplemented, codes.Unimplemented},
	}
	for _, tc := range cases {
		code, body := c.do("POST", tc.path, tc.body, token)
		if code != tc.status || body["code"] != float64(tc.code) {
			t.Errorf("%s: %d %v, want %d with code %d", tc.name, code, body, tc.status, tc.code)
		}
		if _, ok := body["message"].(string); !ok {
			t.Errorf("%s: no message in %v", tc.name, body)
		}
	}
	code, body = c.do("GET", "/v1/sessions/s9", "", token)
	if code != http.StatusNotFound || body["code"] != float64(codes.NotFound) || body["message"] != "no session s9" {
		t.Errorf("GetSession: %d %v", code, body)
	}
	// The reward routes beside the gateway are untouched.
	if code, _ := c.do("GET", "/v1/nothing", "", token); code != http.StatusNotFound {
		t.Errorf("unknown route: %d", code)
	}
}

// A body nested past the limit is refused before the gateway's JSON reader
// sees it, naming the path; a body within it reaches the service.
func TestGatewayRefusesDeepBodies(t *testing.T) {
	t.Parallel()
	c := serveGateway(t)
	deep := `{"deploymentName": "clinic", "params": {"p": ` + strings.Repeat("[", 1_500_000) + strings.Repeat("]", 1_500_000) + `}}`
	code, body := c.do("POST", "/v1/sessions", deep, token)
	msg, _ := body["message"].(string)
	if code != http.StatusBadRequest || body["code"] != float64(codes.InvalidArgument) || !strings.Contains(msg, "params.p[0][0]") || !strings.Contains(msg, "more than 64 levels") {
		t.Fatalf("a 1.5M-deep body: %d %.300v", code, body)
	}
	if code, body := c.do("POST", "/v1/sessions", `{"deploymentName": "clinic"}`, token); code != http.StatusOK {
		t.Fatalf("a plain body after it: %d %v", code, body)
	}
}

// TestOpenAPIShapes: the served document describes the JSON the routes
// answer: the outcome at the top of Verify and Judge, enum values without
// a type prefix, counts as integers, records and receipts as objects, and
// effects as text.
func TestOpenAPIShapes(t *testing.T) {
	t.Parallel()
	type schema struct {
		Type       string            `json:"type"`
		Format     string            `json:"format"`
		Ref        string            `json:"$ref"`
		Enum       []string          `json:"enum"`
		Items      *schema           `json:"items"`
		Properties map[string]schema `json:"properties"`
	}
	var doc struct {
		Definitions map[string]schema `json:"definitions"`
	}
	if err := json.Unmarshal(verifierv1.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	defs := doc.Definitions
	for _, msg := range []string{"v1VerifyResponse", "v1JudgeResponse"} {
		if p := defs[msg].Properties; p["outcome"].Ref != "#/definitions/v1Outcome" || p["effects"].Type != "array" || p["result"].Ref != "" {
			t.Errorf("%s: %+v, want outcome and effects at the top", msg, p)
		}
	}
	if !slices.Contains(defs["v1Outcome"].Enum, "VERIFIED") || !slices.Contains(defs["verifierdVerifierV1Verdict"].Enum, "CONFIRMED") ||
		!slices.Contains(defs["v1ResultClass"].Enum, "conflicting") || !slices.Contains(defs["v1SuggestedAction"].Enum, "REMOVE_DUPLICATES") {
		t.Errorf("enum values keep a prefix: %v %v %v", defs["v1Outcome"].Enum, defs["v1ResultClass"].Enum, defs["v1SuggestedAction"].Enum)
	}
	e := defs["v1EffectResult"].Properties
	if e["observedCount"].Type != "integer" || e["observedCount"].Format != "int32" || e["matchedRecords"].Items == nil || e["matchedRecords"].Items.Type != "object" {
		t.Errorf("EffectResult: observedCount %+v, matchedRecords %+v; want an int32 and objects", e["observedCount"], e["matchedRecords"])
	}
	if r := defs["v1VerifyResponse"].Properties["receipt"]; r.Type != "object" {
		t.Errorf("VerifyResponse.receipt: %+v, want an object", r)
	}
	if r := defs["v1Read"].Properties["records"]; r.Items == nil || r.Items.Type != "object" {
		t.Errorf("Read.records: %+v, want objects", r)
	}
	if f := defs["v1BeginRequest"].Properties["effects"]; f.Type != "string" || f.Format != "" {
		t.Errorf("BeginRequest.effects: %+v, want text (not base64 bytes)", f)
	}
}
