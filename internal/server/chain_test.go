package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/httpapi"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// faultyVerifier panics in Begin and answers GetInfo.
type faultyVerifier struct {
	verifierv1.UnimplementedVerifierServiceServer
}

func (faultyVerifier) Begin(context.Context, *verifierv1.BeginRequest) (*verifierv1.BeginResponse, error) {
	panic("boom: a secret value")
}

func (faultyVerifier) GetInfo(context.Context, *verifierv1.GetInfoRequest) (*verifierv1.GetInfoResponse, error) {
	return &verifierv1.GetInfoResponse{KeyId: "sha256:k"}, nil
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bothTransports serves svc over gRPC (on loopback TCP) and over the HTTP
// gateway with the same Options, as the daemon does.
func bothTransports(t *testing.T, svc verifierv1.VerifierServiceServer, opts Options) (verifierv1.VerifierServiceClient, string) {
	t.Helper()
	srv, _ := newServer(svc, opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(opts.BearerToken)
	if err := httpapi.RegisterGateway(api, svc, Chain(opts)); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() { hs.Close(); conn.Close(); srv.Stop() })
	return verifierv1.NewVerifierServiceClient(conn), hs.URL
}

// post sends a JSON body to the gateway and returns the status, the
// WWW-Authenticate header and the gRPC status the body carries.
func post(t *testing.T, url, path, body, token string) (int, string, *status.Status) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var st struct {
		Code    codes.Code `json:"code"`
		Message string     `json:"message"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("POST %s: %d, body is not JSON: %s", path, res.StatusCode, raw)
	}
	return res.StatusCode, res.Header.Get("WWW-Authenticate"), status.New(st.Code, st.Message)
}

// TestGatewayAndGRPCShareTheChain: a call without the token and a call
// that panics get the same code and message over gRPC and over the HTTP
// gateway (whose status is the code's HTTP status), and both panics are
// logged by the one recovery, with the method and never to the client.
func TestGatewayAndGRPCShareTheChain(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	opts := Options{BearerToken: "s3cret", Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})}
	c, url := bothTransports(t, faultyVerifier{}, opts)
	authed := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer s3cret")

	// Without the token (and with a wrong one).
	for _, tok := range []string{"", "guess"} {
		ctx := t.Context()
		if tok != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
		}
		_, gerr := c.GetInfo(ctx, &verifierv1.GetInfoRequest{})
		code, challenge, hst := post(t, url, "/v1/sessions", `{"deploymentName": "clinic"}`, tok)
		gst := status.Convert(gerr)
		if gst.Code() != codes.Unauthenticated || hst.Code() != gst.Code() || hst.Message() != gst.Message() {
			t.Errorf("token %q: gRPC %v, HTTP %v; want the same Unauthenticated", tok, gst, hst)
		}
		if code != http.StatusUnauthorized || challenge != "Bearer" {
			t.Errorf("token %q: HTTP %d with WWW-Authenticate %q, want 401 and Bearer", tok, code, challenge)
		}
	}

	// A panic in the service.
	_, gerr := c.Begin(authed, &verifierv1.BeginRequest{Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: "clinic"}})
	code, _, hst := post(t, url, "/v1/sessions", `{"deploymentName": "clinic"}`, "s3cret")
	gst := status.Convert(gerr)
	if gst.Code() != codes.Internal || hst.Code() != gst.Code() || hst.Message() != gst.Message() || code != http.StatusInternalServerError {
		t.Errorf("panic: gRPC %v, HTTP %d %v; want the same Internal (500)", gst, code, hst)
	}
	if strings.Contains(gst.Message()+hst.Message(), "secret") {
		t.Errorf("the panic's value reached a client: %q / %q", gst.Message(), hst.Message())
	}
	if n := strings.Count(logs.String(), "panic in a call: method=/verifierd.verifier.v1.VerifierService/Begin"); n != 2 {
		t.Errorf("the recovery logged %d panics of Begin, want 2 (one per transport):\n%s", n, logs)
	}
	// And the call log saw both transports' calls.
	if n := strings.Count(logs.String(), "call: method=/verifierd.verifier.v1.VerifierService/Begin code=Internal"); n != 2 {
		t.Errorf("the call log has %d failed Begins, want 2:\n%s", n, logs)
	}
	// With the token, the same service answers over both.
	if res, err := c.GetInfo(authed, &verifierv1.GetInfoRequest{}); err != nil || res.GetKeyId() != "sha256:k" {
		t.Errorf("GetInfo with the token: %v, %v", res, err)
	}
}

// TestInterceptedCoversEveryMethod: every unary method of VerifierService
// goes through the chain on the gateway; one the wrapper forgot would
// answer Unimplemented past the chain.
func TestInterceptedCoversEveryMethod(t *testing.T) {
	t.Parallel()
	var seen sync.Map
	refuse := func(_ context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
		seen.Store(info.FullMethod, true)
		return nil, status.Error(codes.PermissionDenied, "the chain ran")
	}
	api := httpapi.New("")
	if err := httpapi.RegisterGateway(api, faultyVerifier{}, refuse); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	for path, method := range map[string]string{
		"POST /v1/connection-tests": "TestConnection", "POST /v1/sessions": "Begin", "POST /v1/sessions/s1:verify": "Verify",
		"POST /v1/judge": "Judge", "GET /v1/sessions/s1": "GetSession", "GET /v1/info": "GetInfo",
		"POST /v1/sessions/s1:reverify": "Reverify", "POST /v1/artifacts:verify": "VerifyArtifact",
		"POST /v1/runs": "BeginRun", "POST /v1/runs/r1:finish": "FinishRun", "GET /v1/runs/r1": "GetRun",
		"POST /v1/runs/r1:rollbackCheck": "RollbackCheck",
	} {
		verb, p, _ := strings.Cut(path, " ")
		req, _ := http.NewRequest(verb, hs.URL+p, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403 from the chain", path, res.StatusCode)
		}
		if _, ok := seen.Load("/verifierd.verifier.v1.VerifierService/" + method); !ok {
			t.Errorf("%s: the chain never saw %s", path, method)
		}
	}
	unary := len(verifierv1.VerifierService_ServiceDesc.Methods)
	n := 0
	seen.Range(func(any, any) bool { n++; return true })
	if n != unary {
		t.Errorf("the chain saw %d methods, VerifierService has %d unary ones", n, unary)
	}
}
