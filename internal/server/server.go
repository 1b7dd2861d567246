// Package server exposes the daemon's public gRPC API, VerifierService, with
// gRPC health checking and server reflection, an optional bearer token and
// TLS. Verdicts are data in responses; gRPC status codes are for transport
// and contract violations: InvalidArgument (with the field path) for bad
// input, FailedPrecondition for a session (or a run's step) that must not
// proceed, PermissionDenied for what only the operator may decide (an
// inline deployment, caller contracts under require_registered_contracts),
// NotFound for an unknown session or run, AlreadyExists for a run id
// reused with other arguments.
package server

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/verifierd/verifierd/internal/inflight"
	"github.com/verifierd/verifierd/internal/judgestream"
	"github.com/verifierd/verifierd/internal/oracle"
	"github.com/verifierd/verifierd/internal/runs"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/unstable/host/tracing"
)

// MaxMessageBytes bounds one public API response (a result carries matched
// records). Requests are bounded by session.MaxRequestBytes.
const MaxMessageBytes = 64 << 20

// Options configure the server.
type Options struct {
	// BearerToken, when set, is required on every call except health checks.
	BearerToken string
	// TLS, when set, serves TLS.
	TLS    *tls.Config
	Logger hclog.Logger
	// Connection are more server options, appended last: the daemon's
	// connection bounds (handshake timeout, keepalive and idle limits).
	Connection []grpc.ServerOption
	// Budget, when set, bounds the bytes of API requests in flight
	// (--max-inflight-bytes): an authenticated call holds its method's
	// bound while its message arrives (refused with ResourceExhausted when
	// the budget has no room), then exactly its message's size until it
	// returns.
	Budget *inflight.Budget
	// Ready, when set, is asked before every call but health checks: an
	// error (the store's keys changed under this replica) answers the call
	// FailedPrecondition with its message, so that nothing is served or
	// signed while the daemon is not fit to.
	Ready func() error
	// MaxJudgeRecords bounds the records of one Judge request, before and
	// after together (--max-judge-records), counted in its bytes before
	// any is decoded; over it the call is InvalidArgument naming the flag.
	// 0: no bound.
	MaxJudgeRecords int
	// Pace is how fast an authenticated call's request message must
	// arrive once the call asks for it (--min-body-rate, as for HTTP
	// bodies): a late one is cut with DeadlineExceeded and its hold given
	// back. The zero value cuts nothing.
	Pace MessagePace
}

// New returns a gRPC server with VerifierService, health and reflection.
func New(m *session.Manager, opts Options) (*grpc.Server, *health.Server) {
	return newServer(Service(m, opts.Logger), opts)
}

// newServer serves svc as VerifierService: New's body, apart for tests.
func newServer(svc verifierv1.VerifierServiceServer, opts Options) (*grpc.Server, *health.Server) {
	sopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxReceiveBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		// The budget and the UTF-8 check run where the bytes arrive,
		// before the chain (codec.go); the HTTP listener reserves its
		// bodies from the same budget.
		grpc.ForceServerCodecV2(newWireCodec(opts.Budget, opts.MaxJudgeRecords)),
		// What a call's stream may buffer before its message is asked for
		// (limits.go); a fixed window also turns off gRPC's window
		// estimate, which would grow it to 16 MiB per stream.
		grpc.InitialWindowSize(StreamWindowBytes),
		grpc.InitialConnWindowSize(ConnWindowBytes),
		// A call's headers are read before its token is checked: at most
		// what an HTTP request's headers may be (gRPC's default is 16 MiB).
		grpc.MaxHeaderListSize(MaxHeaderBytes),
		grpc.ChainUnaryInterceptor(Chain(opts)),
		grpc.ChainStreamInterceptor(authStream(opts.BearerToken), budgetStreams()),
		// The token and the budget are checked before a message is read
		// (limits.go).
		grpc.InTapHandle(tapIn(opts.BearerToken, opts.Budget, opts.Pace)),
		// Calls run on a pool of goroutines whose stacks have already
		// grown, instead of a fresh goroutine (and its stack growth) per
		// call; a call that finds every worker busy still gets its own.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	// Each call is a span when traces are on (docs/operations.md, Traces).
	sopts = append(sopts, tracing.ServerOptions()...)
	sopts = append(sopts, opts.Connection...)
	srv := grpc.NewServer(sopts...)
	register(srv, &verifierv1.VerifierService_ServiceDesc, svc)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(verifierv1.VerifierService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv, hs
}

// Chain is the one interceptor chain of the API's unary calls, over gRPC
// (New) and over the HTTP/JSON gateway (internal/httpapi.RegisterGateway,
// which runs every call of Service through it): a panic becomes Internal
// with the details in the log, a call without the bearer token (when one
// is set) is Unauthenticated, and every call is logged at debug level with
// its method, code and duration. Health checks pass without the token.
func Chain(opts Options) grpc.UnaryServerInterceptor {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return chainUnary(logUnary(logger), recoverUnary(logger), authUnary(opts.BearerToken), readyUnary(opts.Ready))
}

// readyUnary refuses every call but health checks while ready answers an
// error.
func readyUnary(ready func() error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if ready != nil && !exempt(info.FullMethod) {
			if err := ready(); err != nil {
				return nil, status.Error(codes.FailedPrecondition, clip(err.Error()))
			}
		}
		return h(ctx, req)
	}
}

