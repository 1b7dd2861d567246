package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/workflow"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/sdk"
)

// unreachableAdapter cannot read its system of record.
type unreachableAdapter struct{ emptyAdapter }

func (unreachableAdapter) Info() sdk.Info { return sdk.Info{Kind: "unreachable", Tier: 1} }
func (unreachableAdapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Unreachable("the test's system of record is down"), nil
}

// blockingAdapter holds its baseline read until release is closed, and
// says on started when one began.
type blockingAdapter struct {
	emptyAdapter
	started chan<- struct{}
	release <-chan struct{}
}

func (blockingAdapter) Info() sdk.Info { return sdk.Info{Kind: "blocking", Tier: 1} }
func (a blockingAdapter) CaptureBefore(ctx context.Context, _ sdk.CaptureRequest) (sdk.Capture, error) {
	a.started <- struct{}{}
	select {
	case <-a.release:
	case <-ctx.Done():
		return sdk.Capture{}, ctx.Err()
	}
	return sdk.Capture{Reachable: true, Records: sdk.Records()}, nil
}

// api is the public API on an in-memory listener, with its server.
type api struct {
	conn   *grpc.ClientConn
	srv    *grpc.Server
	health *health.Server
	served chan error
}

func startAPI(t *testing.T, opts Options, adapters map[string]func() sdk.Adapter) *api {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host.RegisterInProcess("empty", func() sdk.Adapter { return emptyAdapter{} })
	for kind, f := range adapters {
		host.RegisterInProcess(kind, f)
	}
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The API layer is under test: inline deployments and caller-sent
	// absence checks (no change claim) keep the cases small; the trust rules have tests of
	// their own.
	noClaim, noRegistered := false, false
	daemon := &config.Daemon{Policy: &workflow.Policy{RequireChangeClaim: &noClaim, RequireRegisteredContracts: &noRegistered}}
	srv, hs := New(mustManager(t, session.Options{Host: host, Store: st, Daemon: daemon, AllowInline: true}), opts)
	lis := bufconn.Listen(1 << 20)
	a := &api{srv: srv, health: hs, served: make(chan error, 1)}
	go func() { a.served <- srv.Serve(lis) }()
	a.conn, err = grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.conn.Close(); srv.Stop(); host.Close(); st.Close() })
	return a
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// listServices asks server reflection for the services it serves.
func listServices(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.CloseSend() }()
	// A stream the server has already ended (refused by the interceptor)
	// fails Send with io.EOF; its status is what Recv returns.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	res, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names, nil
}

const judgeCase = `[{"kind": "record_written", "match": {"p": "1"}, "expected_count": 0}]`

func judgeReq() *verifierv1.JudgeRequest {
	return &verifierv1.JudgeRequest{
		Effects: judgeCase,
		Before:  &verifierv1.Read{Reachable: true},
		After:   &verifierv1.Read{Reachable: true},
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		serverToken string
		clientToken string
		want        codes.Code
	}{
		"no token configured, none sent": {"", "", codes.OK},
		"no token configured, one sent":  {"", "anything", codes.OK},
		"token configured, none sent":    {"s3cret", "", codes.Unauthenticated},
		"token configured, wrong sent":   {"s3cret", "guess", codes.Unauthenticated},
		"token configured and sent":      {"s3cret", "s3cret", codes.OK},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := startAPI(t, Options{BearerToken: tt.serverToken}, nil)
			ctx := t.Context()
			if tt.clientToken != "" {
				ctx = withToken(ctx, tt.clientToken)
			}
			c := verifierv1.NewVerifierServiceClient(a.conn)
			_, err := c.Judge(ctx, judgeReq())
			if got := status.Code(err); got != tt.want {
				t.Errorf("Judge: %s (%v), want %s", got, err, tt.want)
			}
			// Streams are guarded too: reflection answers with the token
			// (or when none is configured) and refuses without it.
			_, err = listServices(ctx, a.conn)
			if got := status.Code(err); got != tt.want {
				t.Errorf("reflection: %s (%v), want %s", got, err, tt.want)
			}
			// Health checks never need the token.
			res, err := healthpb.NewHealthClient(a.conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: verifierv1.VerifierService_ServiceDesc.ServiceName})
			if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health check without a token = %v, %v; want SERVING", res.GetStatus(), err)
			}
		})
	}
}

