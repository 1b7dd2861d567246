package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/verifierd/verifierd/internal/runs"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/judge"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
)

// ReceiptDomain is the ErrorInfo domain of a refused Begin's terminal
// outcome; its metadata carries "terminal_outcome" and "receipt" (the
// DSSE envelope JSON).
const ReceiptDomain = "verifierd.receipt"

var terminalToProto = map[string]verifierv1.Outcome{
	string(judge.Verified): verifierv1.Outcome_VERIFIED, string(judge.ReconciliationRequired): verifierv1.Outcome_RECONCILIATION_REQUIRED,
	string(judge.HaltedBeforeEffect): verifierv1.Outcome_HALTED_BEFORE_EFFECT,
	session.OutcomeRejectedPolicy:    verifierv1.Outcome_REJECTED_POLICY, session.OutcomeFailedPlatform: verifierv1.Outcome_FAILED_PLATFORM,
}

func reverificationToProto(r *session.Result) (*verifierv1.Reverification, error) {
	rec, err := envelopeStruct(r.Receipt)
	if err != nil {
		return nil, err
	}
	return &verifierv1.Reverification{
		Attempt: int32(r.Attempt), Reason: r.ReverifyReason, Result: resultToProto(r),
		VerifiedAt: timestamppb.New(r.VerifiedAt), Receipt: rec, OracleRung: int32(session.ResultRung(r)),
	}, nil
}

func (s *service) GetInfo(ctx context.Context, _ *verifierv1.GetInfoRequest) (*verifierv1.GetInfoResponse, error) {
	ki, err := s.m.Info(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &verifierv1.GetInfoResponse{PublicKey: ki.PublicKey, KeyId: ki.KeyID, LedgerSeq: ki.Head.Seq - 1}
	if out.LedgerSeq > 0 {
		out.LedgerHead = ki.Head.Head
	}
	return out, nil
}

// ExportLedger sends the entries up to a signed checkpoint of the head as
// it is when the export starts, then that checkpoint (session's
// Manager.ExportLedger): an export always ends exactly at a signed
// checkpoint matching its last entry.
func (s *service) ExportLedger(req *verifierv1.ExportLedgerRequest, stream verifierv1.VerifierService_ExportLedgerServer) error {
	checkpoint, err := s.m.Ledger().ExportLedger(stream.Context(), req.GetFromSeq(), func(e receipt.Entry, canonical []byte) error {
		return stream.Send(&verifierv1.ExportLedgerResponse{Entry: &verifierv1.LedgerEntry{
			Seq: e.Seq, Prev: e.Prev, Type: e.Type, Session: e.Session, Digest: e.Digest,
			At: timestamppb.New(e.At), CanonicalJson: canonical,
		}})
	})
	if errors.Is(err, session.ErrLedgerDiverged) {
		return status.Error(codes.DataLoss, clip(err.Error()))
	}
	if err != nil {
		return toStatus(err)
	}
	if checkpoint == nil {
		return nil
	}
	cp, err := envelopeStruct(checkpoint)
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&verifierv1.ExportLedgerResponse{Checkpoint: cp})
}

func (s *service) Reverify(ctx context.Context, req *verifierv1.ReverifyRequest) (*verifierv1.ReverifyResponse, error) {
	if req.GetSessionId() == "" {
		return nil, invalid("session_id", "give the session id that Begin returned")
	}
	r, err := s.m.Reverify(ctx, req.GetSessionId(), req.GetReason())
	if err != nil {
		return nil, toStatus(err)
	}
	rv, err := reverificationToProto(r)
	if err != nil {
		return nil, toStatus(err)
	}
	return &verifierv1.ReverifyResponse{SessionId: req.GetSessionId(), Reverification: rv}, nil
}

func (s *service) VerifyArtifact(ctx context.Context, req *verifierv1.VerifyArtifactRequest) (*verifierv1.VerifyArtifactResponse, error) {
	a := req.GetArtifact()
	if a == nil {
		return nil, invalid("artifact", "give {sha256, size, name}")
	}
	art := receipt.Artifact{SHA256: a.GetSha256(), Size: a.GetSize(), MediaType: a.GetMediaType(), Name: a.GetName()}
	var res *session.ArtifactResult
	var err error
	if req.GetRunId() != "" || req.GetRunArtifact() != "" || req.GetStep() != "" {
		if req.GetRunId() == "" {
			return nil, invalid("run_id", "run_artifact and step name an artifact of a run: give the run_id too")
		}
		res, err = s.runs.VerifyRunArtifact(ctx, runs.RunArtifactRequest{RunID: req.GetRunId(), RunArtifact: req.GetRunArtifact(), Step: req.GetStep(),
			DeploymentName: req.GetDeploymentName(), Artifact: art})
	} else {
		res, err = s.m.VerifyArtifact(ctx, req.GetDeploymentName(), art)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	rec, err := envelopeStruct(res.Receipt)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &verifierv1.VerifyArtifactResponse{Verdict: verdictToProto[res.Verdict], Tier: int32(res.Tier), OracleRung: int32(res.OracleRung), Substrate: res.Substrate, Receipt: rec}
	for _, r := range res.Reasons {
		out.Reasons = append(out.Reasons, &verifierv1.Reason{Code: r.Code, Message: r.Message})
	}
	return out, nil
}