// chainUnary runs ics in order, the first outermost.
func chainUnary(ics ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		next := h
		for _, ic := range slices.Backward(ics) {
			inner := next
			next = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, inner) }
		}
		return next(ctx, req)
	}
}

// logUnary logs each call at debug level: method, gRPC code, duration.
func logUnary(logger hclog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !logger.IsDebug() {
			return h(ctx, req)
		}
		start := time.Now()
		res, err := h(ctx, req)
		logger.Debug("call", "method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start))
		return res, err
	}
}

// Service returns the VerifierService implementation that New serves, for
// the in-process HTTP/JSON gateway, which runs each call of it through
// Chain (internal/httpapi.RegisterGateway).
func Service(m *session.Manager, logger hclog.Logger) verifierv1.VerifierServiceServer {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &service{m: m, logger: logger}
	if m != nil { // the judge alone (tests) needs no Manager
		s.runs = runs.For(m)
	}
	return s
}

type service struct {
	verifierv1.UnimplementedVerifierServiceServer
	m      *session.Manager
	runs   *runs.Service // the runs service (internal/runs; runs.go serves it)
	logger hclog.Logger
}

func (s *service) TestConnection(ctx context.Context, req *verifierv1.TestConnectionRequest) (*verifierv1.TestConnectionResponse, error) {
	params, err := paramTexts(req.GetParams())
	if err != nil {
		return nil, err
	}
	checks, err := s.m.TestConnection(ctx, []byte(req.GetDeploymentYaml()), req.GetDeploymentName(), params)
	if err != nil {
		return nil, toStatus(err)
	}
	res := &verifierv1.TestConnectionResponse{}
	for _, c := range checks {
		res.Candidates = append(res.Candidates, &verifierv1.CandidateConnection{
			CandidateIndex: int32(c.CandidateIndex), Kind: c.Kind, Tier: int32(c.Tier),
			Reachable: c.Reachable, Message: c.Message, Warnings: c.Warnings,
			Newness: c.Newness, NewnessDeclared: c.NewnessDeclared, Narrowing: c.Narrowing,
			NewnessRefusal: c.NewnessRefusal,
		})
	}
	return res, nil
}