func TestReflectionListsTheServices(t *testing.T) {
	t.Parallel()
	a := startAPI(t, Options{}, nil)
	names, err := listServices(t.Context(), a.conn)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(names, ",")
	for _, want := range []string{verifierv1.VerifierService_ServiceDesc.ServiceName, "grpc.health.v1.Health"} {
		if !strings.Contains(got, want) {
			t.Errorf("reflection lists %s; want %s among them", got, want)
		}
	}
}

// TestStatusMapping covers each way a refusal becomes a gRPC status, over
// the wire.
func TestStatusMapping(t *testing.T) {
	t.Parallel()
	a := startAPI(t, Options{}, map[string]func() sdk.Adapter{"unreachable": func() sdk.Adapter { return unreachableAdapter{} }})
	c := verifierv1.NewVerifierServiceClient(a.conn)
	ctx := t.Context()
	dep := func(kind string) *verifierv1.BeginRequest_DeploymentYaml {
		return &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: "effects: {kind: " + kind + "}\n"}
	}
	tests := map[string]struct {
		call      func() error
		code      codes.Code
		want      string
		wantField string // the BadRequest field violation
		wantCode  string // the ErrorInfo reason
	}{
		"invalid contract": {func() error {
			_, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: dep("empty"), Effects: `[{"kind": "record_written", "match": {"id": 1}}]`})
			return err
		}, codes.InvalidArgument, "a value must be a string", "effects[0].match.id", "INVALID_CONTRACT"},
		"refused baseline": {func() error {
			_, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: dep("unreachable"), Effects: judgeCase})
			return err
			// A refused Begin is recorded in the ledger; its ErrorInfo names
			// the terminal outcome and carries the receipt.
		}, codes.FailedPrecondition, "", "effects[0]", "HALTED_BEFORE_EFFECT"},
		"no such session": {func() error {
			_, err := c.GetSession(ctx, &verifierv1.GetSessionRequest{SessionId: "ses_" + strings.Repeat("0", 32)})
			return err
		}, codes.NotFound, "no session", "session_id", ""},
		"judge without a before read": {func() error {
			_, err := c.Judge(ctx, &verifierv1.JudgeRequest{Effects: judgeCase, After: &verifierv1.Read{Reachable: true}})
			return err
		}, codes.InvalidArgument, "missing", "before", ""},
		"judge with records on an unreachable read": {func() error {
			r := judgeReq()
			r.After = &verifierv1.Read{Records: records(t, `{}`)}
			_, err := c.Judge(ctx, r)
			return err
		}, codes.InvalidArgument, "no records", "after.records", ""},
		"judge with a number JSON has not": {func() error {
			r := judgeReq()
			r.Before.Records = []*structpb.Struct{{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(math.NaN())}}}
			_, err := c.Judge(ctx, r)
			return err
		}, codes.InvalidArgument, "must be finite", "before.records[0].x", ""},
		"a run parameter that is not a scalar": {func() error {
			r := judgeReq()
			r.Params = map[string]*structpb.Value{"p": structpb.NewListValue(&structpb.ListValue{})}
			_, err := c.Judge(ctx, r)
			return err
		}, codes.InvalidArgument, "not an array", "params.p", ""},
		"judge with a bad freshness": {func() error {
			r := judgeReq()
			r.Freshness = &verifierv1.Freshness{WindowS: 5}
			_, err := c.Judge(ctx, r)
			return err
		}, codes.InvalidArgument, "window_s", "freshness", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tt.call()
			wantCode(t, err, tt.code, tt.want)
			st, _ := status.FromError(err)
			var field, reason string
			for _, d := range st.Details() {
				switch x := d.(type) {
				case *errdetails.BadRequest:
					if v := x.GetFieldViolations(); len(v) > 0 {
						field = v[0].GetField()
					}
				case *errdetails.ErrorInfo:
					reason = x.GetReason()
				}
			}
			if field != tt.wantField || reason != tt.wantCode {
				t.Errorf("details: field %q, reason %q; want %q, %q", field, reason, tt.wantField, tt.wantCode)
			}
		})
	}
}

