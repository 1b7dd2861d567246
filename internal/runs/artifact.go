package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// RunArtifactRequest is VerifyArtifact with a run: the artifact's name in
// the workflow and the step that produced it.
type RunArtifactRequest struct {
	RunID          string
	RunArtifact    string
	Step           string
	DeploymentName string
	Artifact       receipt.Artifact
}

// VerifyRunArtifact checks an artifact of a run (VerifyArtifact) and
// records the answer in the run: a CONFIRMED result the exact digest and
// size (which lets a consuming step begin), a REFUTED or INDETERMINATE one
// makes the run RECONCILIATION_REQUIRED (sticky).
func (svc *Service) VerifyRunArtifact(ctx context.Context, req RunArtifactRequest) (*session.ArtifactResult, error) {
	rec, err := svc.loadRun(ctx, req.RunID)
	if err != nil {
		return nil, err
	}
	wf, err := svc.runWorkflow(rec)
	if err != nil {
		return nil, err
	}
	if req.RunArtifact == "" {
		return nil, &session.Error{Kind: session.Invalid, Path: "run_artifact", Message: "name the artifact as the workflow's produces: names it"}
	}
	producer, ok := wf.Producer(req.RunArtifact)
	if !ok {
		return nil, &session.Error{Kind: session.Invalid, Path: "run_artifact", Message: fmt.Sprintf("no step of workflow %q produces an artifact %q", rec.Workflow, clip(req.RunArtifact))}
	}
	if req.Step != "" && req.Step != producer.Name {
		return nil, &session.Error{Kind: session.Invalid, Path: "step", Message: fmt.Sprintf("artifact %q is produced by step %q, not %q", req.RunArtifact, producer.Name, clip(req.Step))}
	}
	if rec.Seal != nil && !rec.reconciling() {
		return nil, &session.Error{Kind: session.Refused, Code: CodeRunSealed, Path: "run_id", Message: fmt.Sprintf("run %q was sealed %s; it takes no further check", rec.ID, rec.Seal.Outcome)}
	}
	if rs := rec.step(producer.Name); rs == nil || len(rs.Sessions) == 0 {
		// A document in the store before its producer began in this run
		// is not the run's (another run's, or one left from before).
		return nil, &session.Error{Kind: session.Refused, Reason: session.ReasonPolicy, Code: CodeStepOutOfOrder, Path: "run_artifact",
			Message: fmt.Sprintf("artifact %q is produced by step %q, which has no session in run %q yet: begin that step first", req.RunArtifact, producer.Name, rec.ID)}
	}
	// The workflow names where the artifact is read; a caller naming
	// another deployment is refused, not followed.
	at := producer.ProducedAt[req.RunArtifact]
	if req.DeploymentName != "" && req.DeploymentName != at {
		return nil, &session.Error{Kind: session.Invalid, Path: "deployment_name", Message: fmt.Sprintf("workflow %q checks artifact %q in deployment %q (produces: deployment:); leave deployment_name empty or name that one", rec.Workflow, req.RunArtifact, at)}
	}
	sum := strings.ToLower(strings.TrimPrefix(req.Artifact.SHA256, "sha256:"))
	if err := consumedElsewise(rec, req.RunArtifact, sum); err != nil {
		return nil, err
	}
	res, err := svc.h.VerifyArtifact(ctx, at, req.Artifact)
	if err != nil {
		return nil, err
	}
	entry := runArtifactRec{Artifact: req.RunArtifact, FromStep: producer.Name, Verdict: string(res.Verdict)}
	if len(res.Receipt) > 0 {
		entry.ReceiptDigest = sha256Hex(res.Receipt)
	}
	if res.Verdict == judge.Confirmed {
		entry.SHA256, entry.Size = sum, req.Artifact.Size
		entry.DeploymentName, entry.Name = req.DeploymentName, req.Artifact.Name
	}
	_, err = svc.h.Store().UpdateRun(ctx, rec.ID, func(l store.Ledger, raw []byte) ([]byte, store.RunChange, error) {
		var cur runRecord
		if err := json.Unmarshal(raw, &cur); err != nil {
			return nil, store.RunChange{}, err
		}
		if cur.Seal != nil && !cur.reconciling() {
			// Sealed while the document was read: the seal did not weigh
			// this check, and the run takes no further one.
			return nil, store.RunChange{}, &session.Error{Kind: session.Refused, Code: CodeRunSealed, Path: "run_id", Message: fmt.Sprintf("run %q was sealed %s while the artifact was checked; it takes no further check", cur.ID, cur.Seal.Outcome)}
		}
		if err := consumedElsewise(&cur, req.RunArtifact, sum); err != nil {
			return nil, store.RunChange{}, err
		}
		a := cur.artifact(req.RunArtifact)
		if a == nil {
			cur.Artifacts = append(cur.Artifacts, entry)
		} else {
			*a = entry
		}
		if res.Verdict != judge.Confirmed {
			cur.Sticky = true
		}
		if _, err := l.Append(EntryRunArtifact, cur.ID, jsonDigest(entry)); err != nil {
			return nil, store.RunChange{}, err
		}
		out, err := json.Marshal(cur)
		return out, store.RunChange{}, err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// consumedElsewise refuses a check of artifact at digest sum once a step
// of the run consumed it at another digest: the run's record of the
// artifact must stay the bytes its consumer bound.
func consumedElsewise(rec *runRecord, artifact, sum string) error {
	for _, rs := range rec.Steps {
		for _, c := range rs.Consumed {
			if c.Artifact == artifact && c.SHA256 != sum {
				return &session.Error{Kind: session.Refused, Code: CodeArtifactConsumed, Path: "artifact.sha256",
					Message: fmt.Sprintf("step %q of run %q consumed artifact %q at sha256 %s; other bytes cannot take its place in this run", rs.Step, rec.ID, artifact, c.SHA256)}
			}
		}
	}
	return nil
}
