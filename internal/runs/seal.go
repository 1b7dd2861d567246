package runs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/receipt"
)

// sameBindings reports whether a run's steps, artifacts and stickiness
// are as a and b both recorded them: what a seal was decided on.
func sameBindings(a, b *runRecord) bool {
	type bindings struct {
		Steps     []runStepRecord
		Artifacts []runArtifactRec
		Sticky    bool
	}
	return jsonDigest(bindings{a.Steps, a.Artifacts, a.Sticky}) == jsonDigest(bindings{b.Steps, b.Artifacts, b.Sticky})
}

// sealRun seals a run with outcome c (attempt+1) and its signed receipt, in
// one run update: when another call (on any replica) sealed it meanwhile,
// its seal stands and is answered.
func (svc *Service) sealRun(ctx context.Context, rec *runRecord, wf *workflow.Workflow, states []stepState, c run.Classification, kind, inputDigest string) (*RunView, error) {
	raw, err := svc.h.Store().UpdateRun(ctx, rec.ID, func(l store.Ledger, raw []byte) ([]byte, store.RunChange, error) {
		var cur runRecord
		if err := json.Unmarshal(raw, &cur); err != nil {
			return nil, store.RunChange{}, err
		}
		if cur.Attempt != rec.Attempt {
			return nil, store.RunChange{}, nil
		}
		if !sameBindings(&cur, rec) {
			return nil, store.RunChange{}, errRunChanged
		}
		now := time.Now().UTC()
		cur.Attempt++
		seal := &runSeal{Outcome: c.Outcome, Reasons: c.Reasons, Tier: c.Tier, OracleRung: int(c.OracleRung), SealedAt: now, InputDigest: inputDigest}
		p := svc.runPayload(&cur, states, seal, kind, wf.SecretParams())
		if _, err := l.Append(EntryRunSealed, cur.ID, jsonDigest(map[string]any{"run_id": cur.ID, "attempt": cur.Attempt, "outcome": c.Outcome, "input_digest": inputDigest})); err != nil {
			return nil, store.RunChange{}, err
		}
		env, err := svc.h.SignRun(l, cur.ID, func(pos receipt.Position, signer receipt.Signer) any {
			p.IssuedAt, p.Ledger = now, pos
			p.Signer = receipt.RunSigner(signer)
			return p
		})
		if err != nil {
			return nil, store.RunChange{}, err
		}
		seal.Receipt = env
		cur.Seal = seal
		out, err := json.Marshal(cur)
		return out, store.RunChange{Sealed: true}, err
	})
	if err != nil {
		return nil, err
	}
	var stored runRecord
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, err
	}
	svc.h.Logger().Info("run sealed", "run", stored.ID, "attempt", stored.Attempt, "outcome", stored.Seal.Outcome)
	return svc.viewOf(&stored, wf, states), nil
}

// runPayload is the run receipt's payload (without its ledger position,
// time and signer).
func (svc *Service) runPayload(rec *runRecord, states []stepState, seal *runSeal, kind string, secret map[string]bool) *receipt.RunPayload {
	p := &receipt.RunPayload{
		Kind: kind, RunID: rec.ID,
		Workflow:     receipt.RunWorkflow{Name: rec.Workflow, Digest: rec.WorkflowDigest},
		Deployment:   receipt.RunDeployment{Name: rec.DeploymentName, Digest: rec.DeploymentDigest},
		ParamsDigest: svc.paramsDigest(rec.Params, secret),
		Outcome:      seal.Outcome, ReasonCodes: []string{}, Attempt: rec.Attempt,
		Tier: seal.Tier, OracleRung: seal.OracleRung, RunMinTier: rec.RunMinTier, RunMinRung: rec.RunMinRung,
		Steps: []receipt.RunStepClaim{}, Artifacts: []receipt.RunArtifactClaim{}, Handoffs: []receipt.RunHandoffClaim{},
		EvidenceDigest: "hmac-sha256",
	}
	for _, r := range seal.Reasons {
		p.ReasonCodes = append(p.ReasonCodes, r.Code)
	}
	for _, st := range states {
		p.Steps = append(p.Steps, receipt.RunStepClaim{Step: st.Name, Consequential: st.Consequential, SessionID: st.SessionID,
			ReceiptDigest: st.ReceiptDigest, Outcome: st.Outcome, Tier: st.Tier, OracleRung: int(st.OracleRung), Effects: session.RunEffectClaims(st.latest)})
	}
	for _, a := range rec.Artifacts {
		p.Artifacts = append(p.Artifacts, receipt.RunArtifactClaim{Artifact: a.Artifact, FromStep: a.FromStep, Verdict: a.Verdict,
			SHA256: a.SHA256, Size: a.Size, ReceiptDigest: a.ReceiptDigest})
	}
	for _, rs := range rec.Steps {
		for _, h := range rs.Handoffs {
			p.Handoffs = append(p.Handoffs, receipt.RunHandoffClaim{Step: rs.Step, Param: h.Param, FromStep: h.FromStep,
				Effect: h.Effect, Field: h.Field, ValueDigest: h.ValueDigest})
		}
	}
	return p
}
