package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/sdk"
	adapterv1 "github.com/verifierd/verifierd/sdk/internal/adapterpb"
	"github.com/verifierd/verifierd/sdk/internal/fromproto"
	"github.com/verifierd/verifierd/sdk/internal/toproto"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/host/tracing"
)

// NewGRPCServer returns a gRPC server with message-size bounds of
// maxMessageBytes and panic recovery, plus opts (go-plugin passes its TLS
// options here). When traces are on (tracing.Enabled) each call is a span
// under the daemon's.
func NewGRPCServer(logger hclog.Logger, maxMessageBytes int, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, tracing.ServerOptions()...)
	opts = append(opts, ServerOptions()...)
	opts = append(opts,
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.MaxSendMsgSize(maxMessageBytes),
		grpc.ChainUnaryInterceptor(recoverUnary(logger)),
		grpc.ChainStreamInterceptor(recoverStream(logger)),
		// Calls run on a pool of goroutines whose stacks have already
		// grown; a call that finds every worker busy gets its own.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	)
	return grpc.NewServer(opts...)
}

// A panic in adapter code must not take the plugin down with a half-written
// stream: it becomes codes.Internal for that call, and the stack goes to the
// log.
func recoverUnary(logger hclog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, panicStatus(logger, info.FullMethod, r)
			}
		}()
		return handler(ctx, req)
	}
}

func recoverStream(logger hclog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = panicStatus(logger, info.FullMethod, r)
			}
		}()
		return handler(srv, ss)
	}
}

func panicStatus(logger hclog.Logger, method string, r any) error {
	logger.Error("adapter panicked", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal, "adapter panicked in %s: %v", method, r)
}

// server serves AdapterService for one plugin process: every Configure
// builds a fresh Adapter with the factory and files it under a new instance
// id; later calls name the instance and carry the session's parameters.
type server struct {
	adapterv1.UnimplementedAdapterServiceServer

	factory func() sdk.Adapter
	// probe answers GetInfo without an instance; it is never configured.
	probe  sdk.Adapter
	logger hclog.Logger

	mu        sync.RWMutex
	instances map[string]sdk.Adapter
	next      uint64
}

// Register serves AdapterService on s for the adapters factory builds, one
// per Configure.
func Register(s *grpc.Server, factory func() sdk.Adapter, logger hclog.Logger) {
	adapterv1.RegisterAdapterServiceServer(s, newServer(factory, logger))
}

func newServer(factory func() sdk.Adapter, logger hclog.Logger) *server {
	return &server{factory: factory, probe: factory(), logger: logger, instances: map[string]sdk.Adapter{}}
}

func (s *server) ctx(ctx context.Context, args ...any) context.Context {
	return sdk.WithLogger(ctx, s.logger.With(args...))
}

// instance finds a configured instance; an unknown id is the daemon's
// contract violation (it released the id, or never configured it).
func (s *server) instance(id string) (sdk.Adapter, error) {
	s.mu.RLock()
	a, ok := s.instances[id]
	s.mu.RUnlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no configured adapter instance %q in this process: configure it again", id)
	}
	return a, nil
}

// GetInfo asks the adapter each time: the daemon asks again after
// Configure, naming the instance, and an adapter whose tier depends on its
// configuration reports it then.
func (s *server) GetInfo(_ context.Context, req *adapterv1.GetInfoRequest) (*adapterv1.GetInfoResponse, error) {
	a := s.probe
	if id := req.GetInstanceId(); id != "" {
		var err error
		if a, err = s.instance(id); err != nil {
			return nil, err
		}
	}
	return toproto.GetInfoResponse(a.Info(), APIVersions), nil
}

func (s *server) Configure(ctx context.Context, req *adapterv1.ConfigureRequest) (*adapterv1.ConfigureResponse, error) {
	a := s.factory()
	if err := a.Configure(s.ctx(ctx), fromproto.ConfigureRequest(req)); err != nil {
		if c, ok := a.(io.Closer); ok {
			_ = c.Close()
		}
		return toproto.ConfigureResponse("", err), nil
	}
	s.mu.Lock()
	s.next++
	id := "i" + strconv.FormatUint(s.next, 10)
	s.instances[id] = a
	s.mu.Unlock()
	return toproto.ConfigureResponse(id, nil), nil
}

// CheckParams binds a session's parameters without reading.
func (s *server) CheckParams(ctx context.Context, req *adapterv1.CheckParamsRequest) (*adapterv1.CheckParamsResponse, error) {
	a, err := s.instance(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	pc, ok := a.(sdk.ParamChecker)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "adapter binds no run parameters")
	}
	if err := pc.CheckParams(s.ctx(ctx), nonNil(req.GetParams())); err != nil {
		return &adapterv1.CheckParamsResponse{Refusal: toproto.Refusal(err)}, nil
	}
	return &adapterv1.CheckParamsResponse{}, nil
}

// Release drops an instance; an adapter that is an io.Closer is closed
// (after the captures still running on it, which hold their own
// references, the adapter's Close decides how to wait).
func (s *server) Release(_ context.Context, req *adapterv1.ReleaseRequest) (*adapterv1.ReleaseResponse, error) {
	s.mu.Lock()
	a, ok := s.instances[req.GetInstanceId()]
	delete(s.instances, req.GetInstanceId())
	s.mu.Unlock()
	if c, isCloser := a.(io.Closer); ok && isCloser {
		_ = c.Close()
	}
	return &adapterv1.ReleaseResponse{}, nil
}

