package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/verifierd/verifierd/internal/session"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/sdk/jsondepth"
)

// shallowBody refuses a request body nested more than jsondepth.Max levels
// with InvalidArgument naming the path, in the gateway's error shape,
// before the gateway's JSON reader (which recurses per level) sees it.
func shallowBody(gw *runtime.ServeMux, m runtime.Marshaler, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next(w, r)
			return
		}
		raw, err := io.ReadAll(r.Body)
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
		r.Body = io.NopCloser(bytes.NewReader(raw))
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
}

// RegisterGateway joins VerifierService over HTTP/JSON: the handlers that
// protoc-gen-grpc-gateway generated from http.yaml, calling svc in process,
// behind the listener's bearer token like every route. Errors are the gRPC
// status as JSON ({code, message, details}) with the HTTP status the gateway
// maps its code to (InvalidArgument 400, PermissionDenied 403, NotFound 404,
// FailedPrecondition 400, ...). Request bodies are bounded like gRPC
// requests (session.MaxRequestBytes); unknown JSON keys are refused. Run
// parameters may be JSON numbers and booleans as well as strings
// (scalarParams, params.go). The
// generated OpenAPI document is served at GET /openapi.json, behind the
// token too.
func RegisterGateway(a *API, svc verifierv1.VerifierServiceServer, logger hclog.Logger) error {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	jsonpb := &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}
	gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, jsonpb))
	if err := verifierv1.RegisterVerifierServiceHandlerServer(context.Background(), gw, svc); err != nil {
		return err
	}
	// The gRPC server's panic interceptor does not run on these calls, so
	// the same recovery is here: Internal, details in the log.
	h := func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				logger.Error("panic in an HTTP gateway call", "path", r.URL.Path, "panic", p)
				runtime.HTTPError(r.Context(), gw, jsonpb, w, r, status.Error(codes.Internal, "internal error; the daemon log has the details"))
			}
		}()
		gw.ServeHTTP(w, r)
	}
	h = shallowBody(gw, jsonpb, h)
	for _, p := range gatewayRoutes {
		if paramRoutes[p] {
			a.handle(p, session.MaxRequestBytes, scalarParams(gw, jsonpb, h))
			continue
		}
		a.handle(p, session.MaxRequestBytes, h)
	}
	doc := verifierv1.OpenAPI()
	a.Handle("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(doc)
	})
	return nil
}
