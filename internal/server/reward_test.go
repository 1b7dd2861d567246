package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/reward/rewardtest"
	"github.com/verifierd/verifierd/internal/session"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// serveReward serves RewardService over rig on an in-memory listener,
// behind a bearer token, built as the daemon builds it (New, then
// RegisterReward).
func serveReward(t *testing.T, rig *rewardtest.Rig) (verifierv1.RewardServiceClient, context.Context) {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	srv, _ := New(mustManager(t, session.Options{Host: host, Store: rig.Service.Store}), Options{BearerToken: "tok"})
	RegisterReward(srv, rig.Service)
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop() })
	return verifierv1.NewRewardServiceClient(conn), metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok")
}

// grpcRefusal is the code and the ErrorInfo reason of a gRPC error.
func grpcRefusal(err error) string {
	if err == nil {
		return "OK"
	}
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == RewardDomain {
			return st.Code().String() + "/" + info.Reason
		}
	}
	return st.Code().String()
}

func TestRewardServiceRefusals(t *testing.T) {
	t.Parallel()
	rig := rewardtest.New(t)
	c, ctx := serveReward(t, rig)
	var texts []string
	id := func(p string) map[string]string { return map[string]string{"patient_id": p} }
	reg := func(ep string, identity map[string]string) error {
		res, err := c.RegisterEpisode(ctx, &verifierv1.RegisterEpisodeRequest{EpisodeId: ep, OracleIdentity: identity})
		texts = append(texts, protojson.Format(res), fmt.Sprint(err))
		return err
	}
	score := func(desc string) error {
		res, err := c.ScoreEpisode(ctx, &verifierv1.ScoreEpisodeRequest{DescriptorJson: []byte(desc)})
		if res != nil {
			texts = append(texts, protojson.Format(res), string(res.GetResult().GetEnvelopeJson()), string(res.GetResult().GetReceiptJson()))
		}
		texts = append(texts, fmt.Sprint(err))
		return err
	}
	if _, err := c.RegisterEpisode(context.Background(), &verifierv1.RegisterEpisodeRequest{EpisodeId: "episode-0001", OracleIdentity: id("patient-0001")}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("without a token: %v", err)
	}
	steps := []struct {
		name string
		err  error
		want string
	}{
		{"register", reg("episode-0001", id("patient-0001")), "OK"},
		{"register: identity keys differ", reg("episode-0002", map[string]string{"patient_id": "p", "visit": "v"}), "InvalidArgument/identity_mismatch"},
		{"register: no identity", reg("episode-0002", nil), "InvalidArgument/identity_missing"},
		{"register: bad episode id", reg("../x", id("patient-0001")), "InvalidArgument/invalid_episode"},
		{"register: another subject", reg("episode-0001", id("patient-0002")), "AlreadyExists/identity_conflict"},
		{"score: extra key", score(rig.Descriptor("episode-0001", "ckpt-0001", 0, `, "extra": 1`)), "InvalidArgument/invalid_episode"},
		{"score: forbidden metadata key", score(rig.Descriptor("episode-0001", "ckpt-0001", 0, `, "metadata": {"prompt": "x"}`)), "InvalidArgument/invalid_episode"},
		{"score: another contract", score(strings.Replace(rig.Descriptor("episode-0001", "ckpt-0001", 0, ""), rig.Digest, "sha256:"+strings.Repeat("c", 64), 1)), "InvalidArgument/contract_mismatch"},
		{"score: another subject", score(rig.Descriptor("episode-0001", "ckpt-0001", 0, `, "oracle_identity": {"patient_id": "patient-0002"}`)), "FailedPrecondition/identity_conflict"},
		{"score: unregistered, no identity", score(rig.Descriptor("episode-0009", "ckpt-0001", 0, "")), "InvalidArgument/identity_missing"},
		{"score: unregistered, wrong keys", score(rig.Descriptor("episode-0009", "ckpt-0001", 0, `, "oracle_identity": {"visit": "v"}`)), "InvalidArgument/identity_mismatch"},
		{"score", score(rig.Descriptor("episode-0001", "ckpt-0001", 7, "")), "OK"},
		{"score again", score(rig.Descriptor("episode-0001", "ckpt-0001", 7, "")), "AlreadyExists/duplicate_episode"},
		{"register a scored episode", reg("episode-0001", id("patient-0001")), "AlreadyExists/duplicate_episode"},
		{"regressed update", score(rig.Descriptor("episode-0010", "ckpt-0001", 6, `, "oracle_identity": {"patient_id": "patient-0010"}`)), "FailedPrecondition/policy_update_regressed"},
	}
	for _, s := range steps {
		if got := grpcRefusal(s.err); got != s.want {
			t.Errorf("%s: %s, want %s", s.name, got, s.want)
		}
	}
	if _, err := c.GetReward(ctx, &verifierv1.GetRewardRequest{ReceiptId: "rwd_" + strings.Repeat("0", 32)}); grpcRefusal(err) != "NotFound/not_found" {
		t.Errorf("unknown receipt: %v", err)
	}
	assertNoValueText(t, texts)
}

