package server

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/runs"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// runOutcomeToProto adds a run's own outcome to the step outcomes.
func runOutcomeToProto(o string) verifierv1.Outcome {
	if o == run.RolledBackVerified {
		return verifierv1.Outcome_ROLLED_BACK_VERIFIED
	}
	return terminalToProto[o]
}

var artifactVerdictToProto = map[string]verifierv1.Verdict{
	run.ArtifactConfirmed: verifierv1.Verdict_CONFIRMED, run.ArtifactRefuted: verifierv1.Verdict_REFUTED,
	run.ArtifactIndeterminate: verifierv1.Verdict_INDETERMINATE,
}

func optTime(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func runToProto(v *runs.RunView) *verifierv1.Run {
	out := &verifierv1.Run{
		RunId: v.RunID, Workflow: v.Workflow, DeploymentName: v.DeploymentName,
		State: verifierv1.RunState_open, Outcome: runOutcomeToProto(v.Outcome), Attempt: int32(v.Attempt),
		Tier: int32(v.Tier), OracleRung: int32(v.OracleRung), BegunAt: optTime(v.BegunAt), SealedAt: optTime(v.SealedAt),
	}
	if v.State == runs.RunSealed {
		out.State = verifierv1.RunState_sealed
	}
	for _, s := range v.Steps {
		out.Steps = append(out.Steps, &verifierv1.RunStep{
			Step: s.Step, Consequential: s.Consequential, SessionId: s.SessionID, Outcome: terminalToProto[s.Outcome],
			Tier: int32(s.Tier), OracleRung: int32(s.OracleRung), ReceiptDigest: s.ReceiptDigest,
		})
	}
	for _, a := range v.Artifacts {
		out.Artifacts = append(out.Artifacts, &verifierv1.RunArtifact{
			Artifact: a.Artifact, FromStep: a.FromStep, Verdict: artifactVerdictToProto[a.Verdict],
			Sha256: a.SHA256, Size: a.Size, ReceiptDigest: a.ReceiptDigest,
		})
	}
	for _, r := range v.Reasons {
		out.Reasons = append(out.Reasons, &verifierv1.Reason{Code: r.Code, Message: r.Message})
	}
	return out
}

func runReceipt(v *runs.RunView) (*structpb.Struct, error) {
	if len(v.Receipt) == 0 {
		return nil, nil
	}
	return envelopeStruct(v.Receipt)
}

func (s *service) BeginRun(ctx context.Context, req *verifierv1.BeginRunRequest) (*verifierv1.BeginRunResponse, error) {
	params, err := paramTexts(req.GetParams())
	if err != nil {
		return nil, err
	}
	id, err := s.runs.BeginRun(ctx, runs.BeginRunRequest{Workflow: req.GetWorkflow(), DeploymentName: req.GetDeploymentName(), Params: params, RunID: req.GetRunId()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &verifierv1.BeginRunResponse{RunId: id}, nil
}

func (s *service) FinishRun(ctx context.Context, req *verifierv1.FinishRunRequest) (*verifierv1.FinishRunResponse, error) {
	v, err := s.runs.FinishRun(ctx, req.GetRunId())
	if err != nil {
		return nil, toStatus(err)
	}
	rec, err := runReceipt(v)
	if err != nil {
		return nil, toStatus(err)
	}
	return &verifierv1.FinishRunResponse{Run: runToProto(v), Receipt: rec}, nil
}

func (s *service) GetRun(ctx context.Context, req *verifierv1.GetRunRequest) (*verifierv1.GetRunResponse, error) {
	v, err := s.runs.GetRun(ctx, req.GetRunId())
	if err != nil {
		return nil, toStatus(err)
	}
	rec, err := runReceipt(v)
	if err != nil {
		return nil, toStatus(err)
	}
	return &verifierv1.GetRunResponse{Run: runToProto(v), Receipt: rec}, nil
}

func (s *service) RollbackCheck(ctx context.Context, req *verifierv1.RollbackCheckRequest) (*verifierv1.RollbackCheckResponse, error) {
	res, err := s.runs.RollbackCheck(ctx, req.GetRunId())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &verifierv1.RollbackCheckResponse{RolledBack: res.RolledBack, Run: runToProto(res.Run)}
	if res.RolledBack {
		if out.Receipt, err = runReceipt(res.Run); err != nil {
			return nil, toStatus(err)
		}
	}
	for _, r := range res.Remains {
		pr := &verifierv1.RollbackRemainder{Step: r.Step, SessionId: r.SessionID, EffectIndex: int32(r.Effect), ContractHash: r.ContractHash}
		for _, rs := range r.Reasons {
			pr.Reasons = append(pr.Reasons, &verifierv1.Reason{Code: rs.Code, Message: rs.Message})
		}
		out.Remains = append(out.Remains, pr)
	}
	return out, nil
}
