package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/verifierd/verifierd/internal/inflight"
)

// apiPackage is the proto package of the requests the codec vets.
const apiPackage = "verifierd.verifier.v1."

// wireCodec is gRPC's proto codec, except for one case: a VerifierService
// request whose strings are not valid UTF-8. gRPC answers any unmarshal
// failure with Internal, which blames the daemon for the client's bytes; here
// such a request reaches the handler chain empty and marked, and
// vetUnary answers InvalidArgument naming the field. With a budget, the
// codec also reserves each API request's bytes before decoding it
// (budget.go).
type wireCodec struct{ budget *inflight.Budget }

// badUTF8 maps a marked request (by pointer) to the offending field path.
// vetUnary, first in the chain, removes every mark it finds; only unary
// VerifierService requests are marked.
var badUTF8 sync.Map

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("codec: %T is not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (c wireCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("codec: %T is not a protobuf message", v)
	}
	if reserveFor(c.budget, m, len(data)) {
		return nil // refused: budgetUnary answers ResourceExhausted
	}
	err := proto.Unmarshal(data, m)
	if err != nil {
		if !strings.Contains(err.Error(), "UTF-8") {
			unreserve(m) // gRPC answers the call without the chain
			return err
		}
	} else {
		return nil
	}
	desc := m.ProtoReflect().Descriptor()
	if !strings.HasPrefix(string(desc.FullName()), apiPackage) {
		return err
	}
	proto.Reset(m)
	path := invalidUTF8Field(data, desc, "")
	if path == "" {
		path = "request"
	}
	badUTF8.Store(m, path)
	return nil
}

// invalidUTF8Field finds the first string field of data (a message of desc)
// that is not valid UTF-8, as a path such as "params.value".
func invalidUTF8Field(data []byte, desc protoreflect.MessageDescriptor, prefix string) string {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return ""
		}
		data = data[n:]
		n = protowire.ConsumeFieldValue(num, typ, data)
		if n < 0 {
			return ""
		}
		value := data[:n]
		data = data[n:]
		fd := desc.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			continue
		}
		b, _ := protowire.ConsumeBytes(value)
		path := prefix + string(fd.Name())
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(b) {
				return path
			}
		case protoreflect.MessageKind:
			if p := invalidUTF8Field(b, fd.Message(), path+"."); p != "" {
				return p
			}
		}
	}
	return ""
}

// vetUnary refuses a request the codec marked as invalid UTF-8.
func vetUnary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if path, ok := badUTF8.LoadAndDelete(req); ok {
			p, _ := path.(string)
			return nil, invalid(p, "not valid UTF-8; proto3 strings must be UTF-8 text")
		}
		return h(ctx, req)
	}
}