func (s *server) TestConnection(ctx context.Context, req *adapterv1.TestConnectionRequest) (*adapterv1.TestConnectionResponse, error) {
	a, err := s.instance(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	res, err := a.TestConnection(s.ctx(ctx), sdk.TestRequest{Params: nonNil(req.GetParams())})
	if ce, ok := errors.AsType[*refusal.Error](err); ok {
		return &adapterv1.TestConnectionResponse{Message: "run parameters refused: " + ce.Error(), Refusal: toproto.Refusal(ce)}, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Unknown, "test connection: %v", err)
	}
	return toproto.TestConnectionResponse(res), nil
}

func (s *server) CaptureBefore(req *adapterv1.CaptureBeforeRequest, stream grpc.ServerStreamingServer[adapterv1.CaptureBeforeResponse]) error {
	a, err := s.instance(req.GetInstanceId())
	if err != nil {
		return err
	}
	send := func(c *adapterv1.CaptureChunk) error { return stream.Send(&adapterv1.CaptureBeforeResponse{Chunk: c}) }
	creq := fromproto.CaptureRequest(req.GetSpec(), req.GetParams())
	// Begin does not ask CheckParams in a round trip of its own: the
	// baseline capture binds the parameters first, with the adapter's own
	// CheckParams (in this process), and refuses exactly as that call
	// would have, before anything is read.
	if pc, ok := a.(sdk.ParamChecker); ok {
		if err := pc.CheckParams(s.ctx(stream.Context(), "capture_id", creq.CaptureID), creq.Params); err != nil {
			if err := send(toproto.RefusalChunk(err, time.Now)); err != nil {
				return err
			}
			return send(toproto.TrailerChunk(0))
		}
	}
	return s.capture(stream.Context(), "capture before", creq, a.CaptureBefore, send)
}

func (s *server) CaptureAfter(req *adapterv1.CaptureAfterRequest, stream grpc.ServerStreamingServer[adapterv1.CaptureAfterResponse]) error {
	a, err := s.instance(req.GetInstanceId())
	if err != nil {
		return err
	}
	return s.capture(stream.Context(), "capture after", fromproto.CaptureRequest(req.GetSpec(), req.GetParams()), a.CaptureAfter,
		func(c *adapterv1.CaptureChunk) error { return stream.Send(&adapterv1.CaptureAfterResponse{Chunk: c}) })
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// capture runs one capture and streams it: a header, bounded batches, and a
// trailer with the count. Any failure ends the stream with an error and no
// trailer, so the daemon can never take a partial read for a complete one.
func (s *server) capture(
	ctx context.Context,
	what string,
	req sdk.CaptureRequest,
	read func(context.Context, sdk.CaptureRequest) (sdk.Capture, error),
	send func(*adapterv1.CaptureChunk) error,
) error {
	ctx = s.ctx(ctx, "capture_id", req.CaptureID, "effect_index", req.EffectIndex)
	c, err := read(ctx, req)
	if ce, ok := errors.AsType[*refusal.Error](err); ok {
		// The parameters could not be bound: a refusal, not a fault, and
		// never a read set.
		if err := send(toproto.RefusalChunk(ce, time.Now)); err != nil {
			return err
		}
		return send(toproto.TrailerChunk(0))
	}
	if err != nil {
		return status.Errorf(codes.Unknown, "%s: %v", what, err)
	}
	if err := send(toproto.HeaderChunk(c, time.Now)); err != nil {
		return err
	}
	var count int64
	if c.Reachable && c.Records != nil {
		batch := toproto.Batcher{MaxRecords: MaxBatchRecords, MaxBytes: MaxBatchBytes}
		for rec, err := range c.Records {
			if err != nil {
				return status.Errorf(codes.Unknown, "%s: reading record %d: %v", what, count, err)
			}
			if err := ctx.Err(); err != nil {
				return status.FromContextError(err).Err()
			}
			full, size, err := batch.Add(rec)
			if err != nil {
				return status.Errorf(codes.Internal, "%s: record %d: %v", what, count, err)
			}
			if size > MaxRecordBytes {
				return status.Errorf(codes.ResourceExhausted, "%s: record %d is %d bytes, over the %d-byte limit for one record", what, count, size, MaxRecordBytes)
			}
			if full != nil {
				if err := send(toproto.BatchChunk(full)); err != nil {
					return err
				}
			}
			count++
		}
		if rest := batch.Flush(); rest != nil {
			if err := send(toproto.BatchChunk(rest)); err != nil {
				return err
			}
		}
	}
	return send(toproto.TrailerChunk(count))
}

func (s *server) Verdict(ctx context.Context, req *adapterv1.VerdictRequest) (*adapterv1.VerdictResponse, error) {
	a, err := s.instance(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	hook, ok := a.(sdk.VerdictHook)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "adapter has no verdict hook")
	}
	d, err := hook.Verdict(s.ctx(ctx), fromproto.VerdictRequest(req))
	if err != nil {
		return nil, status.Errorf(codes.Unknown, "verdict hook: %v", err)
	}
	return toproto.VerdictResponse(d), nil
}
