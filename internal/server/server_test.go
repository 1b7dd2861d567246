package server

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/workflow"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/sdk"
)

// emptyAdapter reads an empty table: enough for Begin and Verify to run.
type emptyAdapter struct{}

func (emptyAdapter) Info() sdk.Info                                        { return sdk.Info{Kind: "empty", Tier: 1} }
func (emptyAdapter) Configure(context.Context, sdk.ConfigureRequest) error { return nil }
func (emptyAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true}, nil
}
func (emptyAdapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records()}, nil
}
func (emptyAdapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records()}, nil
}

// serve starts the public API on an in-memory listener.
func serve(t *testing.T, opts Options) *grpc.ClientConn {
	t.Helper()
	conn, _ := serveDial(t, opts)
	return conn
}

// serveDial is serve, with a dialer of raw connections to the server too.
func serveDial(t *testing.T, opts Options) (*grpc.ClientConn, func() (net.Conn, error)) {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host.RegisterInProcess("empty", func() sdk.Adapter { return emptyAdapter{} })
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// These tests are about the API layer: inline deployments and caller
	// contracts with no change claim (an absence check on an empty adapter) keep them
	// small; the trust rules have tests of their own.
	noClaim, noRegistered := false, false
	daemon := &config.Daemon{Policy: &workflow.Policy{RequireChangeClaim: &noClaim, RequireRegisteredContracts: &noRegistered}}
	srv, _ := New(mustManager(t, session.Options{Host: host, Store: st, Daemon: daemon, AllowInline: true}), opts)
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(); host.Close(); st.Close() })
	return conn, lis.Dial
}

// wantCode asserts the code, that the message names want, and that it
// stays short.
func wantCode(t *testing.T, err error, code codes.Code, want string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), want) {
		t.Errorf("status = %s %q, want %s naming %q", st.Code(), clip(st.Message()), code, want)
	}
	if len(st.Message()) > 4096 {
		t.Errorf("the status message is %d bytes; it echoes the input", len(st.Message()))
	}
}

// rawCodec sends hand-made wire bytes, which a proto client would refuse
// to marshal.
type rawCodec struct{}

func (rawCodec) Name() string                       { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { return nil }

func TestInvalidUTF8IsInvalidArgument(t *testing.T) {
	t.Parallel()
	conn := serve(t, Options{})
	bad := []byte("ses_\xff\xfe")
	verify := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bad)
	value := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), bad) // string_value
	entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("p"))
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), value)
	begin := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte("[]"))
	begin = protowire.AppendBytes(protowire.AppendTag(begin, 7, protowire.BytesType), entry)
	tests := map[string]struct {
		method string
		req    []byte
		path   string
	}{
		"verify session_id": {"/verifierd.verifier.v1.VerifierService/Verify", verify, "session_id"},
		"begin params":      {"/verifierd.verifier.v1.VerifierService/Begin", begin, "params.value.string_value"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out []byte
			err := conn.Invoke(context.Background(), tc.method, tc.req, &out, grpc.ForceCodec(rawCodec{}))
			wantCode(t, err, codes.InvalidArgument, tc.path+": not valid UTF-8")
		})
	}
}

