package server

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/verifierd/verifierd/internal/inflight"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// wireCodec is gRPC's proto codec (a CodecV2, which sees a message as
// the buffers the transport received it in), except for the requests of
// the API's unary methods: for those (a *rawRequest, asked for by the
// method handlers that register wraps) it first checks the message's size
// against its method's bound (vetted refuses one over it with
// ResourceExhausted naming the bound) before copying it into one piece,
// then keeps those bytes undecoded, with the server's budget, and the
// method's handler decodes them itself (vetted). So a
// request reserves its bytes before it is decoded, an oversized one is
// never copied, and one whose strings are not UTF-8 is refused with
// InvalidArgument naming the field, where gRPC would answer any decoding
// failure with Internal, blaming the daemon for the client's bytes.
// Nothing is kept between the codec and the call but the request itself.
type wireCodec struct {
	proto      encoding.CodecV2
	budget     *inflight.Budget
	maxRecords int
}

// newWireCodec is the server's codec over gRPC's registered proto codec.
func newWireCodec(budget *inflight.Budget, maxRecords int) wireCodec {
	return wireCodec{proto: encoding.GetCodecV2("proto"), budget: budget, maxRecords: maxRecords}
}

// rawRequest is a unary API request as it arrived: its method and that
// method's bound (set by vetted before the message is read), then its wire
// bytes, the budget they must be reserved from and the bound on a Judge
// request's records.
type rawRequest struct {
	method     string
	limit      int64
	over       int // the message's size when over limit (then no data)
	data       []byte
	budget     *inflight.Budget
	maxRecords int
}

func (wireCodec) Name() string { return "proto" }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if _, ok := v.(proto.Message); !ok {
		return nil, fmt.Errorf("codec: %T is not a protobuf message", v)
	}
	return c.proto.Marshal(v)
}

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if b, ok := v.(*boundedMessage); ok {
		if n := data.Len(); int64(n) > b.limit {
			b.over = n // budgetedStream refuses it
			return nil
		}
		return c.proto.Unmarshal(data, b.msg)
	}
	raw, ok := v.(*rawRequest)
	if !ok {
		if _, isProto := v.(proto.Message); !isProto {
			return fmt.Errorf("codec: %T is not a protobuf message", v)
		}
		return c.proto.Unmarshal(data, v)
	}
	if n := data.Len(); int64(n) > raw.limit {
		// gRPC would answer an error here as Internal: vetted refuses it.
		raw.over = n
		return nil
	}
	// A copy of its own: gRPC returns the buffers to its pool once
	// Unmarshal returns.
	raw.data, raw.budget, raw.maxRecords = data.Materialize(), c.budget, c.maxRecords
	return nil
}

// register registers impl under desc on srv with every unary method
// vetted: the API's services (VerifierService, RewardService).
func register(srv *grpc.Server, desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		d.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: vetted(m.Handler)}
	}
	srv.RegisterService(&d, impl)
}

// vetted wraps a generated unary method handler. Before the call's
// message is read it grows the call's hold (from tapIn) to what gRPC may
// receive for it (receiveHold), waiting for room as an HTTP body does;
// then it reads the message within the call's pace (paced: a message not
// in by then is DeadlineExceeded; the codec refuses one over the method's
// bound), holds exactly its size for as long as the call runs
// (holdMessage) and hands the generated handler a decoder that refuses
// strings that are not UTF-8 with InvalidArgument naming the field. The
// generated handler then runs the interceptor chain (Chain) as for any
// call.
func vetted(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, chain grpc.UnaryServerInterceptor) (any, error) {
		method, _ := grpc.Method(ctx)
		raw := rawRequest{method: method, limit: MethodLimit(method)}
		hold, _ := ctx.Value(holdKey{}).(*inflight.Hold)
		if err := receiveHold(ctx, hold); err != nil {
			return nil, err
		}
		if err := paced(ctx, method, func() error { return dec(&raw) }); err != nil {
			return nil, err
		}
		if raw.over > 0 {
			return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf(
				"the %s request is %d bytes, over the %d bytes that method takes; send a smaller request", method, raw.over, raw.limit))
		}
		release, err := holdMessage(ctx, hold, raw.budget, len(raw.data))
		if err != nil {
			if _, isStatus := status.FromError(err); !isStatus {
				err = status.Error(codes.ResourceExhausted, err.Error())
			}
			return nil, err
		}
		defer release()
		ctx, records := withStreamedRecords(ctx, method)
		return h(srv, ctx, func(v any) error {
			data := raw.data
			if _, judge := v.(*verifierv1.JudgeRequest); judge && records != nil {
				if err := countJudgeRecords(data, raw.maxRecords); err != nil {
					return err
				}
				data = splitJudgeRecords(data, records)
			}
			return decodeRequest(data, v)
		}, chain)
	}
}

