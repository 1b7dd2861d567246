package server

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/verifierd/verifierd/internal/judgestream"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// A Judge request's records are decoded one at a time (judgestream): the
// request is decoded without them, and each record (a google.protobuf.Struct
// in wire form over gRPC, a JSON object over HTTP) is turned into the JSON
// text the judge reads while the next waits, so the daemon never holds a
// tree of every record's Struct at once.

// withStreamedRecords returns ctx with room for a Judge request's records
// when the call is Judge (the decoder fills it).
func withStreamedRecords(ctx context.Context, method string) (context.Context, *judgestream.Records) {
	if method != verifierv1.VerifierService_Judge_FullMethodName {
		return ctx, nil
	}
	s := &judgestream.Records{Form: judgestream.Wire}
	return judgestream.With(ctx, s), s
}

// splitJudgeRecords returns a JudgeRequest's bytes without the records of
// its before and after reads, and puts those records' bytes in into.
// Malformed bytes are returned whole, for the decoder to refuse.
func splitJudgeRecords(data []byte, into *judgestream.Records) []byte {
	out := make([]byte, 0, 256)
	var reads [2][][]byte
	bad := false
	ok := eachField(data, func(f wireField) bool {
		if !isRead(f) {
			out = append(out, f.whole...)
			return true
		}
		var stripped []byte
		bad = !eachField(f.value, func(r wireField) bool {
			if r.num == readRecordsField && r.typ == protowire.BytesType {
				reads[f.num-judgeBeforeField] = append(reads[f.num-judgeBeforeField], r.value)
			} else {
				stripped = append(stripped, r.whole...)
			}
			return true
		})
		if bad {
			return false
		}
		out = protowire.AppendTag(out, f.num, protowire.BytesType)
		out = protowire.AppendBytes(out, stripped)
		return true
	})
	if !ok || bad {
		return data
	}
	into.Reads[0] = append(into.Reads[0], reads[0]...)
	into.Reads[1] = append(into.Reads[1], reads[1]...)
	return out
}

// streamedRecordJSON decodes each record's bytes (of form) into one reused
// Struct and appends its JSON text to parts; a record that does not decode
// is refused at its path.
func streamedRecordJSON(parts [][]byte, raw [][]byte, form judgestream.Form, path string) ([][]byte, error) {
	var s structpb.Struct
	for i, b := range raw {
		at := fmt.Sprintf("%s.records[%d]", path, len(parts))
		if err := decodeRecord(b, form, &s, at); err != nil {
			return nil, err
		}
		js, err := recordJSON(&s, at)
		if err != nil {
			return nil, err
		}
		parts = append(parts, js)
		raw[i] = nil // the request's bytes stay; the slice header goes
	}
	return parts, nil
}

// decodeRecord decodes one record's bytes of form into s (reset first).
func decodeRecord(b []byte, form judgestream.Form, s *structpb.Struct, at string) error {
	if form == judgestream.JSON {
		if err := protojson.Unmarshal(b, s); err != nil {
			return invalid(at, clip(fmt.Sprintf("the record is not a JSON object google.protobuf.Struct takes: %v", err)))
		}
		return nil
	}
	if err := proto.Unmarshal(b, s); err != nil {
		field := invalidUTF8Field(b, s.ProtoReflect().Descriptor(), at+".")
		if field == "" {
			return invalid(at, fmt.Sprintf("the record is not a valid google.protobuf.Struct: %v", err))
		}
		return invalid(field, "not valid UTF-8; proto3 strings must be UTF-8 text")
	}
	return nil
}