func TestRewardServiceOutcomesAndMark(t *testing.T) {
	t.Parallel()
	rig := rewardtest.New(t)
	c, ctx := serveReward(t, rig)
	var texts []string
	n := 0
	score := func(c verifierv1.RewardServiceClient, checkpoint string, update int64, write bool) (*verifierv1.RewardResult, error) {
		n++
		ep, p := fmt.Sprintf("episode-%04d", n), fmt.Sprintf("patient-%04d", n)
		if _, err := c.RegisterEpisode(ctx, &verifierv1.RegisterEpisodeRequest{EpisodeId: ep, OracleIdentity: map[string]string{"patient_id": p}}); err != nil {
			t.Fatal(err)
		}
		if write {
			rig.Oracle.Add(p, "Triage")
		}
		res, err := c.ScoreEpisode(ctx, &verifierv1.ScoreEpisodeRequest{DescriptorJson: []byte(rig.Descriptor(ep, checkpoint, update, ""))})
		if res != nil {
			texts = append(texts, protojson.Format(res), string(res.GetResult().GetEnvelopeJson()), string(res.GetResult().GetReceiptJson()))
		}
		return res.GetResult(), err
	}
	r, err := score(c, "ckpt-0001", 0, true)
	if err != nil || r.GetRewardOutcome() != "verified" || r.GetScalarReward() != 1 || !r.GetCertified() || r.GetCertificateState() != "current" {
		t.Fatalf("honest: %v %v", r, err)
	}
	if got, err := c.GetReward(ctx, &verifierv1.GetRewardRequest{ReceiptId: r.GetReceiptId()}); err != nil || got.GetResult().GetReceiptId() != r.GetReceiptId() {
		t.Errorf("GetReward: %v", err)
	}
	if r, err = score(c, "ckpt-0001", 999, false); err != nil || r.GetRewardOutcome() != "wrong_effect" || r.ScalarReward == nil || r.GetScalarReward() != 0 {
		t.Errorf("banner lie: %v %v", r, err)
	}
	if r, err = score(c, "ckpt-0001", 1_000_000_000, true); err != nil || r.GetCertificateState() != "expired" || r.GetCertified() {
		t.Errorf("update 10^9: %v %v", r, err)
	}
	if _, err = score(c, "ckpt-0001", 0, true); grpcRefusal(err) != "FailedPrecondition/policy_update_regressed" {
		t.Errorf("update 0 after 10^9: %v", err)
	}
	rig.Reopen(t, nil)
	c, _ = serveReward(t, rig)
	if _, err = score(c, "renamed-ckpt", 0, true); grpcRefusal(err) != "FailedPrecondition/policy_update_regressed" || !strings.Contains(err.Error(), "ckpt-0001") {
		t.Errorf("after restart and rename: %v", err)
	}
	rig.Oracle.Unreachable = true
	if r, err = score(c, "renamed-ckpt", 1_000_000_000, false); err != nil || r.ScalarReward != nil || !r.GetUnscored() || r.GetRewardOutcome() != "failed_platform" {
		t.Errorf("unreachable: %v %v", r, err)
	}
	assertNoValueText(t, texts)
}

func TestCalibrateReward(t *testing.T) {
	t.Parallel()
	rig := rewardtest.New(t)
	c, ctx := serveReward(t, rig)
	res, err := c.CalibrateReward(ctx, &verifierv1.CalibrateRewardRequest{Contract: "mockmed", Trials: 300, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%.7f", res.GetEpsilon()) != "0.0099361" || res.GetFalseAccepts() != 0 || len(res.GetFaultClasses()) != 6 {
		t.Errorf("ε %.7f, %d false accepts, classes %v", res.GetEpsilon(), res.GetFalseAccepts(), res.GetFaultClasses())
	}
	if _, err := c.CalibrateReward(ctx, &verifierv1.CalibrateRewardRequest{Contract: "nope"}); grpcRefusal(err) != "NotFound/not_found" {
		t.Errorf("unknown contract: %v", err)
	}
}

func assertNoValueText(t *testing.T, texts []string) {
	t.Helper()
	all := strings.Join(texts, "\n")
	for _, s := range []string{"patient-0", "Triage", "saved", `"prompt"`} {
		if strings.Contains(all, s) {
			t.Errorf("a response contains %q", s)
		}
	}
}
