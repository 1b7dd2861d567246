package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/verifierd/verifierd/internal/inflight"
	"github.com/verifierd/verifierd/internal/judgestream"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// Every way a budgeted call ends gives its bytes back: served, refused by
// the handler, refused for its token, refused as invalid UTF-8, not
// decodable at all. A call bigger than the whole budget is
// ResourceExhausted naming the flag.
func TestBudgetReleasedOnEveryPath(t *testing.T) {
	b := inflight.New(64 << 10)
	conn := serve(t, Options{Budget: b, BearerToken: "tok"})
	c := verifierv1.NewVerifierServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok")
	judge := &verifierv1.JudgeRequest{
		Effects: `[{"kind": "record_written", "match": {"patient_id": "p1"}}]`,
		Before:  &verifierv1.Read{Reachable: true},
		After:   &verifierv1.Read{Reachable: true, Records: []*structpb.Struct{deep(1000)}},
	}
	if _, err := c.Judge(ctx, judge); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a deep record: %v", err)
	}
	judge.After.Records = records(t, `{"id": "1", "patient_id": "p1"}`)
	if _, err := c.Judge(ctx, judge); err != nil {
		t.Fatalf("a plain Judge: %v", err)
	}
	if _, err := c.Judge(context.Background(), judge); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without the token: %v", err)
	}
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("ses_\xff"))
	var out []byte
	if err := conn.Invoke(ctx, "/verifierd.verifier.v1.VerifierService/Verify", badUTF8, &out, grpc.ForceCodec(rawCodec{})); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("invalid UTF-8: %v", err)
	}
	broken := []byte{0x0a, 0x7f} // a length past the end
	if err := conn.Invoke(ctx, "/verifierd.verifier.v1.VerifierService/Verify", broken, &out, grpc.ForceCodec(rawCodec{})); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a broken message: %v, want InvalidArgument (the client's bytes, not the daemon's fault)", err)
	}
	if n := b.InUse(); n != 0 {
		t.Fatalf("%d bytes still reserved after every call returned", n)
	}
	judge.After.Records = records(t, `{"id": "1", "pad": "`+strings.Repeat("p", 70<<10)+`"}`)
	_, err := c.Judge(ctx, judge)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "--max-inflight-bytes") {
		t.Fatalf("a call over the whole budget: %v", err)
	}
	if n := b.InUse(); n != 0 {
		t.Fatalf("%d bytes reserved after the refusal", n)
	}
}

// A Judge request's records are counted in its bytes against
// MaxJudgeRecords, before and after together, before any is decoded:
// over the bound it is InvalidArgument naming the read and the flag; at
// the bound the records, decoded one at a time, are judged as ever.
func TestJudgeRecordCap(t *testing.T) {
	conn := serve(t, Options{MaxJudgeRecords: 2})
	c := verifierv1.NewVerifierServiceClient(conn)
	req := &verifierv1.JudgeRequest{
		Effects: `[{"kind": "record_written", "match": {"patient_id": "p1"}}]`,
		Before:  &verifierv1.Read{Reachable: true, Records: records(t, `{"id": "0", "patient_id": "p0"}`)},
		After:   &verifierv1.Read{Reachable: true, Records: records(t, `{"id": "0", "patient_id": "p0"}`, `{"id": "1", "patient_id": "p1"}`)},
	}
	_, err := c.Judge(context.Background(), req)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "--max-judge-records") ||
		!strings.Contains(status.Convert(err).Message(), "after.records") {
		t.Fatalf("3 records under a bound of 2: %v", err)
	}
	req.Before.Records = nil
	res, err := c.Judge(context.Background(), req)
	if err != nil || res.GetOutcome() != verifierv1.Outcome_VERIFIED || res.GetEffects()[0].GetObservedCount() != 1 {
		t.Fatalf("2 records under a bound of 2: %v %v", res, err)
	}
	req.After.Reachable = false
	if _, err := c.Judge(context.Background(), req); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "unreachable") {
		t.Fatalf("records on an unreachable read: %v", err)
	}
}

// 16 MiB only where a method carries documents or reads; the reward
// requests take what their HTTP bodies take; everything else, reflection
// streams included, 64 KiB.
func TestMethodLimit(t *testing.T) {
	for method, want := range map[string]int64{
		verifierv1.VerifierService_Judge_FullMethodName:             16 << 20,
		verifierv1.VerifierService_Begin_FullMethodName:             16 << 20,
		verifierv1.RewardService_ScoreEpisode_FullMethodName:        1 << 20,
		verifierv1.RewardService_RegisterEpisode_FullMethodName:     1 << 20,
		verifierv1.VerifierService_Verify_FullMethodName:            64 << 10,
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": 64 << 10,
	} {
		if got := MethodLimit(method); got != want {
			t.Errorf("MethodLimit(%s) = %d, want %d", method, got, want)
		}
	}
}

