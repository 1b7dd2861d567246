package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	gwv1 "github.com/verifierd/verifierd/internal/httpapi/gw/v1"
	"github.com/verifierd/verifierd/internal/session"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

// shallowBody refuses a request body nested more than jsondepth.Max levels
// with InvalidArgument naming the path, in the gateway's error shape,
// before the gateway's JSON reader (which recurses per level) sees it, and
// a body that is not exactly one JSON value.
func shallowBody(gw *runtime.ServeMux, m runtime.Marshaler, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next(w, r)
			return
		}
		raw, err := readAll(r)
		if err != nil {
			// Over the size bound or a broken body: the gateway's own
			// reading of what is left gives its usual answer.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), r.Body))
			next(w, r)
			return
		}
		if ne, deep := errors.AsType[*jsondepth.Error](jsondepth.CheckJSON(raw, "", jsondepth.Max)); deep {
			err := error(ne)
			st := status.New(codes.InvalidArgument, err.Error()) // bounded: 64 levels of clipped names
			if d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
				Field: ne.Path, Description: fmt.Sprintf("nested more than %d levels of objects and arrays; flatten the value", jsondepth.Max)}}}); derr == nil {
				st = d
			}
			runtime.HTTPError(r.Context(), gw, m, w, r, st.Err())
			return
		}
		if len(bytes.TrimSpace(raw)) > 0 && !json.Valid(raw) {
			// The gateway's reader stops after the first value and would
			// take a body with trailing data as that value alone.
			runtime.HTTPError(r.Context(), gw, m, w, r, status.Error(codes.InvalidArgument,
				"the body is not one JSON value (malformed, or data after it); send one JSON object"))
			return
		}
		r.Body = memBody(raw)
		next(w, r)
	}
}

// gatewayRoutes are the listener's patterns that lead to the gateway. They
// cover the rules in proto/verifierd/verifier/v1/http.yaml; a request that
// reaches the gateway on no rule gets its NotFound. The test checks them
// against the generated OpenAPI document.
var gatewayRoutes = []string{
	"POST /v1/connection-tests",
	"POST /v1/sessions",
	"GET /v1/sessions/{session}",
	"POST /v1/sessions/{sessionVerb}", // {session_id}:verify and :reverify
	"POST /v1/judge",
	"GET /v1/info",
	"POST /v1/artifacts:verify",
	"POST /v1/runs",
	"GET /v1/runs/{run}",
	"POST /v1/runs/{runVerb}", // {run_id}:finish and :rollbackCheck
}

// RegisterGateway joins VerifierService over HTTP/JSON: the handlers that
// protoc-gen-grpc-gateway generated from http.yaml, calling svc in
// process, every call through chain, the gRPC server's own interceptor
// chain (internal/server.Chain): the bearer token, the recovery from a
// panic and the call log are the gRPC API's, written once, so a call
// without the token is Unauthenticated (HTTP 401, with WWW-Authenticate)
// and a panic Internal (500) exactly as over gRPC. Errors are the gRPC
// status as JSON ({code, message, details}) with the HTTP status the
// gateway maps its code to (InvalidArgument 400, PermissionDenied 403,
// NotFound 404, FailedPrecondition 400, ...). Request bodies are bounded
// like gRPC requests (session.MaxRequestBytes) and reserved from the
// listener's budget; unknown JSON keys are refused. Run parameters keep
// the digits of a JSON number (scalarParams, params.go) and a Judge
// record's number must survive a double (exactRecords). Answers are the
// protobuf JSON mapping with every field present. The generated OpenAPI
// document is served at GET /openapi.json, behind the token.
func RegisterGateway(a *API, svc verifierv1.VerifierServiceServer, chain grpc.UnaryServerInterceptor) error {
	if chain == nil {
		return errors.New("httpapi: RegisterGateway needs the gRPC server's interceptor chain (server.Chain)")
	}
	jsonpb := &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, jsonpb),
		runtime.WithErrorHandler(func(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			if status.Code(err) == codes.Unauthenticated {
				// The gateway would put the status message there; the
				// challenge names the scheme (RFC 6750).
				w = bearerChallenge{w}
			}
			runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, err)
		}),
	)
	if err := gwv1.RegisterVerifierServiceHandlerServer(context.Background(), gw, intercepted{svc: svc, chain: chain}); err != nil {
		return err
	}
	for _, p := range gatewayRoutes {
		// Depth first: every later walk of the body (the records' numbers
		// and count, the params) keeps a stack as deep as the body nests.
		route := http.HandlerFunc(gw.ServeHTTP)
		if paramRoutes[p] {
			route = scalarParams(gw, jsonpb, route)
		}
		if p == "POST /v1/judge" {
			route = exactRecords(gw, jsonpb, a, route)
		}
		route = shallowBody(gw, jsonpb, route)
		// The chain checks the token again, as over gRPC; the listener
		// checks it first, before the body is read.
		a.route(p, session.MaxRequestBytes, func(w http.ResponseWriter, r *http.Request) {
			runtime.HTTPError(r.Context(), gw, jsonpb, bearerChallenge{w}, r,
				status.Error(codes.Unauthenticated, "send the API token as 'authorization: Bearer <token>'"))
		}, route)
	}
	doc := verifierv1.OpenAPI()
	a.Handle("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(doc)
	})
	return nil
}

