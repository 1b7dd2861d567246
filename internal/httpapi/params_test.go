package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/verifierd/verifierd/internal/server"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// paramsVerifier records the run parameters each call reached it with.
type paramsVerifier struct {
	verifierv1.UnimplementedVerifierServiceServer
	mu  sync.Mutex
	got map[string]map[string]string // method -> params
}

func (p *paramsVerifier) keep(method string, params map[string]*structpb.Value) {
	p.mu.Lock()
	defer p.mu.Unlock()
	texts := map[string]string{}
	for k, v := range params {
		texts[k] = v.GetStringValue()
	}
	p.got[method] = texts
}

func (p *paramsVerifier) last(method string) map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got[method]
}

func (p *paramsVerifier) Begin(_ context.Context, req *verifierv1.BeginRequest) (*verifierv1.BeginResponse, error) {
	p.keep("Begin", req.GetParams())
	return &verifierv1.BeginResponse{SessionId: "s-" + req.GetDeploymentName()}, nil
}

func (p *paramsVerifier) TestConnection(_ context.Context, req *verifierv1.TestConnectionRequest) (*verifierv1.TestConnectionResponse, error) {
	p.keep("TestConnection", req.GetParams())
	return &verifierv1.TestConnectionResponse{}, nil
}

func (p *paramsVerifier) Judge(_ context.Context, req *verifierv1.JudgeRequest) (*verifierv1.JudgeResponse, error) {
	p.keep("Judge", req.GetParams())
	return &verifierv1.JudgeResponse{}, nil
}

// TestScalarParams: on every gateway route that takes run parameters, a
// JSON number reaches the service as its text exactly as written and a
// boolean as true/false; strings are untouched; null, objects and arrays
// are InvalidArgument naming params.<name> and reach no service; the rest
// of the body is read as before (an unknown key is still refused).
func TestScalarParams(t *testing.T) {
	t.Parallel()
	pv := &paramsVerifier{got: map[string]map[string]string{}}
	api := New(token)
	if err := RegisterGateway(api, pv, server.Chain(server.Options{BearerToken: token})); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c := client{t: t, url: srv.URL, bodies: new([]string)}

	want := map[string]string{"age": "36", "amount": "1234.50", "big": "12345678901234567890", "exp": "1e3", "neg": "-0.5", "vip": "true", "off": "false", "name": "Ada", "quoted": "36"}
	params := `{"age": 36, "amount": 1234.50, "big": 12345678901234567890, "exp": 1e3, "neg": -0.5, "vip": true, "off": false, "name": "Ada", "quoted": "36"}`
	for method, path := range map[string]string{"Begin": "/v1/sessions", "TestConnection": "/v1/connection-tests", "Judge": "/v1/judge"} {
		body := `{"deploymentName": "d", "params": ` + params + `}`
		if method == "Judge" {
			body = `{"effects": "W10=", "params": ` + params + `}`
		}
		code, res := c.do("POST", path, body, token)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", method, code, res)
		}
		if got := pv.last(method); !maps.Equal(got, want) {
			t.Errorf("%s reached the service with %v, want %v", method, got, want)
		}
		for _, bad := range []struct{ value, what string }{{"null", "null"}, {`{"x": 1}`, "an object"}, {`[1]`, "an array"}} {
			b := strings.Replace(body, `"age": 36`, `"age": `+bad.value, 1)
			code, res := c.do("POST", path, b, token)
			msg, _ := res["message"].(string)
			if code != http.StatusBadRequest || res["code"] != float64(codes.InvalidArgument) || !strings.HasPrefix(msg, "params.age: ") || !strings.Contains(msg, "not "+bad.what) {
				t.Errorf("%s with age %s: %d %v, want 400 InvalidArgument naming params.age", method, bad.value, code, res)
			}
			details, _ := json.Marshal(res["details"])
			if !strings.Contains(string(details), `"field":"params.age"`) {
				t.Errorf("%s with age %s: details %s, want a BadRequest field violation on params.age", method, bad.value, details)
			}
		}
	}
	// Strings only: the body reaches the gateway byte for byte.
	if code, res := c.do("POST", "/v1/sessions", `{"deploymentName": "d", "params": {"p": "1"}}`, token); code != http.StatusOK || !maps.Equal(pv.last("Begin"), map[string]string{"p": "1"}) {
		t.Errorf("string params: %d %v, service got %v", code, res, pv.last("Begin"))
	}
	// What is not about params keeps the gateway's answers.
	for name, body := range map[string]string{
		"unknown key beside numeric params": `{"deploymentName": "d", "nope": 1, "params": {"age": 36}}`,
		"params not an object":              `{"deploymentName": "d", "params": [1]}`,
		"duplicate key":                     `{"deploymentName": "d", "params": {"age": 36, "age": 37}}`,
		"not JSON":                          `{"params": {"age": 36}`,
		"repeated params":                   `{"deploymentName": "d", "params": {"age": 36}, "params": {"age": 37}}`,
		"trailing data":                     `{"deploymentName": "d", "params": {"age": 36}} {}`,
		// Nesting far past encoding/json's bound: refused, never a
		// recursion the size of the body.
		"deep nesting": `{"deploymentName": "d", "params": {"age": 36}, "x": ` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `}`,
	} {
		if code, res := c.do("POST", "/v1/sessions", body, token); code != http.StatusBadRequest || res["code"] != float64(codes.InvalidArgument) {
			t.Errorf("%s: %d %v, want the gateway's 400 InvalidArgument", name, code, res)
		}
	}
}

