package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/verifierd/verifierd/internal/oracle"
	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/workflow"
)

// GetRun reports a run: its steps as they stand and its latest seal.
func (svc *Service) GetRun(ctx context.Context, id string) (*RunView, error) {
	rec, err := svc.loadRun(ctx, id)
	if err != nil {
		return nil, err
	}
	wf := svc.h.Workflow(rec.Workflow)
	if wf == nil || wf.Digest != rec.WorkflowDigest {
		return svc.viewOf(rec, nil, nil), nil
	}
	states, err := svc.stepStates(ctx, wf, rec)
	if err != nil {
		return nil, err
	}
	return svc.viewOf(rec, wf, states), nil
}

// ListRuns reports every run, in run id order, as GetRun does (for the
// console).
func (svc *Service) ListRuns(ctx context.Context) ([]*RunView, error) {
	var recs []*runRecord
	err := svc.h.Store().ForEachRun(ctx, func(id string, raw []byte) error {
		var rec runRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("run %s is corrupt: %w", id, err)
		}
		recs = append(recs, &rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*RunView, 0, len(recs))
	for _, rec := range recs {
		wf := svc.h.Workflow(rec.Workflow)
		if wf == nil || wf.Digest != rec.WorkflowDigest {
			out = append(out, svc.viewOf(rec, nil, nil))
			continue
		}
		states, err := svc.stepStates(ctx, wf, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, svc.viewOf(rec, wf, states))
	}
	return out, nil
}

// viewOf builds what a caller sees of a run (wf and states nil: the steps
// as recorded, without their results).
func (svc *Service) viewOf(rec *runRecord, wf *workflow.Workflow, states []stepState) *RunView {
	v := &RunView{RunID: rec.ID, Workflow: rec.Workflow, DeploymentName: rec.DeploymentName, State: RunOpen, Attempt: rec.Attempt, BegunAt: rec.BegunAt,
		Steps: []RunStepView{}, Artifacts: []RunArtifactView{}}
	if s := rec.Seal; s != nil {
		v.State, v.Outcome, v.Reasons, v.SealedAt, v.Receipt = RunSealed, s.Outcome, s.Reasons, s.SealedAt, s.Receipt
		v.Tier, v.OracleRung = s.Tier, s.OracleRung
	}
	if states == nil {
		for _, rs := range rec.Steps {
			sv := RunStepView{Step: rs.Step}
			if n := len(rs.Sessions); n > 0 {
				sv.SessionID = rs.Sessions[n-1]
			}
			v.Steps = append(v.Steps, sv)
		}
	} else {
		var in run.Input
		for _, st := range states {
			in.Steps = append(in.Steps, st.Step)
			v.Steps = append(v.Steps, RunStepView{Step: st.Name, Consequential: st.Consequential, SessionID: st.SessionID, Outcome: st.Outcome,
				Tier: st.Tier, OracleRung: int(st.OracleRung), ReceiptDigest: st.ReceiptDigest})
		}
		if rec.Seal == nil {
			c := run.Classify(in)
			v.Tier, v.OracleRung = c.Tier, int(c.OracleRung)
		}
	}
	for _, a := range rec.Artifacts {
		v.Artifacts = append(v.Artifacts, RunArtifactView{Artifact: a.Artifact, FromStep: a.FromStep, Verdict: a.Verdict, SHA256: a.SHA256, Size: a.Size, ReceiptDigest: a.ReceiptDigest})
	}
	return v
}

// classifierInput gathers the classifier's input.
func classifierInput(wf *workflow.Workflow, rec *runRecord, states []stepState) run.Input {
	in := run.Input{RunMinTier: rec.RunMinTier, RunMinRung: oracle.Rung(rec.RunMinRung), Sticky: rec.Sticky || rec.reconciling()}
	for _, st := range states {
		in.Steps = append(in.Steps, st.Step)
	}
	for _, a := range rec.Artifacts {
		in.Artifacts = append(in.Artifacts, run.Artifact{Name: a.Artifact, FromStep: a.FromStep, Consumed: wf.Consumed(a.Artifact), Verdict: a.Verdict})
	}
	return in
}
