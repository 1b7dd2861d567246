package plugin

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adapterv1 "github.com/verifierd/verifierd/proto/verifierd/adapter/v1"
	"github.com/verifierd/verifierd/sdk/internal/fromproto"
	"github.com/verifierd/verifierd/sdk/internal/sdkapi"
	"github.com/verifierd/verifierd/sdk/internal/toproto"
	"github.com/verifierd/verifierd/sdk/tracing"
)

// NewGRPCServer returns a gRPC server with the SDK's message-size bounds and
// panic recovery, plus opts (go-plugin passes its TLS options here). When
// traces are on (tracing.Enabled) each call is a span under the daemon's.
func NewGRPCServer(logger hclog.Logger, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, tracing.ServerOptions()...)
	opts = append(opts,
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.ChainUnaryInterceptor(recoverUnary(logger)),
		grpc.ChainStreamInterceptor(recoverStream(logger)),
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

// server serves one Adapter over AdapterService.
type server struct {
	adapterv1.UnimplementedAdapterServiceServer

	adapter sdkapi.Adapter
	logger  hclog.Logger
}

func newServer(a sdkapi.Adapter, logger hclog.Logger) *server {
	return &server{adapter: a, logger: logger}
}

func (s *server) ctx(ctx context.Context, args ...any) context.Context {
	return sdkapi.WithLogger(ctx, s.logger.With(args...))
}

// GetInfo asks the adapter each time: the daemon asks again after
// Configure, and an adapter whose tier depends on its configuration
// reports it then.
func (s *server) GetInfo(context.Context, *adapterv1.GetInfoRequest) (*adapterv1.GetInfoResponse, error) {
	return toproto.GetInfoResponse(s.adapter.Info(), APIVersions), nil
}

func (s *server) Configure(ctx context.Context, req *adapterv1.ConfigureRequest) (*adapterv1.ConfigureResponse, error) {
	err := s.adapter.Configure(s.ctx(ctx), fromproto.ConfigureRequest(req))
	return toproto.ConfigureResponse(err), nil
}

func (s *server) TestConnection(ctx context.Context, _ *adapterv1.TestConnectionRequest) (*adapterv1.TestConnectionResponse, error) {
	res, err := s.adapter.TestConnection(s.ctx(ctx))
	if err != nil {
		return nil, status.Errorf(codes.Unknown, "test connection: %v", err)
	}
	return toproto.TestConnectionResponse(res), nil
}

func (s *server) CaptureBefore(req *adapterv1.CaptureBeforeRequest, stream grpc.ServerStreamingServer[adapterv1.CaptureBeforeResponse]) error {
	return s.capture(stream.Context(), "capture before", req.GetSpec(), s.adapter.CaptureBefore,
		func(c *adapterv1.CaptureChunk) error { return stream.Send(&adapterv1.CaptureBeforeResponse{Chunk: c}) })
}

func (s *server) CaptureAfter(req *adapterv1.CaptureAfterRequest, stream grpc.ServerStreamingServer[adapterv1.CaptureAfterResponse]) error {
	return s.capture(stream.Context(), "capture after", req.GetSpec(), s.adapter.CaptureAfter,
		func(c *adapterv1.CaptureChunk) error { return stream.Send(&adapterv1.CaptureAfterResponse{Chunk: c}) })
}

// capture runs one capture and streams it: a header, bounded batches, and a
// trailer with the count. Any failure ends the stream with an error and no
// trailer, so the daemon can never take a partial read for a complete one.
func (s *server) capture(
	ctx context.Context,
	what string,
	spec *adapterv1.CaptureSpec,
	read func(context.Context, sdkapi.CaptureRequest) (sdkapi.Capture, error),
	send func(*adapterv1.CaptureChunk) error,
) error {
	req := fromproto.CaptureRequest(spec)
	ctx = s.ctx(ctx, "capture_id", req.CaptureID, "effect_index", req.EffectIndex)
	c, err := read(ctx, req)
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
			enc, err := toproto.Record(rec)
			if err != nil {
				return status.Errorf(codes.Internal, "%s: record %d: %v", what, count, err)
			}
			if len(enc) > MaxRecordBytes {
				return status.Errorf(codes.ResourceExhausted, "%s: record %d is %d bytes, over the %d-byte limit for one record", what, count, len(enc), MaxRecordBytes)
			}
			if full := batch.Add(enc); full != nil {
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
	hook, ok := s.adapter.(sdkapi.VerdictHook)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "adapter has no verdict hook")
	}
	d, err := hook.Verdict(s.ctx(ctx), fromproto.VerdictRequest(req))
	if err != nil {
		return nil, status.Errorf(codes.Unknown, "verdict hook: %v", err)
	}
	return toproto.VerdictResponse(d), nil
}