// A JudgeRequest's records are split from its bytes, the rest decoding as
// the request without them; bytes that do not parse are handed back whole
// for the decoder to refuse.
func TestSplitJudgeRecords(t *testing.T) {
	req := &verifierv1.JudgeRequest{Effects: "[]",
		Before: &verifierv1.Read{Reachable: true, Records: records(t, `{"id": "0"}`)},
		After:  &verifierv1.Read{Reachable: true, Records: records(t, `{"id": "1"}`, `{"id": "2"}`)}}
	data, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var got judgestream.Records
	var rest verifierv1.JudgeRequest
	if err := proto.Unmarshal(splitJudgeRecords(data, &got), &rest); err != nil {
		t.Fatal(err)
	}
	if len(got.Of(0)) != 1 || len(got.Of(1)) != 2 || len(rest.GetAfter().GetRecords()) != 0 || !rest.GetAfter().GetReachable() || rest.GetEffects() != "[]" {
		t.Fatalf("split: %d before, %d after records; the rest %v", len(got.Of(0)), len(got.Of(1)), &rest)
	}
	var none judgestream.Records
	broken := data[:len(data)-3]
	if out := splitJudgeRecords(broken, &none); !bytes.Equal(out, broken) || len(none.Of(0))+len(none.Of(1)) != 0 {
		t.Fatalf("malformed bytes: %d of %d bytes back, %d records taken", len(out), len(broken), len(none.Of(0))+len(none.Of(1)))
	}
}

// TestReceiveHold: before a call's message is read its hold grows from
// the stream's window to what gRPC may receive, 16 MiB, at most half the
// budget, so that calls holding their windows never keep one another
// from it; a budget with no room left refuses it with ResourceExhausted.
func TestReceiveHold(t *testing.T) {
	for _, tc := range []struct{ budget, want int64 }{{inflight.DefaultBytes, MaxReceiveBytes}, {4 << 20, 2 << 20}} {
		b := inflight.New(tc.budget)
		var windows []*inflight.Hold
		for range 12 {
			h, err := b.TryHold(StreamWindowBytes)
			if err != nil {
				t.Fatal(err)
			}
			windows = append(windows, h)
		}
		if err := receiveHold(context.Background(), windows[0]); err != nil || windows[0].Size() != tc.want {
			t.Fatalf("budget %d: receive hold %d bytes (%v), want %d", tc.budget, windows[0].Size(), err, tc.want)
		}
		if got := b.InUse(); got != tc.want+11*StreamWindowBytes {
			t.Errorf("budget %d: %d bytes in use, want %d", tc.budget, got, tc.want+11*StreamWindowBytes)
		}
	}
	b := inflight.New(4 << 20)
	full, _ := b.TryHold(4<<20 - StreamWindowBytes)
	defer full.Release()
	h, err := b.TryHold(StreamWindowBytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := receiveHold(context.Background(), h); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("no room: %v, want ResourceExhausted", err)
	}
}

// TestReflectionMessagesBounded: a streaming call (server reflection)
// reads each message as a unary call does: one over its 64 KiB bound is
// refused with ResourceExhausted before it is decoded, one within it is
// answered, and the budget is all given back when the stream ends.
func TestReflectionMessagesBounded(t *testing.T) {
	t.Parallel()
	budget := inflight.New(64 << 20)
	conn := serve(t, Options{Budget: budget})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ask := func(host string) (*reflectionpb.ServerReflectionResponse, error) {
		s, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return nil, err
		}
		if err := s.Send(&reflectionpb.ServerReflectionRequest{Host: host,
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"}}); err != nil {
			return nil, err
		}
		defer func() { _ = s.CloseSend() }()
		return s.Recv()
	}
	res, err := ask("h")
	if err != nil || len(res.GetListServicesResponse().GetService()) == 0 {
		t.Fatalf("a small reflection request: %v, %v", res, err)
	}
	_, err = ask(strings.Repeat("h", 100<<10))
	wantCode(t, err, codes.ResourceExhausted, "over the 65536 bytes that method takes")
	cancel()
	deadline := time.Now().Add(time.Minute)
	for budget.InUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d bytes still held once the streams ended", n)
	}
}

// gzipStream is a call's transport stream whose client compresses.
type gzipStream struct{ grpc.ServerTransportStream }

func (gzipStream) RecvCompress() string { return "gzip" }

// TestReceiveHoldCompressed: a compressed call holds room for the
// compressed bytes and the message inflated from them, both at once.
func TestReceiveHoldCompressed(t *testing.T) {
	b := inflight.New(inflight.DefaultBytes)
	h, err := b.TryHold(StreamWindowBytes)
	if err != nil {
		t.Fatal(err)
	}
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), gzipStream{})
	if err := receiveHold(ctx, h); err != nil || h.Size() != 2*MaxReceiveBytes {
		t.Fatalf("compressed: receive hold %d bytes (%v), want %d", h.Size(), err, 2*MaxReceiveBytes)
	}
}