func (s *service) Begin(ctx context.Context, req *verifierv1.BeginRequest) (*verifierv1.BeginResponse, error) {
	params, err := paramTexts(req.GetParams())
	if err != nil {
		return nil, err
	}
	res, err := s.m.Begin(ctx, session.BeginRequest{
		Deployment: []byte(req.GetDeploymentYaml()), DeploymentName: req.GetDeploymentName(),
		Effects: []byte(req.GetEffects()), Params: params,
		Workflow: req.GetWorkflow(), Step: req.GetStep(), RunID: req.GetRunId(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return beginToProto(res), nil
}

func beginToProto(res *session.BeginResult) *verifierv1.BeginResponse {
	out := &verifierv1.BeginResponse{SessionId: res.SessionID, RegisteredStep: registeredToProto(res.Registered), UnusedParams: res.UnusedParams}
	for _, e := range res.Effects {
		out.Effects = append(out.Effects, &verifierv1.BegunEffect{
			ContractHash: e.ContractHash, Tier: int32(e.Tier), Candidate: e.Candidate, CandidateIndex: int32(e.CandidateIndex),
		})
	}
	return out
}

func (s *service) Verify(ctx context.Context, req *verifierv1.VerifyRequest) (*verifierv1.VerifyResponse, error) {
	res, err := s.m.Verify(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	rec, err := envelopeStruct(res.Receipt)
	if err != nil {
		return nil, toStatus(err)
	}
	r := resultToProto(res)
	return &verifierv1.VerifyResponse{
		SessionId: req.GetSessionId(), Outcome: r.GetOutcome(), TerminalOutcome: r.GetTerminalOutcome(), Effects: r.GetEffects(),
		RegisteredStep: registeredToProto(res.Registered), Receipt: rec,
	}, nil
}

func registeredToProto(r *session.RegisteredStep) *verifierv1.RegisteredStep {
	if r == nil {
		return nil
	}
	return &verifierv1.RegisteredStep{Workflow: r.Workflow, WorkflowDigest: r.WorkflowDigest, Step: r.Step}
}

func (s *service) GetSession(ctx context.Context, req *verifierv1.GetSessionRequest) (*verifierv1.GetSessionResponse, error) {
	st, err := s.m.Get(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &verifierv1.GetSessionResponse{
		SessionId: st.SessionID, State: verifierv1.SessionState_begun,
		Begin: beginToProto(&st.Begin), BegunAt: timestamppb.New(st.BegunAt),
	}
	if st.Result != nil {
		out.State = verifierv1.SessionState_verified
		out.Result = resultToProto(st.Result)
		out.VerifiedAt = timestamppb.New(st.Result.VerifiedAt)
		if out.Receipt, err = envelopeStruct(st.Result.Receipt); err != nil {
			return nil, toStatus(err)
		}
	}
	for _, r := range st.Reverifications {
		rv, err := reverificationToProto(r)
		if err != nil {
			return nil, toStatus(err)
		}
		out.Reverifications = append(out.Reverifications, rv)
	}
	return out, nil
}

func (s *service) Judge(ctx context.Context, req *verifierv1.JudgeRequest) (*verifierv1.JudgeResponse, error) {
	raw := judgestream.From(ctx) // the records apart, as they arrived (judgewire.go)
	before, err := readFromProto(req.GetBefore(), raw, 0, "before")
	if err != nil {
		return nil, err
	}
	after, err := readFromProto(req.GetAfter(), raw, 1, "after")
	if err != nil {
		return nil, err
	}
	params, err := paramTexts(req.GetParams())
	if err != nil {
		return nil, err
	}
	jr := session.JudgeRequest{Effects: []byte(req.GetEffects()), Params: params, Now: time.Now().UTC(),
		Before: judge.Snapshot{Reachable: before.Reachable}, After: judge.Snapshot{Reachable: after.Reachable},
		BeforeBatch: &before, AfterBatch: &after}
	if req.GetNow() != nil {
		jr.Now = req.GetNow().AsTime()
	}
	if f := req.GetFreshness(); f != nil {
		if f.GetField() == "" || f.GetWindowS() < 0 {
			return nil, invalid("freshness", "give field (the timestamp field) and window_s >= 0")
		}
		jr.Freshness = &judge.Freshness{Field: f.GetField(), WindowS: f.GetWindowS()}
	}
	res, err := session.Judge(jr)
	if err != nil {
		return nil, toStatus(err)
	}
	r := resultToProto(res)
	return &verifierv1.JudgeResponse{Outcome: r.GetOutcome(), Effects: r.GetEffects()}, nil
}

// readFromProto decodes a read with the fast decoder into a compact batch
// (judge.BatchSnapshot); Before and After of the session request carry only
// reachability then. apart's read i are the read's records when the
// request was decoded without them (the Judge RPC and POST /v1/judge),
// decoded one at a time after the read's own.
func readFromProto(r *verifierv1.Read, apart *judgestream.Records, i int, path string) (judge.BatchSnapshot, error) {
	streamed := apart.Of(i)
	if r == nil {
		// splitJudgeRecords keeps every read it took records from.
		return judge.BatchSnapshot{}, invalid(path, "missing; give {reachable, records}")
	}
	snap := judge.BatchSnapshot{Reachable: r.GetReachable()}
	if !snap.Reachable {
		if len(r.GetRecords())+len(streamed) > 0 {
			return snap, invalid(path+".records", "an unreachable read has no records")
		}
		return snap, nil
	}
	parts := make([][]byte, len(r.GetRecords()), len(r.GetRecords())+len(streamed))
	for i, rec := range r.GetRecords() {
		raw, err := recordJSON(rec, fmt.Sprintf("%s.records[%d]", path, i))
		if err != nil {
			return snap, err
		}
		parts[i] = raw
	}
	parts, err := streamedRecordJSON(parts, streamed, apart.Encoding(), path)
	if err != nil {
		return snap, err
	}
	b, err := judge.DecodeRecordList(parts, path+".records")
	if err != nil {
		at := path + ".records"
		if se, ok := errors.AsType[*judge.SyntaxError](err); ok {
			at = se.Path
		}
		return snap, invalid(at, fmt.Sprintf("each record is one JSON object: %v", err))
	}
	snap.Batch = b
	return snap, nil
}

// toStatus maps session refusals onto gRPC codes with the field path.
func toStatus(err error) error {
	if ie, ok := errors.AsType[*store.IntegrityError](err); ok {
		// A stored value that fails its check is never served.
		return status.Error(codes.DataLoss, clip(ie.Error()))
	}
	if ke, ok := errors.AsType[*store.KeyMismatchError](err); ok {
		// The store's keys changed under this replica: nothing is signed.
		return status.Error(codes.FailedPrecondition, clip(ke.Error()))
	}
	var se *session.Error
	if !errors.As(err, &se) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return status.FromContextError(err).Err()
		}
		return status.Error(codes.Internal, clip(err.Error()))
	}
	st := status.New(grpcCode(se.Kind), clip(se.Error()))
	if se.TerminalOutcome != "" {
		// A refused Begin recorded in the ledger: its outcome and receipt.
		md := map[string]string{"terminal_outcome": se.TerminalOutcome}
		if len(se.Receipt) > 0 {
			md["receipt"] = string(se.Receipt)
		}
		if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: se.TerminalOutcome, Domain: ReceiptDomain, Metadata: md}); err == nil {
			st = d
		}
	}
	if se.Path != "" {
		desc := se.Message
		if se.Code != "" {
			desc = se.Code + ": " + desc
		}
		if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: clip(se.Path), Description: clip(desc)}}}); err == nil {
			st = d
		}
	}
	if se.Code != "" {
		if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: se.Code, Domain: "verifierd"}); err == nil {
			st = d
		}
	}
	return st.Err()
}

