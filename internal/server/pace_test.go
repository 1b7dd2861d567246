package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/verifierd/verifierd/internal/h2raw"
	"github.com/verifierd/verifierd/internal/inflight"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// Within is the grace plus the method's largest message at the rate; no
// rate bounds nothing.
func TestMessagePaceWithin(t *testing.T) {
	t.Parallel()
	pace := MessagePace{MinRate: 64 << 10, Grace: 5 * time.Second}
	for _, tc := range []struct {
		pace   MessagePace
		method string
		want   time.Duration
	}{
		{pace, verifierv1.VerifierService_Verify_FullMethodName, 6 * time.Second},
		{pace, verifierv1.RewardService_ScoreEpisode_FullMethodName, 21 * time.Second},
		{pace, verifierv1.VerifierService_Begin_FullMethodName, 261 * time.Second},
		{MessagePace{Grace: 5 * time.Second}, verifierv1.VerifierService_Begin_FullMethodName, 0},
	} {
		if got := tc.pace.Within(tc.method); got != tc.want {
			t.Errorf("%+v Within(%s) = %v, want %v", tc.pace, tc.method, got, tc.want)
		}
	}
}

// TestIdleStreamCutByPace: a reflection stream whose client sends no
// message while the call waits for one is cut with DeadlineExceeded
// naming --min-body-rate, and the 16 MiB its wait held goes back to the
// budget; a unary call on the same server is answered.
func TestIdleStreamCutByPace(t *testing.T) {
	t.Parallel()
	budget := inflight.New(64 << 20)
	conn := serve(t, Options{Budget: budget, BearerToken: "tok", Pace: MessagePace{MinRate: 1 << 30, Grace: 3 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok")
	s, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the idle stream's receive hold", func() bool { return budget.InUse() >= MaxReceiveBytes })
	if _, err := verifierv1.NewVerifierServiceClient(conn).GetInfo(ctx, &verifierv1.GetInfoRequest{}); err != nil {
		t.Errorf("GetInfo beside the idle stream: %v", err)
	}
	_, err = s.Recv()
	wantCode(t, err, codes.DeadlineExceeded, "--min-body-rate")
	waitUntil(t, "the budget back to 0 bytes in use", func() bool { return budget.InUse() == 0 })
}

// waitUntil polls cond for at most a minute, failing the test then.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSlowMessageCutByPace: a Begin call whose message declares 16 MiB
// and then trickles is cut with DeadlineExceeded naming --min-body-rate
// (in its trailers), and its 16 MiB hold goes back to the budget.
func TestSlowMessageCutByPace(t *testing.T) {
	t.Parallel()
	budget := inflight.New(64 << 20)
	_, dial := serveDial(t, Options{Budget: budget, BearerToken: "tok", Pace: MessagePace{MinRate: 16 << 20, Grace: time.Second}})
	conn, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	c, err := h2raw.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Open("bufconn", verifierv1.VerifierService_Begin_FullMethodName, map[string]string{"authorization": "Bearer tok"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(id, append(h2raw.Prefix(16<<20-1), 0x0a), false); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the call's receive hold", func() bool { return budget.InUse() >= MaxReceiveBytes })
	var end h2raw.End
	giveUp := time.Now().Add(2 * time.Minute)
	for got := false; !got; {
		select {
		case end = <-c.Ended(id):
			got = true
		case <-time.After(time.Second):
			if time.Now().After(giveUp) {
				t.Fatal("the trickled Begin was not cut in two minutes")
			}
			_ = c.Send(id, []byte{'x'}, false) // a byte a second, far below 16 MiB a second
		}
	}
	if !end.Status || end.Code != codes.DeadlineExceeded || !strings.Contains(end.Message, "--min-body-rate") {
		t.Errorf("the trickled Begin ended %+v, want trailers with DeadlineExceeded naming --min-body-rate", end)
	}
	waitUntil(t, "the budget back to 0 bytes in use", func() bool { return budget.InUse() == 0 })
}
