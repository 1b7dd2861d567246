package server

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/verifierd/verifierd/internal/inflight"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// wireCodec is gRPC's proto codec, except for the requests of the API's
// unary methods: for those (a *rawRequest, asked for by the method handlers
// that register wraps) it keeps the wire bytes undecoded, with the
// server's budget, and the method's handler decodes them itself (vetted).
// So a request reserves its bytes before it is decoded, and one whose
// strings are not UTF-8 is refused with InvalidArgument naming the field,
// where gRPC would answer any decoding failure with Internal, blaming the
// daemon for the client's bytes. Nothing is kept between the codec and the
// call but the request itself.
type wireCodec struct {
	budget     *inflight.Budget
	maxRecords int
}

// rawRequest is a unary API request as it arrived: its wire bytes, the
// budget they must be reserved from and the bound on a Judge request's
// records.
type rawRequest struct {
	data       []byte
	budget     *inflight.Budget
	maxRecords int
}

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("codec: %T is not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (c wireCodec) Unmarshal(data []byte, v any) error {
	if raw, ok := v.(*rawRequest); ok {
		// gRPC reuses its buffer once Unmarshal returns.
		raw.data, raw.budget, raw.maxRecords = append([]byte(nil), data...), c.budget, c.maxRecords
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("codec: %T is not a protobuf message", v)
	}
	return proto.Unmarshal(data, m)
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

// vetted wraps a generated unary method handler. It takes the request's
// wire bytes from the codec, holds them to the method's bound and keeps
// them reserved from the budget for as long as the call runs
// (holdMessage; the call's context bounds a wait, besides
// inflight.MaxWait), and hands the generated handler a decoder that
// refuses strings that are not UTF-8 with InvalidArgument naming the
// field. The generated handler then runs the interceptor chain (Chain) as
// for any call.
func vetted(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, chain grpc.UnaryServerInterceptor) (any, error) {
		var raw rawRequest
		if err := dec(&raw); err != nil {
			return nil, err
		}
		release, err := holdMessage(ctx, raw.budget, len(raw.data))
		if err != nil {
			if _, isStatus := status.FromError(err); !isStatus {
				err = status.Error(codes.ResourceExhausted, err.Error())
			}
			return nil, err
		}
		defer release()
		method, _ := grpc.Method(ctx)
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