func TestParamText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   any
		want string
		ok   bool
	}{
		{"x", "x", true}, {json.Number("1.50"), "1.50", true}, {json.Number("-0"), "-0", true},
		{true, "true", true}, {false, "false", true},
		{json.Number("01"), "", false}, {json.Number("NaN"), "", false},
		{nil, "", false}, {map[string]any{}, "", false}, {[]any{}, "", false}, {1.5, "", false},
	} {
		if got, ok := ParamText(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("ParamText(%#v) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestOpenAPIDescribesParamsAndUnused: the served document says that
// params take numbers and booleans over HTTP/JSON on every route that has
// them, and lists Begin's unusedParams.
func TestOpenAPIDescribesParamsAndUnused(t *testing.T) {
	t.Parallel()
	var doc struct {
		Definitions map[string]struct {
			Properties map[string]struct {
				Type        string `json:"type"`
				Description string `json:"description"`
			} `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(verifierv1.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"v1BeginRequest", "verifierdVerifierV1TestConnectionRequest", "v1JudgeRequest"} {
		d := doc.Definitions[msg].Properties["params"].Description
		if !strings.Contains(d, "JSON scalar") || !strings.Contains(d, "a number") || !strings.Contains(d, "boolean") || !strings.Contains(d, "params.<name>") {
			t.Errorf("%s.params: description %q does not say it takes numbers and booleans", msg, d)
		}
	}
	u := doc.Definitions["v1BeginResponse"].Properties["unusedParams"]
	if u.Type != "array" || !strings.Contains(u.Description, "no contract") {
		t.Errorf("v1BeginResponse.unusedParams = %+v, want a documented array", u)
	}
}

// FuzzRewriteParams: whatever the body, rewriteParams never panics; a body
// it changes is one JSON object with the same members, whose params are all
// strings, each the text of what was sent; a refusal is InvalidArgument
// naming params.<name>.
func FuzzRewriteParams(f *testing.F) {
	for _, s := range []string{
		`{"params": {"age": 36, "vip": true, "n": "x"}}`, `{"params": {"a": null}}`, `{"params": {"a": [1]}}`,
		`{"deploymentName": "d", "params": {"a": 1e3}, "effects": "W10="}`, `{"params": {"a": 1, "a": 2}}`,
		`{"params": 5}`, `{"params": {"a": 1}} x`, `[{"params": {"a": 1}}]`, `{"params": {"\u0061": -0.0}}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := rewriteParams(raw)
		if err != nil {
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "params.") {
				t.Fatalf("refusal %v, want InvalidArgument naming params.<name>", err)
			}
			return
		}
		if bytes.Equal(out, raw) {
			return
		}
		var before, after map[string]json.RawMessage
		if err := json.Unmarshal(raw, &before); err != nil {
			t.Fatalf("changed a body that is not one object: %q -> %q", raw, out)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("the rewritten body is not one object: %q (%v)", out, err)
		}
		if len(before) != len(after) {
			t.Fatalf("members changed: %q -> %q", raw, out)
		}
		for k, v := range before {
			if k != "params" && !bytes.Equal(bytes.TrimSpace(v), bytes.TrimSpace(after[k])) {
				t.Fatalf("member %q changed: %s -> %s", k, v, after[k])
			}
		}
		var sent map[string]any
		dec := json.NewDecoder(bytes.NewReader(before["params"]))
		dec.UseNumber()
		if err := dec.Decode(&sent); err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		if err := json.Unmarshal(after["params"], &got); err != nil || len(got) != len(sent) {
			t.Fatalf("params %s -> %s (%v): not a map of the same strings", before["params"], after["params"], err)
		}
		for k, v := range sent {
			if want, _ := ParamText(v); got[k] != want {
				t.Fatalf("params.%s = %q, want %q", k, got[k], want)
			}
		}
	})
}
