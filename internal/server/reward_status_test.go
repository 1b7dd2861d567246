package server

import (
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// TestRewardStatuses: every reward refusal code's HTTP status
// (httpapi.RewardStatus) and gRPC code (rewardStatus), at registration and
// at scoring; identity_conflict is the one code whose status depends on
// which. The two mappings live in their transports; this holds them
// together.
func TestRewardStatuses(t *testing.T) {
	t.Parallel()
	type answer struct {
		http int
		grpc codes.Code
	}
	bad := answer{http.StatusUnprocessableEntity, codes.InvalidArgument}
	rule := answer{http.StatusUnprocessableEntity, codes.FailedPrecondition}
	for _, tc := range []struct {
		code                 string
		registering, scoring answer
	}{
		{reward.CodeInvalidEpisode, bad, bad},
		{reward.CodeContractMismatch, bad, bad},
		{reward.CodeIdentityMissing, bad, bad},
		{reward.CodeIdentityMismatch, bad, bad},
		{reward.CodeIdentityConflict, answer{http.StatusConflict, codes.AlreadyExists}, rule},
		{reward.CodeDuplicateEpisode, answer{http.StatusConflict, codes.AlreadyExists}, answer{http.StatusConflict, codes.AlreadyExists}},
		{reward.CodePolicyUpdateRegressed, rule, rule},
		{reward.CodeNotFound, answer{http.StatusNotFound, codes.NotFound}, answer{http.StatusNotFound, codes.NotFound}},
		{reward.CodeUnscored, bad, bad},
		{reward.CodeCalibrationRefused, rule, rule},
		{reward.CodeNewnessUnproven, rule, rule},
		{reward.CodeOracleUnavailable, rule, rule},
	} {
		for registering, want := range map[bool]answer{true: tc.registering, false: tc.scoring} {
			if got := httpapi.RewardStatus(tc.code, registering); got != want.http {
				t.Errorf("%s (registering %v): HTTP %d, want %d", tc.code, registering, got, want.http)
			}
			st := status.Convert(rewardStatus(refusal.New(tc.code, "", "detail"), registering))
			if st.Code() != want.grpc {
				t.Errorf("%s (registering %v): gRPC %v, want %v", tc.code, registering, st.Code(), want.grpc)
			}
		}
	}
}