// decodeRequest decodes a unary API request, refusing one whose strings
// are not valid UTF-8 (InvalidArgument naming the field) and one that does
// not decode at all (InvalidArgument).
func decodeRequest(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "codec: %T is not a protobuf message", v)
	}
	err := proto.Unmarshal(data, m)
	if err == nil {
		return nil
	}
	if !strings.Contains(err.Error(), "UTF-8") {
		return status.Errorf(codes.InvalidArgument, "the request is not a valid %s message: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
	path := invalidUTF8Field(data, m.ProtoReflect().Descriptor(), "")
	if path == "" {
		path = "request"
	}
	return invalid(path, "not valid UTF-8; proto3 strings must be UTF-8 text")
}

// invalidUTF8Field finds the first string field of data (a message of desc)
// that is not valid UTF-8, as a path such as "params.value".
func invalidUTF8Field(data []byte, desc protoreflect.MessageDescriptor, prefix string) string {
	found := ""
	eachField(data, func(f wireField) bool {
		fd := desc.Fields().ByNumber(f.num)
		if fd == nil || f.typ != protowire.BytesType {
			return true
		}
		path := prefix + string(fd.Name())
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(f.value) {
				found = path
			}
		case protoreflect.MessageKind:
			found = invalidUTF8Field(f.value, fd.Message(), path+".")
		}
		return found == ""
	})
	return found
}

// boundedMessage is a message a streaming call reads (budgetedStream),
// with its method's bound: the codec decodes one within it into msg, and
// notes the size of one over it (over) without decoding it.
type boundedMessage struct {
	msg   any
	limit int64
	over  int
}

// budgetedStream is a streaming call (server reflection: the API's calls
// are unary) whose every message is read as a unary call's is: its hold
// grows to what gRPC may receive (receiveHold) before the message is read,
// the message must be in within the call's pace (paced: an idle stream
// waiting for its next message is cut too), a message over the method's bound (MethodLimit) is refused with
// ResourceExhausted before it is decoded, and the hold is back to the
// stream's window once the message is decoded.
type budgetedStream struct {
	grpc.ServerStream
	hold   *inflight.Hold
	method string
}

func (s budgetedStream) RecvMsg(m any) error {
	if err := receiveHold(s.Context(), s.hold); err != nil {
		return err
	}
	// Shrinking never waits.
	defer func() { _ = s.hold.Resize(context.Background(), capped(s.hold.Budget(), StreamWindowBytes)) }()
	b := boundedMessage{msg: m, limit: MethodLimit(s.method)}
	if err := paced(s.Context(), s.method, func() error { return s.ServerStream.RecvMsg(&b) }); err != nil {
		return err
	}
	if b.over > 0 {
		return status.Error(codes.ResourceExhausted, fmt.Sprintf(
			"the %s message is %d bytes, over the %d bytes that method takes; send a smaller message", s.method, b.over, b.limit))
	}
	return nil
}

// budgetStreams reads every streaming call's messages through
// budgetedStream (health checks, which hold nothing, aside).
func budgetStreams() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		hold, _ := ss.Context().Value(holdKey{}).(*inflight.Hold)
		if hold == nil {
			return h(srv, ss)
		}
		return h(srv, budgetedStream{ServerStream: ss, hold: hold, method: info.FullMethod})
	}
}