func TestHostileRequestsRefusedWithCodes(t *testing.T) {
	t.Parallel()
	conn := serve(t, Options{})
	c := verifierv1.NewVerifierServiceClient(conn)
	ctx := context.Background()
	dep := &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: "effects: {kind: empty}\n"}
	one := `{"kind": "record_written", "match": {"p": "1"}, "expected_count": 0}`
	effects := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(one+",", n), ",") + "]"
	}
	tests := map[string]struct {
		call func() error
		code codes.Code
		want string
	}{
		"1001 effects": {func() error {
			_, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: dep, Effects: effects(1001)})
			return err
		}, codes.InvalidArgument, "effects: 1001 effects is over the limit of 1000 effects"},
		"10 MB kind": {func() error {
			d := &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: "effects: {kind: " + strings.Repeat("k", 10<<20) + "}\n"}
			_, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: d, Effects: effects(1)})
			return err
		}, codes.InvalidArgument, "deployment: 10485778 bytes is over the limit of 1048576 bytes"},
		"900 KB kind": {func() error {
			d := &verifierv1.BeginRequest_DeploymentYaml{DeploymentYaml: "effects: {kind: " + strings.Repeat("k", 900<<10) + "}\n"}
			_, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: d, Effects: effects(1)})
			return err
		}, codes.InvalidArgument, "kind: 921600 bytes is over the limit of 256 bytes"},
		"10 MB value": {func() error {
			_, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: dep, Effects: effects(1), Params: verifierv1.StringParams(map[string]string{"p": strings.Repeat("v", 10<<20)})})
			return err
		}, codes.InvalidArgument, "params.p: 10485760 bytes is over the limit of 65536 bytes"},
		"20 MB message": {func() error {
			_, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: dep, Effects: strings.Repeat("\x00", 20<<20)})
			return err
		}, codes.ResourceExhausted, "16777216"},
		"1 MB session id": {func() error {
			// Over Verify's message bound: refused before it is decoded.
			_, err := c.Verify(ctx, &verifierv1.VerifyRequest{SessionId: strings.Repeat("s", 1<<20)})
			return err
		}, codes.ResourceExhausted, "over the 65536 bytes that method takes"},
		"100 KB of headers": {func() error {
			// Over the headers' bound (MaxHeaderBytes), which the server
			// announces: never sent whole.
			big := metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("h", 100<<10))
			_, err := c.Verify(big, &verifierv1.VerifyRequest{SessionId: "ses_1"})
			return err
		}, codes.Internal, "header list size"},
		"1 KB session id": {func() error {
			_, err := c.Verify(ctx, &verifierv1.VerifyRequest{SessionId: strings.Repeat("s", 1<<10)})
			return err
		}, codes.InvalidArgument, "session_id: 1024 bytes is over the limit of 128 bytes"},
		"unknown session": {func() error {
			_, err := c.Verify(ctx, &verifierv1.VerifyRequest{SessionId: "ses_" + strings.Repeat("0", 100)})
			return err
		}, codes.NotFound, "no session"},
		"empty session": {func() error {
			_, err := c.GetSession(ctx, &verifierv1.GetSessionRequest{})
			return err
		}, codes.InvalidArgument, "session_id"},
		"deep effects": {func() error {
			_, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: dep, Effects: strings.Repeat("[", 5000) + strings.Repeat("]", 5000)})
			return err
		}, codes.InvalidArgument, "limit of 32 levels"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantCode(t, tc.call(), tc.code, tc.want)
		})
	}
	// The connection survived every refusal and good traffic still flows.
	begun, err := c.Begin(ctx, &verifierv1.BeginRequest{Deployment: dep, Effects: effects(1)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Verify(ctx, &verifierv1.VerifyRequest{SessionId: begun.GetSessionId()})
	if err != nil || res.GetOutcome() != verifierv1.Outcome_VERIFIED {
		t.Fatalf("verify = %v, %v", res.GetOutcome(), err)
	}
}

func TestBearerSchemeCaseInsensitive(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		header string
		code   codes.Code
	}{
		"Bearer":        {"Bearer s3cret", codes.OK},
		"bearer":        {"bearer s3cret", codes.OK},
		"BEARER spaces": {"BEARER   s3cret ", codes.OK},
		"wrong token":   {"bearer s3cre", codes.Unauthenticated},
		"other scheme":  {"Basic s3cret", codes.Unauthenticated},
		"no scheme":     {"s3cret", codes.Unauthenticated},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", tc.header))
			if got := status.Code(checkToken(ctx, "s3cret")); got != tc.code {
				t.Errorf("%q: code %s, want %s", tc.header, got, tc.code)
			}
		})
	}
}

// mustManager is session.New, failing t on a refusal.
func mustManager(t *testing.T, o session.Options) *session.Manager {
	t.Helper()
	m, err := session.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
