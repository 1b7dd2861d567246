package server

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// A Judge RPC's records are decoded one at a time: the request is decoded
// without them, and each record's bytes (a google.protobuf.Struct) are
// turned into the JSON text the judge reads while the next waits, so the
// daemon never holds a tree of every record's Struct at once. The records
// stay sub-slices of the request's bytes, which the call holds anyway.

// streamedRecords are the records of a Judge request's before and after
// reads, as wire bytes, by read.
type streamedRecords struct{ reads [2][][]byte }

// of is the records of read i (0 before, 1 after); none for a nil s.
func (s *streamedRecords) of(i int) [][]byte {
	if s == nil {
		return nil
	}
	return s.reads[i]
}

type streamedKey struct{}

// withStreamedRecords returns ctx with room for a Judge request's records
// when the call is Judge (the decoder fills it).
func withStreamedRecords(ctx context.Context, method string) (context.Context, *streamedRecords) {
	if method != verifierv1.VerifierService_Judge_FullMethodName {
		return ctx, nil
	}
	s := &streamedRecords{}
	return context.WithValue(ctx, streamedKey{}, s), s
}

// streamed is the call's records decoded apart, or nil.
func streamed(ctx context.Context) *streamedRecords {
	s, _ := ctx.Value(streamedKey{}).(*streamedRecords)
	return s
}

// splitJudgeRecords returns a JudgeRequest's bytes without the records of
// its before and after reads, and puts those records' bytes in into.
// Malformed bytes are returned whole, for the decoder to refuse.
func splitJudgeRecords(data []byte, into *streamedRecords) []byte {
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
	into.reads[0] = append(into.reads[0], reads[0]...)
	into.reads[1] = append(into.reads[1], reads[1]...)
	return out
}

// streamedRecordJSON decodes each record's bytes into one reused Struct
// and appends its JSON text to parts; a record that does not decode is
// refused at its path.
func streamedRecordJSON(parts [][]byte, raw [][]byte, path string) ([][]byte, error) {
	var s structpb.Struct
	for i, b := range raw {
		at := fmt.Sprintf("%s.records[%d]", path, len(parts))
		if err := proto.Unmarshal(b, &s); err != nil {
			field := invalidUTF8Field(b, s.ProtoReflect().Descriptor(), at+".")
			if field == "" {
				return nil, invalid(at, fmt.Sprintf("the record is not a valid google.protobuf.Struct: %v", err))
			}
			return nil, invalid(field, "not valid UTF-8; proto3 strings must be UTF-8 text")
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
