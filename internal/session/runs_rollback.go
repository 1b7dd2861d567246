package session

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
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

// collectionSeen is what a group's last judged read saw of the whole
// collection: the after census, or the after read itself when the
// candidate reads the whole collection. A run's rollback check proves with
// it that a record the run created is gone, not only gone from the
// subject's read.
type collectionSeen struct {
	census []judge.Record
	whole  *judge.Batch
}

// noteCollection records in the group's evidence what its read saw of the
// whole collection (census: the after census, nil when the group has
// none): nothing when the read is of the subject only, or when identities
// may be hidden (keyed), so that no record is ever shown gone by a read
// that cannot see it.
func (g *group) noteCollection(census *judge.Snapshot, after *read) {
	g.ev.collection = nil
	switch {
	case g.cm.KeyID != "" || g.cand.Redaction.Active():
	case census != nil:
		if census.Reachable {
			g.ev.collection = &collectionSeen{census: census.Records}
		}
	case g.cand.Census == nil && g.cand.CollateralScope() == config.ScopeCollection && after.reachable() && after.snap.Batch != nil:
		// A whole read, proven or declared (the operator's assertion,
		// which every receipt records).
		g.ev.collection = &collectionSeen{whole: after.snap.Batch}
	}
}

// holds reports whether a record with identity id (the judge's identity
// text) in field is in the collection.
func (c *collectionSeen) holds(field, id string) bool {
	for _, r := range c.census {
		if v, ok := judge.Canon(r[field]); ok && v == id {
			return true
		}
	}
	if b := c.whole; b != nil {
		name := b.NameIndex(field)
		for i := range b.Len() {
			if v, ok := b.Get(b.At(i), name); ok && v == id {
				return true
			}
		}
	}
	return false
}