// intercepted is svc with every unary method called through chain, as
// the gRPC server calls it: the same FullMethod, the request and the
// incoming metadata the gateway made from the HTTP headers (authorization
// among them).
type intercepted struct {
	verifierv1.UnimplementedVerifierServiceServer
	svc   verifierv1.VerifierServiceServer
	chain grpc.UnaryServerInterceptor
}

func call[Req, Res any](ctx context.Context, g intercepted, method string, req Req, h func(context.Context, Req) (Res, error)) (Res, error) {
	info := &grpc.UnaryServerInfo{Server: g.svc, FullMethod: method}
	out, err := g.chain(ctx, req, info, func(ctx context.Context, r any) (any, error) {
		rq, _ := r.(Req)
		return h(ctx, rq)
	})
	res, _ := out.(Res)
	return res, err
}

func (g intercepted) TestConnection(ctx context.Context, r *verifierv1.TestConnectionRequest) (*verifierv1.TestConnectionResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_TestConnection_FullMethodName, r, g.svc.TestConnection)
}

func (g intercepted) Begin(ctx context.Context, r *verifierv1.BeginRequest) (*verifierv1.BeginResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_Begin_FullMethodName, r, g.svc.Begin)
}

func (g intercepted) Verify(ctx context.Context, r *verifierv1.VerifyRequest) (*verifierv1.VerifyResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_Verify_FullMethodName, r, g.svc.Verify)
}

func (g intercepted) Judge(ctx context.Context, r *verifierv1.JudgeRequest) (*verifierv1.JudgeResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_Judge_FullMethodName, r, g.svc.Judge)
}

func (g intercepted) GetSession(ctx context.Context, r *verifierv1.GetSessionRequest) (*verifierv1.GetSessionResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_GetSession_FullMethodName, r, g.svc.GetSession)
}

func (g intercepted) GetInfo(ctx context.Context, r *verifierv1.GetInfoRequest) (*verifierv1.GetInfoResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_GetInfo_FullMethodName, r, g.svc.GetInfo)
}

func (g intercepted) Reverify(ctx context.Context, r *verifierv1.ReverifyRequest) (*verifierv1.ReverifyResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_Reverify_FullMethodName, r, g.svc.Reverify)
}

func (g intercepted) VerifyArtifact(ctx context.Context, r *verifierv1.VerifyArtifactRequest) (*verifierv1.VerifyArtifactResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_VerifyArtifact_FullMethodName, r, g.svc.VerifyArtifact)
}

func (g intercepted) BeginRun(ctx context.Context, r *verifierv1.BeginRunRequest) (*verifierv1.BeginRunResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_BeginRun_FullMethodName, r, g.svc.BeginRun)
}

func (g intercepted) FinishRun(ctx context.Context, r *verifierv1.FinishRunRequest) (*verifierv1.FinishRunResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_FinishRun_FullMethodName, r, g.svc.FinishRun)
}

func (g intercepted) GetRun(ctx context.Context, r *verifierv1.GetRunRequest) (*verifierv1.GetRunResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_GetRun_FullMethodName, r, g.svc.GetRun)
}

func (g intercepted) RollbackCheck(ctx context.Context, r *verifierv1.RollbackCheckRequest) (*verifierv1.RollbackCheckResponse, error) {
	return call(ctx, g, verifierv1.VerifierService_RollbackCheck_FullMethodName, r, g.svc.RollbackCheck)
}

// bearerChallenge answers with "WWW-Authenticate: Bearer", whatever the
// handler set there before writing the status.
type bearerChallenge struct{ http.ResponseWriter }

func (b bearerChallenge) WriteHeader(code int) {
	b.Header().Set("WWW-Authenticate", "Bearer")
	b.ResponseWriter.WriteHeader(code)
}