// grpcCode is the gRPC status code a session refusal of kind k answers
// with (InvalidArgument for Invalid and for an unknown kind): the one
// mapping of session.ErrorKind onto the API, whose HTTP/JSON gateway turns
// the code into the HTTP status (docs/http-api.md).
func grpcCode(k session.ErrorKind) codes.Code {
	switch k {
	case session.Refused:
		return codes.FailedPrecondition
	case session.NotFound:
		return codes.NotFound
	case session.Denied:
		return codes.PermissionDenied
	case session.Exists:
		return codes.AlreadyExists
	}
	return codes.InvalidArgument
}

// clip bounds what a status may carry: the status travels in an HTTP/2
// trailer, and a message quoting a 10 MB input once tore the client's
// connection down (COMPRESSION_ERROR) instead of answering.
func clip(s string) string {
	const limit = 2048
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + fmt.Sprintf("… (%d bytes)", len(s))
}

func invalid(path, msg string) error {
	return toStatus(&session.Error{Kind: session.Invalid, Path: path, Message: msg})
}

var (
	verdictToProto = map[judge.Decision]verifierv1.Verdict{
		judge.Confirmed: verifierv1.Verdict_CONFIRMED, judge.Refuted: verifierv1.Verdict_REFUTED,
		judge.Indeterminate: verifierv1.Verdict_INDETERMINATE,
	}
	classToProto = map[judge.Class]verifierv1.ResultClass{
		judge.ClassConfirmed: verifierv1.ResultClass_confirmed, judge.ClassStale: verifierv1.ResultClass_stale,
		judge.ClassUnavailable: verifierv1.ResultClass_unavailable, judge.ClassIndeterminate: verifierv1.ResultClass_indeterminate,
		judge.ClassConflicting: verifierv1.ResultClass_conflicting, judge.ClassRefuted: verifierv1.ResultClass_refuted,
	}
	outcomeToProto = map[judge.Outcome]verifierv1.Outcome{
		judge.Verified: verifierv1.Outcome_VERIFIED, judge.ReconciliationRequired: verifierv1.Outcome_RECONCILIATION_REQUIRED,
		judge.HaltedBeforeEffect: verifierv1.Outcome_HALTED_BEFORE_EFFECT,
	}
	taskKindToProto = map[string]verifierv1.ReconciliationKind{
		judge.TaskEffectRefuted: verifierv1.ReconciliationKind_effect_refuted, judge.TaskEffectIndeterminate: verifierv1.ReconciliationKind_effect_indeterminate,
		judge.TaskCompensationFailed: verifierv1.ReconciliationKind_compensation_failed,
	}
	actionToProto = map[string]verifierv1.SuggestedAction{
		judge.ActionRestoreAccess: verifierv1.SuggestedAction_RESTORE_ACCESS, judge.ActionRemoveDuplicates: verifierv1.SuggestedAction_REMOVE_DUPLICATES,
		judge.ActionManualRepair:        verifierv1.SuggestedAction_MANUAL_REPAIR,
		judge.ActionReverifyBeforeRetry: verifierv1.SuggestedAction_REVERIFY_BEFORE_RETRY,
	}
)