// TestToStatus maps every kind of error, including those no request can
// provoke on demand.
func TestToStatus(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 10000)
	tests := map[string]struct {
		err  error
		code codes.Code
		want string
	}{
		"invalid":           {&session.Error{Kind: session.Invalid, Path: "effects", Message: "bad"}, codes.InvalidArgument, "effects: bad"},
		"refused":           {&session.Error{Kind: session.Refused, Message: "baseline unreadable"}, codes.FailedPrecondition, "baseline unreadable"},
		"not found":         {&session.Error{Kind: session.NotFound, Message: "no session ses_1"}, codes.NotFound, "no session ses_1"},
		"wrapped":           {fmt.Errorf("begin: %w", &session.Error{Kind: session.Refused, Message: "stop"}), codes.FailedPrecondition, "stop"},
		"cancelled":         {fmt.Errorf("reading: %w", context.Canceled), codes.Canceled, ""},
		"deadline":          {context.DeadlineExceeded, codes.DeadlineExceeded, ""},
		"a damaged value":   {fmt.Errorf("reading: %w", &store.IntegrityError{Session: "ses_1", What: "result"}), codes.DataLoss, "session ses_1: the stored result fails its integrity check"},
		"anything else":     {errors.New("disk full"), codes.Internal, "disk full"},
		"a long message":    {errors.New(long), codes.Internal, "(10000 bytes)"},
		"a long field path": {&session.Error{Kind: session.Invalid, Path: long, Message: "bad"}, codes.InvalidArgument, "bytes)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantCode(t, toStatus(tt.err), tt.code, tt.want)
		})
	}
}

func TestPanicInACallIsInternal(t *testing.T) {
	t.Parallel()
	intercept := recoverUnary(hclog.NewNullLogger())
	_, err := intercept(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"}, func(context.Context, any) (any, error) {
		panic("boom")
	})
	wantCode(t, err, codes.Internal, "the daemon log has the details")
	if strings.Contains(err.Error(), "boom") {
		t.Errorf("the panic's value reached the client: %v", err)
	}
}

// TestDrain: after the health server is shut down, checks answer
// NOT_SERVING; GracefulStop lets a call in flight finish, and the server
// then stops.
func TestDrain(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	a := startAPI(t, Options{}, map[string]func() sdk.Adapter{
		"blocking": func() sdk.Adapter { return blockingAdapter{started: started, release: release} },
	})
	c := verifierv1.NewVerifierServiceClient(a.conn)
	begun := make(chan error, 1)
	go func() {
		_, err := c.Begin(t.Context(), &verifierv1.BeginRequest{
			Deployment: &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: "effects: {kind: blocking}\n"},
			Effects:    judgeCase,
		})
		begun <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the Begin never reached the adapter")
	}

	a.health.Shutdown()
	res, err := healthpb.NewHealthClient(a.conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health while draining = %v, %v; want NOT_SERVING", res.GetStatus(), err)
	}

	stopped := make(chan struct{})
	go func() { a.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-begun; err != nil {
		t.Errorf("the call in flight during the drain failed: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop did not return after the last call")
	}
	if err := <-a.served; err != nil {
		t.Errorf("Serve = %v after a graceful stop, want nil", err)
	}
}

// TestBeginAnswersUnusedParams: Begin's unused_params reach the gRPC
// answer, sorted, and GetSession's copy of it; none when every run
// parameter is referenced.
func TestBeginAnswersUnusedParams(t *testing.T) {
	t.Parallel()
	a := startAPI(t, Options{}, nil)
	c := verifierv1.NewVerifierServiceClient(a.conn)
	ctx := t.Context()
	req := func(params map[string]string) *verifierv1.BeginRequest {
		return &verifierv1.BeginRequest{
			Deployment: &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: "effects: {kind: empty}\n"},
			Effects:    `[{"kind": "record_written", "match": {"p": {"param": "p"}}, "expected_count": 0}]`,
			Params:     verifierv1.StringParams(params),
		}
	}
	res, err := c.Begin(ctx, req(map[string]string{"p": "1", "zeta": "z", "age": "36"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.GetUnusedParams(), ","); got != "age,zeta" {
		t.Errorf("unused_params = %q, want age,zeta", got)
	}
	st, err := c.GetSession(ctx, &verifierv1.GetSessionRequest{SessionId: res.GetSessionId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(st.GetBegin().GetUnusedParams(), ","); got != "age,zeta" {
		t.Errorf("GetSession: unused_params = %q, want age,zeta", got)
	}
	res, err = c.Begin(ctx, req(map[string]string{"p": "1"}))
	if err != nil || res.GetUnusedParams() != nil {
		t.Errorf("every parameter used: unused_params = %q (%v), want none", res.GetUnusedParams(), err)
	}
}
