package server

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/verifierd/verifierd/internal/inflight"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// The bytes-in-flight budget on gRPC. The codec reserves a request's wire
// size before it decodes the message (so a spent budget refuses a request
// before it costs anything but its bytes); the reservation is kept beside
// the decoded message, by pointer, and budgetUnary releases it when the
// call returns. Only the requests of unary API methods reserve: for them
// gRPC runs the interceptor chain right after the codec, every time, so no
// reservation is left behind. A request the budget refused reaches the
// chain empty and marked, and budgetUnary answers ResourceExhausted.

// budgeted are the request types of the unary API methods.
var budgeted = func() map[protoreflect.FullName]bool {
	out := map[protoreflect.FullName]bool{}
	for _, f := range []protoreflect.FileDescriptor{verifierv1.File_verifierd_verifier_v1_verifier_proto, verifierv1.File_verifierd_verifier_v1_reward_proto} {
		for i := range f.Services().Len() {
			ms := f.Services().Get(i).Methods()
			for j := range ms.Len() {
				if m := ms.Get(j); !m.IsStreamingClient() && !m.IsStreamingServer() {
					out[m.Input().FullName()] = true
				}
			}
		}
	}
	return out
}()

// reservation is what the codec left for budgetUnary: the release of a
// reservation, or the refusal.
type reservation struct {
	release func()
	err     error
}

// reserved maps a decoded request (by pointer) to its reservation.
var reserved sync.Map

// reserveFor reserves n bytes of b for the request m about to be decoded.
// It reports a refused reservation (recorded for budgetUnary): the caller
// leaves m empty then.
func reserveFor(b *inflight.Budget, m proto.Message, n int) (refused bool) {
	if b == nil || !budgeted[m.ProtoReflect().Descriptor().FullName()] {
		return false
	}
	// The codec has no context: the wait is bounded by inflight.MaxWait.
	release, err := b.Reserve(context.Background(), int64(n))
	reserved.Store(m, reservation{release: release, err: err})
	return err != nil
}

// unreserve gives back m's reservation (a request that failed to decode
// never reaches the chain).
func unreserve(m proto.Message) {
	if r, ok := reserved.LoadAndDelete(m); ok {
		if res, ok := r.(reservation); ok && res.release != nil {
			res.release()
		}
	}
}

// budgetUnary answers a refused reservation with ResourceExhausted and
// releases a granted one when the call returns. It runs first in the
// chain, so that nothing before it can return without it.
func budgetUnary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		r, ok := reserved.LoadAndDelete(req)
		if !ok {
			return h(ctx, req)
		}
		res, ok := r.(reservation)
		if !ok {
			return h(ctx, req)
		}
		if res.err != nil {
			badUTF8.Delete(req)
			if _, isStatus := status.FromError(res.err); !isStatus {
				return nil, status.Error(codes.ResourceExhausted, res.err.Error())
			}
			return nil, res.err
		}
		defer res.release()
		return h(ctx, req)
	}
}
