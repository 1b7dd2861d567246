package server

import (
	"context"
	"encoding/json"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/reward"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// RewardDomain is the ErrorInfo domain of a reward refusal; its reason is
// the refusal's name (invalid_episode, identity_conflict, …).
const RewardDomain = "verifierd.reward"

// RegisterReward adds RewardService to a server built by New, before it
// serves; the bearer token and the UTF-8 vetting of New apply to it too.
func RegisterReward(srv *grpc.Server, svc *reward.Service) {
	register(srv, &verifierv1.RewardService_ServiceDesc, &rewardService{svc: svc})
}

type rewardService struct {
	verifierv1.UnimplementedRewardServiceServer
	svc *reward.Service
}

// rewardStatus maps a refusal to a gRPC status by its code, as
// httpapi.RewardStatus maps it to an HTTP status (TestRewardStatuses holds
// the two together): not_found NotFound, duplicate_episode and a
// registration's identity_conflict AlreadyExists, a refused rule
// FailedPrecondition, bad input InvalidArgument; ErrorInfo carries the
// code. registering is true for RegisterEpisode.
func rewardStatus(err error, registering bool) error {
	rf, ok := refusal.As(err)
	if !ok {
		return toStatus(err)
	}
	st := status.New(rewardCode(rf.Code, registering), clip(rf.Code+": "+rf.Message))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: rf.Code, Domain: RewardDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// rewardCode is the gRPC code of a reward refusal code: the one mapping of
// the reward package's codes onto the gRPC API, beside grpcCode's of
// session.ErrorKind.
func rewardCode(code string, registering bool) codes.Code {
	switch code {
	case reward.CodeNotFound:
		return codes.NotFound
	case reward.CodeDuplicateEpisode:
		return codes.AlreadyExists
	case reward.CodeIdentityConflict:
		if registering {
			return codes.AlreadyExists
		}
		return codes.FailedPrecondition
	case reward.CodePolicyUpdateRegressed, reward.CodeCalibrationRefused, reward.CodeNewnessUnproven, reward.CodeOracleUnavailable:
		return codes.FailedPrecondition
	}
	return codes.InvalidArgument
}

func (s *rewardService) RegisterEpisode(ctx context.Context, req *verifierv1.RegisterEpisodeRequest) (*verifierv1.RegisterEpisodeResponse, error) {
	r, err := s.svc.RegisterEpisode(ctx, req.GetContract(), "", req.GetEpisodeId(), req.GetOracleIdentity())
	if err != nil {
		return nil, rewardStatus(err, true)
	}
	return &verifierv1.RegisterEpisodeResponse{Contract: r.Contract, EpisodeId: r.EpisodeID, BaselineReachable: r.BaselineReachable, BaselineRecordCount: int64(r.BaselineRecordCount)}, nil
}

func (s *rewardService) ScoreEpisode(ctx context.Context, req *verifierv1.ScoreEpisodeRequest) (*verifierv1.ScoreEpisodeResponse, error) {
	res, err := s.svc.ScoreEpisode(ctx, req.GetContract(), req.GetDescriptorJson())
	if err != nil {
		return nil, rewardStatus(err, false)
	}
	return &verifierv1.ScoreEpisodeResponse{Result: rewardToProto(res)}, nil
}

func (s *rewardService) GetReward(ctx context.Context, req *verifierv1.GetRewardRequest) (*verifierv1.GetRewardResponse, error) {
	res, err := s.svc.GetReward(ctx, req.GetReceiptId())
	if err != nil {
		return nil, rewardStatus(err, false)
	}
	return &verifierv1.GetRewardResponse{Result: rewardToProto(res)}, nil
}

func (s *rewardService) CalibrateReward(ctx context.Context, req *verifierv1.CalibrateRewardRequest) (*verifierv1.CalibrateRewardResponse, error) {
	var seed *uint64
	if req.Seed != nil {
		v := req.GetSeed()
		seed = &v
	}
	out, err := s.svc.Calibrate(ctx, req.GetContract(), int(req.GetTrials()), req.GetDelta(), seed)
	if err != nil {
		return nil, rewardStatus(err, false)
	}
	c := out.Calibration
	return &verifierv1.CalibrateRewardResponse{
		CalibrationJson: out.CalibrationJSON, CertificateJson: out.CertificateJSON, Epsilon: c.Epsilon,
		Trials: int32(c.Trials), FalseAccepts: int32(c.FalseAccepts), CorpusDigest: c.CorpusDigest, FaultClasses: c.ClassesPlaced,
	}, nil
}

func (s *rewardService) ListRewardContracts(context.Context, *verifierv1.ListRewardContractsRequest) (*verifierv1.ListRewardContractsResponse, error) {
	out := &verifierv1.ListRewardContractsResponse{}
	for _, c := range s.svc.List() {
		out.Contracts = append(out.Contracts, &verifierv1.RewardContract{
			Name: c.Name, Id: c.ID, Version: c.Version, Digest: c.Digest, CorpusDigest: c.CorpusDigest,
			Deployment: c.Deployment, IdentityKeys: c.IdentityKeys, CertificateId: c.CertificateID, CertificateEpsilon: c.CertificateEpsilon,
		})
	}
	return out, nil
}

func rewardToProto(res *reward.Result) *verifierv1.RewardResult {
	r := res.Receipt
	out := &verifierv1.RewardResult{
		ReceiptId: r.ReceiptID, RewardOutcome: r.RewardOutcome, ScalarReward: r.ScalarReward, Unscored: r.Unscored,
		Certified: r.Certified, DevelopmentOnly: r.DevelopmentOnly, CertificateState: r.CertificateState,
		OracleTier: int32(r.OracleTier), Uncertainty: r.Uncertainty,
	}
	for _, c := range r.Components {
		out.Components = append(out.Components, &verifierv1.RewardComponent{Name: c.Name, Weight: c.Weight, Value: c.Value})
	}
	out.ReceiptJson, _ = json.Marshal(r)
	out.EnvelopeJson, _ = json.Marshal(res.Envelope)
	return out
}