// optInt is a count as the API carries it: an int32, a JSON number. A
// count is at most a read's records, far below 2^31; one past it is
// clamped there rather than wrapped.
func optInt(p *int) *int32 {
	if p == nil {
		return nil
	}
	v := int32(min(*p, math.MaxInt32))
	return &v
}

func resultToProto(r *session.Result) *verifierv1.StepResult {
	out := &verifierv1.StepResult{Outcome: outcomeToProto[r.Outcome], TerminalOutcome: terminalToProto[r.TerminalOutcome]}
	for _, e := range r.Effects {
		pe := &verifierv1.EffectResult{
			Verdict: verdictToProto[e.Verdict], Result: classToProto[e.Result],
			ObservedCount: optInt(e.ObservedCount), ExpectedCount: optInt(e.ExpectedCount),
			ObservedValue: e.ObservedValue, ExpectedValue: e.ExpectedValue,
			ContractHash: e.ContractHash, Tier: int32(e.Tier), OracleRung: int32(oracle.Of(e.Substrate, sdk.Tier(e.Tier))), Substrate: e.Substrate,
			Newness: e.Newness, CensusScope: e.CensusScope, CollateralScope: e.CollateralScope,
		}
		for _, rs := range e.Reasons {
			pe.Reasons = append(pe.Reasons, &verifierv1.Reason{Code: rs.Code, Message: rs.Message})
		}
		for _, rec := range e.MatchedRecords {
			pe.MatchedRecords = append(pe.MatchedRecords, recordStruct(rec))
		}
		if t := e.ReconciliationTask; t != nil {
			pt := &verifierv1.ReconciliationTask{
				Id: t.ID, Kind: taskKindToProto[t.Kind], Substrate: t.Substrate, EffectKind: string(t.EffectKind),
				ContractHash: t.ContractHash, Verdict: verdictToProto[t.Verdict], SuggestedAction: actionToProto[t.SuggestedAction],
				Evidence: &verifierv1.ReconciliationEvidence{
					ObservedCount: optInt(t.Evidence.ObservedCount), ExpectedCount: optInt(t.Evidence.ExpectedCount),
					ValuesMatch: t.Evidence.ValuesMatch, RecordDigests: t.Evidence.RecordDigests,
				},
			}
			for _, rs := range t.Reasons {
				pt.ReasonCodes = append(pt.ReasonCodes, rs.Code)
			}
			pe.ReconciliationTask = pt
		}
		out.Effects = append(out.Effects, pe)
	}
	return out
}

func recoverUnary(logger hclog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (res any, err error) {
		defer func() {
			if r := recover(); r != nil {
				logger.Error("panic in a call", "method", info.FullMethod, "panic", r)
				err = status.Error(codes.Internal, "internal error; the daemon log has the details")
			}
		}()
		return h(ctx, req)
	}
}

// exempt lists methods served without a token: health checks.
func exempt(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/")
}

func checkToken(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		// The scheme is case-insensitive (RFC 6750 via RFC 9110 §11.1).
		scheme, got, ok := strings.Cut(strings.TrimSpace(v), " ")
		if ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "send the API token as 'authorization: Bearer <token>'")
}

func authUnary(token string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !exempt(info.FullMethod) {
			if err := checkToken(ctx, token); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	}
}

func authStream(token string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !exempt(info.FullMethod) {
			if err := checkToken(ss.Context(), token); err != nil {
				return err
			}
		}
		return h(srv, ss)
	}
}
