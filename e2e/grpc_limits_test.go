package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// TestGRPCMethodBoundsAuthenticated: with the token, a gRPC message over
// its method's bound is refused with ResourceExhausted naming the bound
// (1.5 MiB to RegisterEpisode and ScoreEpisode, bound 1 MiB; to Verify,
// bound 64 KiB), and so is each of 24 messages of 16 MiB sent at once to
// ScoreEpisode on one connection, the daemon's peak resident memory
// staying under 512 MiB. Without the token the same message is
// Unauthenticated and holds nothing. Honest calls are answered afterwards,
// and no refused call keeps any of the request budget.
func TestGRPCMethodBoundsAuthenticated(t *testing.T) {
	httpAddr := freeAddr(t)
	d := startTokenDaemon(t, httpAddr)
	cc, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+starveToken)
	rewards := verifierv1.NewRewardServiceClient(cc)
	big := strings.Repeat("d", 1536<<10)
	refused := func(what string, err error, bound string) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "over the "+bound+" bytes that method takes") {
			t.Errorf("%s: %v, want ResourceExhausted naming the %s-byte bound", what, err, bound)
		}
	}
	// Without the token: Unauthenticated on its headers, nothing held.
	_, err = rewards.ScoreEpisode(context.Background(), &verifierv1.ScoreEpisodeRequest{Contract: "any", DescriptorJson: []byte(`{"x": "` + big + `"}`)})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("a 1.5 MiB ScoreEpisode without the token: %v, want Unauthenticated", err)
	}
	if n := inflightBytes(t, httpAddr); n != 0 {
		t.Errorf("%d bytes of the budget in use after a call without the token, want 0", n)
	}
	_, err = rewards.ScoreEpisode(ctx, &verifierv1.ScoreEpisodeRequest{Contract: "any", DescriptorJson: []byte(`{"x": "` + big + `"}`)})
	refused("a 1.5 MiB ScoreEpisode", err, "1048576")
	_, err = rewards.RegisterEpisode(ctx, &verifierv1.RegisterEpisodeRequest{Contract: "any", EpisodeId: "e1", OracleIdentity: map[string]string{"x": big}})
	refused("a 1.5 MiB RegisterEpisode", err, "1048576")
	_, err = verifierv1.NewVerifierServiceClient(cc).Verify(ctx, &verifierv1.VerifyRequest{SessionId: big})
	refused("a 1.5 MiB Verify", err, "65536")

	// One message, marshalled once and sent as it is by each call.
	huge, err := proto.Marshal(&verifierv1.ScoreEpisodeRequest{Contract: "any", DescriptorJson: []byte(`{"x": "` + strings.Repeat("d", 16<<20-1024) + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codesSeen := map[codes.Code]int{}
	for range 24 {
		wg.Go(func() {
			var out []byte
			err := cc.Invoke(ctx, verifierv1.RewardService_ScoreEpisode_FullMethodName, &huge, &out, grpc.ForceCodec(bytesCodec{}))
			mu.Lock()
			codesSeen[status.Code(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("24 ScoreEpisode calls of 16 MiB at once: %v", codesSeen)
	if codesSeen[codes.ResourceExhausted] != 24 {
		t.Errorf("24 ScoreEpisode calls of 16 MiB: %v, want all ResourceExhausted", codesSeen)
	}
	checkPeak(t, d, eightRequestsMiB)
	honestCalls(t, d, httpAddr)
	waitFor(t, 30*time.Second, "the request budget back to 0 bytes in use", func() bool { return inflightBytes(t, httpAddr) == 0 })
}

// inflightBytes is the daemon's verifierd_inflight_bytes gauge.
func inflightBytes(t *testing.T, httpAddr string) int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+starveToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "verifierd_inflight_bytes "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("verifierd_inflight_bytes %q: %v", v, err)
			}
			return int64(n)
		}
	}
	t.Fatalf("GET /metrics (%d): no verifierd_inflight_bytes", res.StatusCode)
	return -1
}
