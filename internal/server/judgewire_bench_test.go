package server

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// judgeWire is a JudgeRequest of n records of three fields, as wire bytes.
func judgeWire(b *testing.B, n int) []byte {
	b.Helper()
	recs := make([]*structpb.Struct, n)
	for i := range recs {
		recs[i] = &structpb.Struct{Fields: map[string]*structpb.Value{"id": structpb.NewStringValue(fmt.Sprint(i)),
			"patient_id": structpb.NewStringValue(fmt.Sprint("p", i)), "note": structpb.NewStringValue("nnnnnnnnnn")}}
	}
	data, err := proto.Marshal(&verifierv1.JudgeRequest{Effects: `[{"kind": "record_written", "match": {"patient_id": "p1"}}]`,
		Before: &verifierv1.Read{Reachable: true}, After: &verifierv1.Read{Reachable: true, Records: recs}})
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkJudgeRPCDecode compares decoding a Judge request's records the
// way the daemon did (every record a Struct, then JSON) with the way it
// does now (records split from the bytes and decoded one at a time),
// from wire bytes to the judge's batch.
func BenchmarkJudgeRPCDecode(b *testing.B) {
	data := judgeWire(b, 10_000)
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var req verifierv1.JudgeRequest
			if err := decodeRequest(data, &req); err != nil {
				b.Fatal(err)
			}
			if _, err := readFromProto(req.GetAfter(), nil, 1, "after"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("streamed", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			_, recs := withStreamedRecords(context.Background(), verifierv1.VerifierService_Judge_FullMethodName)
			if err := countJudgeRecords(data, 100_000); err != nil {
				b.Fatal(err)
			}
			var req verifierv1.JudgeRequest
			if err := decodeRequest(splitJudgeRecords(data, recs), &req); err != nil {
				b.Fatal(err)
			}
			if _, err := readFromProto(req.GetAfter(), recs, 1, "after"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