func (m *Runs) rollbackCheckOnce(ctx context.Context, id string) (*RollbackResult, error) {
	rec, wf, states, err := m.runNow(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Seal != nil && rec.Seal.Outcome == run.RolledBackVerified {
		return &RollbackResult{RolledBack: true, Run: m.viewOf(rec, wf, states)}, nil
	}
	created, err := m.runCreated(ctx, rec)
	if err != nil {
		return nil, err
	}
	var checks []run.EffectCheck
	for _, rs := range rec.Steps {
		for _, sid := range rs.Sessions {
			cs, err := m.sessionRollback(ctx, rs.Step, sid, created)
			if err != nil {
				return nil, err
			}
			checks = append(checks, cs...)
		}
	}
	for _, a := range rec.Artifacts {
		if a.Verdict == run.ArtifactConfirmed {
			checks = append(checks, m.artifactRollbackRead(ctx, a))
		}
	}
	if len(checks) == 0 {
		return nil, &Error{Kind: Refused, Code: CodeNothingToRollBack, Path: "run_id",
			Message: fmt.Sprintf("run %q has no session to read back; nothing was done under it: FinishRun seals it HALTED_BEFORE_EFFECT", rec.ID)}
	}
	ok, remains := run.RolledBack(checks)
	if !ok {
		return &RollbackResult{Run: m.viewOf(rec, wf, states), Remains: remains}, nil
	}
	c := run.Classify(classifierInput(wf, rec, states))
	c.Outcome, c.Reasons = run.RolledBackVerified, nil
	view, err := m.sealRun(ctx, rec, wf, states, c, "rollback_check", jsonDigest(checks))
	if err != nil {
		return nil, err
	}
	return &RollbackResult{RolledBack: view.Outcome == run.RolledBackVerified, Run: view}, nil
}

// sessionRollback judges one session of the run for a rollback check
// through the one judging path (rereadSession, census included): an
// effect is undone when it reads affirmatively absent against the
// session's original baseline (a loss of records the run created set
// aside: run.ForgivenClass) and every record the session created is gone
// from the whole collection (rollbackProven). A session not verified yet
// may still be acting, so it remains.
func (m *Runs) sessionRollback(ctx context.Context, step, sid string, created map[string]bool) ([]run.EffectCheck, error) {
	if r, found, err := m.latestResult(ctx, sid); err != nil {
		return nil, err
	} else if found && r == nil {
		return []run.EffectCheck{{Step: step, SessionID: sid, Effect: -1, Class: string(judge.ClassIndeterminate),
			Reasons: []run.Reason{{Code: "session_not_verified", Step: step, Message: fmt.Sprintf("session %s of step %q is not verified yet, so its automation may still be saving: Verify it, then check again", sid, step)}}}}, nil
	}
	got, err := m.rereadSession(ctx, step, sid)
	if err != nil {
		return nil, err
	}
	if got.md == nil {
		return got.checks, nil // removed from the store: remains
	}
	own, err := m.sessionChangeIDs(ctx, sid, got.md)
	if err != nil {
		return nil, err
	}
	touched, err := m.sessionMatchedIDs(ctx, sid, got.md, false)
	if err != nil {
		return nil, err
	}
	out := make([]run.EffectCheck, len(got.checks))
	for i, c := range got.checks {
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
func rollbackProven(got *sessionReread, c *run.EffectCheck, ids []string) {
	seen := got.collectionOf(c.Effect)
	field := got.identityField(c.Effect)
	if seen == nil || field == "" {
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
		case seen.holds(field, id):
			c.Class = string(judge.ClassConflicting)
			c.Reasons = append(c.Reasons, run.Reason{Code: ReasonRecordRemains, Step: c.Step,
				Message: fmt.Sprintf("a record effect %d of step %q created (%s %q) is still in the collection, under another subject or changed: it was not undone", c.Effect, c.Step, field, id)})
			return
		}
	}
}

// collectionOf is what the read of effect i's capture saw of the whole
// collection (nil when it cannot see it).
func (r *sessionReread) collectionOf(i int) *collectionSeen {
	if r.ev == nil {
		return nil
	}
	for n, cm := range r.md.Captures {
		if slices.Contains(cm.Effects, i) && n < len(r.ev.Groups) {
			return r.ev.Groups[n].collection
		}
	}
	return nil
}

// identityField is effect i's identity field ("" when the session's
// effects no longer parse).
func (r *sessionReread) identityField(i int) string {
	effects, err := effectsList(r.md.Effects)
	if err != nil || i >= len(effects) {
		return ""
	}
	return cmpOr(effects[i].IdentityField, judge.DefaultIdentityField)
}

// artifactCandidate is the registered deployment name (its bytes and
// parse) and the index of its document-hash or file candidate, where
// VerifyArtifact and a rollback check read documents.
func artifactCandidate(daemon *config.Daemon, name string) ([]byte, *config.Deployment, int, error) {
	raw, err := registeredDeployment(daemon, name)
	if err != nil {
		return nil, nil, 0, err
	}
	dep, _, err := parseDeployment(raw)
	if err != nil {
		return nil, nil, 0, err
	}
	for i, c := range dep.Candidates {
		if artifactKinds[c.Kind] {
			return raw, dep, i, nil
		}
	}
	return nil, nil, 0, &Error{Kind: Invalid, Path: "deployment_name", Message: fmt.Sprintf("deployment %q has no document-hash or file candidate", name)}
}

// documents reads every document the registered deployment name's
// document-hash or file candidate sees; absenceNotProof is its adapter's
// word that a document it does not list may still exist.
func (v artifactVerifier) documents(ctx context.Context, name string) (s judge.Snapshot, absenceNotProof bool, err error) {
	_, dep, ci, err := artifactCandidate(v.daemon, name)
	if err != nil {
		return judge.Snapshot{}, false, err
	}
	insts, errs := v.configurer.configure(ctx, dep, nil, map[string]string{}, false)
	if errs[ci] != nil {
		return judge.Snapshot{}, false, errs[ci]
	}
	inst := insts[ci]
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, _ = v.reader.snapshot(rctx, inst, sdk.CaptureRequest{
		CaptureID: fmt.Sprintf("artifact-rollback/%s/%d", name, time.Now().UnixNano()), EffectKind: string(judge.RecordWritten), Timeout: time.Minute,
	})
	return s, inst.Info().AbsenceNotProof, nil
}

// artifactRollbackRead checks again that a document the run confirmed is
// gone: first under its name (VerifyArtifact), then, when none of that
// name is left, anywhere in the folder its deployment reads, by its exact
// bytes. Only proven absence of those bytes reads as undone; present,
// other bytes under its name, the same bytes under another name
// (artifact_moved), a folder that cannot be read or an adapter that
// cannot prove absence, or a check recorded without where it read, remain
// (effect -1 of the producing step).
func (m *Runs) artifactRollbackRead(ctx context.Context, a runArtifactRec) run.EffectCheck {
	c := run.EffectCheck{Step: a.FromStep, Effect: -1, Class: string(judge.ClassIndeterminate)}
	if a.DeploymentName == "" || a.Name == "" {
		c.Reasons = []run.Reason{{Code: ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q was confirmed without a record of where it was read; it cannot be checked again", a.Artifact)}}
		return c
	}
	res, err := m.VerifyArtifact(ctx, a.DeploymentName, receipt.Artifact{SHA256: a.SHA256, Size: a.Size, Name: a.Name})
	if err != nil {
		c.Reasons = []run.Reason{{Code: ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q could not be checked again: %v", a.Artifact, err)}}
		return c
	}
	absent := res.Verdict == judge.Refuted && len(res.Reasons) > 0
	for _, r := range res.Reasons {
		absent = absent && r.Code == ReasonArtifactAbsent
		c.Reasons = append(c.Reasons, run.Reason{Code: r.Code, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: %s", a.Artifact, r.Message)})
	}
	if !absent {
		return c
	}
	if r := m.artifactElsewhere(ctx, a); r != nil {
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
func (m *Runs) artifactElsewhere(ctx context.Context, a runArtifactRec) *run.Reason {
	s, absenceNotProof, err := m.artifacts().documents(ctx, a.DeploymentName)
	switch {
	case err != nil:
		return &run.Reason{Code: ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: the folder of deployment %q could not be read to show its bytes gone: %v", a.Artifact, a.DeploymentName, err)}
	case !s.Reachable:
		return &run.Reason{Code: ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: the folder of deployment %q could not be read to show its bytes gone", a.Artifact, a.DeploymentName)}
	}
	for _, r := range s.Records {
		sum, _ := r["sha256"].(string)
		if strings.EqualFold(strings.TrimPrefix(sum, "sha256:"), a.SHA256) && fmt.Sprint(r["size"]) == fmt.Sprint(a.Size) {
			name, _ := r["name"].(string)
			return &run.Reason{Code: ReasonArtifactMoved, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: its exact bytes are still in deployment %q's folder, as %q: a renamed document was not undone", a.Artifact, a.DeploymentName, cmpOr(name, fmt.Sprint(r["path"])))}
		}
	}
	if absenceNotProof {
		return &run.Reason{Code: ReasonArtifactNoAccess, Artifact: a.Artifact, Message: fmt.Sprintf("artifact %q: deployment %q's adapter cannot prove a document absent, so its bytes cannot be shown gone", a.Artifact, a.DeploymentName)}
	}
	return nil
}
