package runs

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// Reason codes of a rollback check's remainders (besides the judge's).
const (
	// ReasonRecordRemains: a record the run created still exists in the
	// collection (under another subject, or changed so that the step's
	// selector no longer finds it): it was not undone.
	ReasonRecordRemains = "record_remains"
	// ReasonRollbackUnprovable: the deployment's read cannot see the
	// whole collection (no census, a read narrowed to the subject, or
	// hidden identities), so a record the run created cannot be shown gone.
	ReasonRollbackUnprovable = "rollback_unprovable"
	// ReasonArtifactMoved: the bytes of an artifact the run confirmed are
	// still in the folder its deployment reads, under another name.
	ReasonArtifactMoved = "artifact_moved"
)

func (svc *Service) rollbackCheckOnce(ctx context.Context, id string) (*RollbackResult, error) {
	rec, wf, states, err := svc.runNow(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Seal != nil && rec.Seal.Outcome == run.RolledBackVerified {
		return &RollbackResult{RolledBack: true, Run: svc.viewOf(rec, wf, states)}, nil
	}
	created, err := svc.runCreated(ctx, rec)
	if err != nil {
		return nil, err
	}
	var checks []run.EffectCheck
	for _, rs := range rec.Steps {
		for _, sid := range rs.Sessions {
			cs, err := svc.sessionRollback(ctx, rs.Step, sid, created)
			if err != nil {
				return nil, err
			}
			checks = append(checks, cs...)
		}
	}
	for _, a := range rec.Artifacts {
		if a.Verdict == run.ArtifactConfirmed {
			checks = append(checks, svc.artifactRollbackRead(ctx, a))
		}
	}
	if len(checks) == 0 {
		return nil, &session.Error{Kind: session.Refused, Code: CodeNothingToRollBack, Path: "run_id",
			Message: fmt.Sprintf("run %q has no session to read back; nothing was done under it: FinishRun seals it HALTED_BEFORE_EFFECT", rec.ID)}
	}
	ok, remains := run.RolledBack(checks)
	if !ok {
		return &RollbackResult{Run: svc.viewOf(rec, wf, states), Remains: remains}, nil
	}
	c := run.Classify(classifierInput(wf, rec, states))
	c.Outcome, c.Reasons = run.RolledBackVerified, nil
	view, err := svc.sealRun(ctx, rec, wf, states, c, "rollback_check", jsonDigest(checks))
	if err != nil {
		return nil, err
	}
	return &RollbackResult{RolledBack: view.Outcome == run.RolledBackVerified, Run: view}, nil
}

// sessionRollback judges one session of the run for a rollback check
// through the one judging path (session.RunHost.Reread, census included): an
// effect is undone when it reads affirmatively absent against the
// session's original baseline (a loss of records the run created set
// aside: run.ForgivenClass) and every record the session created is gone
// from the whole collection (rollbackProven). A session not verified yet
// may still be acting, so it remains.
func (svc *Service) sessionRollback(ctx context.Context, step, sid string, created map[string]bool) ([]run.EffectCheck, error) {
	if r, found, err := svc.h.LatestResult(ctx, sid); err != nil {
		return nil, err
	} else if found && r == nil {
		return []run.EffectCheck{{Step: step, SessionID: sid, Effect: -1, Class: string(judge.ClassIndeterminate),
			Reasons: []run.Reason{{Code: "session_not_verified", Step: step, Message: fmt.Sprintf("session %s of step %q is not verified yet, so its automation may still be saving: Verify it, then check again", sid, step)}}}}, nil
	}
	got, err := svc.h.Reread(ctx, step, sid)
	if err != nil {
		return nil, err
	}
	if !got.Stored() {
		return got.Checks(), nil // removed from the store: remains
	}
	own, err := svc.h.RecordIDs(ctx, sid, got, true)
	if err != nil {
		return nil, err
	}
	touched, err := svc.h.RecordIDs(ctx, sid, got, false)
	if err != nil {
		return nil, err
	}
	out := make([]run.EffectCheck, len(got.Checks()))
	for i, c := range got.Checks() {
		c.Class = run.ForgivenClass(c, created)
		switch {
		case c.Class != run.ClassAbsent && unexplainedOnly(c) && i < len(own) && len(own[i]) > 0:
			// Something else changed in the collection since the step's
			// Begin: the run is not shown undone whatever its own records
			// did, but say so of them too when one is still there.
			rollbackProven(got, &c, own[i])
			c.Class = string(judge.ClassConflicting)
		case c.Class != run.ClassAbsent:
		case i < len(own) && len(own[i]) > 0:
			rollbackProven(got, &c, own[i])
		case i < len(touched):
			existingRestored(&c, touched[i], created)
		}
		out[i] = c
	}
	return out, nil
}

// unexplainedOnly reports whether UNEXPLAINED_CHANGE is what keeps c from
// reading absent (its other reasons are those of an absent effect).
func unexplainedOnly(c run.EffectCheck) bool {
	found := false
	for _, r := range c.Reasons {
		switch r.Code {
		case judge.ReasonUnexplainedChange:
			found = true
		case judge.ReasonCountUnder, judge.ReasonFieldNoMatch, judge.ReasonSetCardinality:
		default:
			return false
		}
	}
	return found
}

// existingRestored checks the records (identities ids) an effect that is
// no change claim (field_equals, …) read when the session was judged: one
// the run created is shown gone by the change claim that created it; one
// that existed before the run would have to be back to its baseline state,
// which a read against the baseline does not show (its value differing
// from the contract's is not its old value), so c stays INDETERMINATE
// (rollback_unprovable).
func existingRestored(c *run.EffectCheck, ids []string, created map[string]bool) {
	for _, id := range ids {
		if created[run.CreatedKey(c.Source, id)] {
			continue
		}
		c.Class = string(judge.ClassIndeterminate)
		c.Reasons = append(c.Reasons, run.Reason{Code: ReasonRollbackUnprovable, Step: c.Step,
			Message: fmt.Sprintf("effect %d of step %q changed a record that existed before the run (identity %q); a rollback check cannot show it back to its baseline state, so it is not counted undone", c.Effect, c.Step, id)})
		return
	}
}

// rollbackProven checks that every record (identities ids) effect c's
// session created is gone from the whole collection its read saw; c
// becomes a remainder otherwise: "conflicting" (record_remains) for one
// still there, INDETERMINATE (rollback_unprovable) when the read cannot
// see the collection.
func rollbackProven(got *session.Reread, c *run.EffectCheck, ids []string) {
	field := got.IdentityField(c.Effect)
	if !got.Sees(c.Effect) || field == "" {
		c.Class = string(judge.ClassIndeterminate)
		c.Reasons = append(c.Reasons, run.Reason{Code: ReasonRollbackUnprovable, Step: c.Step,
			Message: fmt.Sprintf("effect %d of step %q reads absent for its subject, but its deployment's read cannot see the whole collection (give the candidate a census:), so the %d record(s) the step created cannot be shown gone", c.Effect, c.Step, len(ids))})
		return
	}
	for _, id := range ids {
		switch {
		case id == judge.RedactedMarker:
			c.Class = string(judge.ClassIndeterminate)
			c.Reasons = append(c.Reasons, run.Reason{Code: ReasonRollbackUnprovable, Step: c.Step,
				Message: fmt.Sprintf("a record effect %d of step %q created has its identity redacted in the evidence; it cannot be shown gone", c.Effect, c.Step)})
			return
		case got.Holds(c.Effect, field, id):
			c.Class = string(judge.ClassConflicting)
			c.Reasons = append(c.Reasons, run.Reason{Code: ReasonRecordRemains, Step: c.Step,
				Message: fmt.Sprintf("a record effect %d of step %q created (%s %q) is still in the collection, under another subject or changed: it was not undone", c.Effect, c.Step, field, id)})
			return
		}
	}
}

// artifactRollbackRead checks again that a document the run confirmed is
// gone: first under its name (VerifyArtifact), then, when none of that
// name is left, anywhere in the folder its deployment reads, by its exact
// bytes. Only proven absence of those bytes reads as undone; present,
// other bytes under its name, the same bytes under another name
// (artifact_moved), a folder that cannot be read or an adapter that
// cannot prove absence, or a check recorded without where it read, remain
// (effect -1 of the producing step).
func (svc *Service) artifactRollbackRead(ctx context.Context, a runArtifactRec) run.EffectCheck {
	c := run.EffectCheck{Step: a.FromStep, Effect: -1, Class: string(judge.ClassIndeterminate)}
	if a.DeploymentName == "" || a.Name == "" {
		c.Reasons = []run.Reason{{Code: session.ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q was confirmed without a record of where it was read; it cannot be checked again", a.Artifact)}}
		return c
	}
	res, err := svc.h.VerifyArtifact(ctx, a.DeploymentName, receipt.Artifact{SHA256: a.SHA256, Size: a.Size, Name: a.Name})
	if err != nil {
		c.Reasons = []run.Reason{{Code: session.ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q could not be checked again: %v", a.Artifact, err)}}
		return c
	}
	absent := res.Verdict == judge.Refuted && len(res.Reasons) > 0
	for _, r := range res.Reasons {
		absent = absent && r.Code == session.ReasonArtifactAbsent
		c.Reasons = append(c.Reasons, run.Reason{Code: r.Code, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: %s", a.Artifact, r.Message)})
	}
	if !absent {
		return c
	}
	if r := svc.artifactElsewhere(ctx, a); r != nil {
		c.Reasons = append(c.Reasons, *r)
		if r.Code == ReasonArtifactMoved {
			c.Class = string(judge.ClassConflicting)
		}
		return c
	}
	c.Class = run.ClassAbsent
	return c
}

// artifactElsewhere looks for the artifact's exact bytes under any name in
// the folder its deployment reads: nil when they are proven absent; a
// reason otherwise (artifact_moved, or the folder could not be seen whole).
func (svc *Service) artifactElsewhere(ctx context.Context, a runArtifactRec) *run.Reason {
	s, absenceNotProof, err := svc.h.Documents(ctx, a.DeploymentName)
	switch {
	case err != nil:
		return &run.Reason{Code: session.ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: the folder of deployment %q could not be read to show its bytes gone: %v", a.Artifact, a.DeploymentName, err)}
	case !s.Reachable:
		return &run.Reason{Code: session.ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: the folder of deployment %q could not be read to show its bytes gone", a.Artifact, a.DeploymentName)}
	}
	for _, r := range s.Records {
		sum, _ := r["sha256"].(string)
		if strings.EqualFold(strings.TrimPrefix(sum, "sha256:"), a.SHA256) && fmt.Sprint(r["size"]) == fmt.Sprint(a.Size) {
			name, _ := r["name"].(string)
			return &run.Reason{Code: ReasonArtifactMoved, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: its exact bytes are still in deployment %q's folder, as %q: a renamed document was not undone", a.Artifact, a.DeploymentName, cmp.Or(name, fmt.Sprint(r["path"])))}
		}
	}
	if absenceNotProof {
		return &run.Reason{Code: session.ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: deployment %q's adapter cannot prove a document absent, so its bytes cannot be shown gone", a.Artifact, a.DeploymentName)}
	}
	return nil
}
