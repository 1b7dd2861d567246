package runs

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// A session bound to a run that the store no longer has (removed by the
// retention of a run sealed RECONCILIATION_REQUIRED, which goes on) is a
// doubt, not a step that never began: the step may not begin again (that
// would hide the duplicate the removed session found), the run is not
// VERIFIED, and a rollback check lists it as remaining.
func TestRunRemovedSessionIsADoubt(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "gone")
	v := f.step(t, "gone", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"}, sdk.Record{"id": "p-2", "kind": "patient", "name": "Ada"})
	if v.Outcome != judge.ReconciliationRequired {
		t.Fatalf("double intake: %s", v.Outcome)
	}
	view, err := f.runs.FinishRun(ctx, "gone")
	if err != nil || view.Outcome != run.ReconciliationRequired {
		t.Fatalf("first seal %+v %v", view, err)
	}
	n, err := f.st.RemoveExpired(ctx, time.Now().Add(48*time.Hour), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("RemoveExpired = %d, %v", n, err)
	}
	// Re-beginning intake would read a baseline holding both patients and
	// confirm one more: refused.
	_, err = f.begin(t, "gone", "intake", nil)
	wantRefusal(t, err, session.Refused, CodeStepAlreadyBegun, "step")
	view, err = f.runs.GetRun(ctx, "gone")
	if err != nil || view.Steps[0].SessionID != v.SessionID {
		t.Fatalf("GetRun after the removal: %+v %v", view, err)
	}
	view, err = f.runs.FinishRun(ctx, "gone")
	if err != nil || view.Outcome != run.ReconciliationRequired || !slices.Contains(reasonCodes(view.Reasons), run.CodeStepNotVerified) {
		t.Fatalf("FinishRun after the removal: %+v %v", view, err)
	}
	f.tab.mu.Lock()
	f.tab.rows = nil
	f.tab.mu.Unlock()
	rb, err := f.runs.RollbackCheck(ctx, "gone")
	if err != nil || rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].SessionID != v.SessionID {
		t.Fatalf("rollback check of a removed session: %+v %v", rb, err)
	}
}

// A seal decided on the run as it stood before a Begin bound a step (a
// FinishRun racing a Begin, on this replica or another) must not stand:
// sealing "nothing began" HALTED_BEFORE_EFFECT while the step's session
// is out and its save may land would tell a falsehood.
func TestRunSealOfAStaleRunIsRedone(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "race")
	// FinishRun's read, before the Begin binds.
	rec, err := f.runs.loadRun(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	wf, err := f.runs.runWorkflow(rec)
	if err != nil {
		t.Fatal(err)
	}
	states, err := f.runs.stepStates(ctx, wf, rec)
	if err != nil {
		t.Fatal(err)
	}
	in := classifierInput(wf, rec, states)
	c := run.Classify(in)
	if c.Outcome != run.HaltedBeforeEffect {
		t.Fatalf("a run with nothing begun classifies %s", c.Outcome)
	}
	// The Begin binds meanwhile, and the automation saves.
	if _, err := f.begin(t, "race", "intake", nil); err != nil {
		t.Fatal(err)
	}
	f.tab.add(sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	// FinishRun's seal, on what it read.
	if view, err := f.runs.sealRun(ctx, rec, wf, states, c, "run_finish", jsonDigest(in)); !errors.Is(err, errRunChanged) {
		t.Fatalf("seal over a step bound after the read: %+v %v", view, err)
	}
	view, err := f.runs.FinishRun(ctx, "race")
	if err != nil || view.Outcome != run.ReconciliationRequired || view.Steps[0].SessionID == "" {
		t.Fatalf("FinishRun after the Begin: %+v %v", view, err)
	}
}

// A step may begin again only after its earlier sessions ended
// HALTED_BEFORE_EFFECT; a save of the earlier attempt that landed late
// must not become part of the new session's baseline, where the new
// session's own save would confirm beside it (a hidden duplicate).
func TestRunRebeginAfterALateSaveRefused(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	f.beginRun(t, "late")
	if v := f.step(t, "late", "intake", nil); v.Outcome != judge.HaltedBeforeEffect {
		t.Fatalf("intake with nothing saved: %s", v.Outcome)
	}
	// The first attempt's save lands after its Verify.
	f.tab.add(sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	_, err := f.begin(t, "late", "intake", nil)
	wantRefusal(t, err, session.Refused, CodeStepAlreadyBegun, "step")
}

// The step's result in the run is not only its newest session's: an
// earlier session of the step re-verified to something other than
// HALTED_BEFORE_EFFECT or VERIFIED (a duplicate seen against its
// baseline) keeps the run from VERIFIED.
func TestRunReverifyOfAnEarlierSessionCounts(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	w, err := workflow.Parse([]byte(strings.Split(runWorkflowYAML, "  - step: posting")[0]))
	if err != nil {
		t.Fatal(err)
	}
	f.wfs["clinic"] = w
	ctx := t.Context()
	f.beginRun(t, "older")
	first := f.step(t, "older", "intake", nil)
	if first.Outcome != judge.HaltedBeforeEffect {
		t.Fatalf("intake with nothing saved: %s", first.Outcome)
	}
	if v := f.step(t, "older", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"}); v.Outcome != judge.Verified {
		t.Fatalf("intake again: %s", v.Outcome)
	}
	f.tab.add(sdk.Record{"id": "p-2", "kind": "patient", "name": "Ada"})
	if r, err := f.m.Reverify(ctx, first.SessionID, "the first attempt's save may have landed"); err != nil || r.Outcome == judge.Verified || r.Outcome == judge.HaltedBeforeEffect {
		t.Fatalf("Reverify of the first attempt: %v %v", r, err)
	}
	view, err := f.runs.FinishRun(ctx, "older")
	if err != nil || view.Outcome != run.ReconciliationRequired || view.Steps[0].SessionID != first.SessionID {
		t.Fatalf("FinishRun with the first attempt reconciling: %s %+v %v", view.Outcome, view.Steps, err)
	}
}

// Once a step consumed an artifact at one digest, a check of other bytes
// under the artifact's name (after a REFUTED check in between, too) must
// not replace it: the run receipt would name a document no step consumed.
func TestRunConsumedArtifactNotReplaced(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "swap")
	f.step(t, "swap", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	f.step(t, "swap", "posting", map[string]string{"amount": "5"}, sdk.Record{"id": "t-1", "kind": "posting", "patient_id": "p-1", "amount": "5"})
	if a := f.letter(t, "swap", true); a.Verdict != judge.Confirmed {
		t.Fatalf("letter %s", a.Verdict)
	}
	f.step(t, "swap", "mail", nil, sdk.Record{"id": "m-1", "kind": "mail", "name": "Ada"})
	check := func(sum string) (*session.ArtifactResult, error) {
		return f.runs.VerifyRunArtifact(ctx, RunArtifactRequest{RunID: "swap", RunArtifact: "letter", Step: "posting", DeploymentName: "docs",
			Artifact: receipt.Artifact{SHA256: sum, Size: 5, Name: "other.pdf"}})
	}
	other := strings.Repeat("ab", 32)
	f.files.add(sdk.Record{"name": "other.pdf", "sha256": other, "size": json.Number("5")})
	_, err := check(other)
	wantRefusal(t, err, session.Refused, CodeArtifactConsumed, "artifact.sha256")
	// The consumed bytes may be checked again.
	if a := f.letter(t, "swap", false); a.Verdict != judge.Confirmed {
		t.Fatalf("letter again %s", a.Verdict)
	}
	view, err := f.runs.FinishRun(ctx, "swap")
	if err != nil || view.Outcome != run.Verified || view.Artifacts[0].SHA256 != letterSum {
		t.Fatalf("FinishRun: %s %+v %v", view.Outcome, view.Artifacts, err)
	}
}

// A "nothing landed" seal is a claim about the system of record now: a
// step that ended HALTED_BEFORE_EFFECT but whose save landed late must
// not be sealed HALTED_BEFORE_EFFECT.
func TestRunHaltedSealRereadsHaltedSteps(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "late2")
	if v := f.step(t, "late2", "intake", nil); v.Outcome != judge.HaltedBeforeEffect {
		t.Fatalf("intake with nothing saved: %s", v.Outcome)
	}
	f.tab.add(sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	view, err := f.runs.FinishRun(ctx, "late2")
	if err != nil || view.Outcome != run.ReconciliationRequired || !slices.Contains(reasonCodes(view.Reasons), run.CodeStepNotVerified) {
		t.Fatalf("FinishRun after a late save: %s %v %v", view.Outcome, reasonCodes(view.Reasons), err)
	}
}

// A run parameter the workflow marks secret is never digested into the
// ledger or the run receipt: two runs that differ only in the secret's
// value carry the same params_digest.
func TestRunSecretParamNotDigested(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	w, err := workflow.Parse([]byte(strings.Replace(runWorkflowYAML, "amount: {}}", "amount: {}, clerk_password: {secret: true}}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	f.wfs["clinic"] = w
	ctx := t.Context()
	var digests []string
	for id, pw := range map[string]string{"sec1": "hunter2", "sec2": "correct horse"} {
		if _, err := f.runs.BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"name": "Ada", "clerk_password": pw}, RunID: id}); err != nil {
			t.Fatal(err)
		}
		view, err := f.runs.FinishRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, openRunReceipt(t, f, view.Receipt, id).ParamsDigest)
	}
	if digests[0] != digests[1] {
		t.Fatalf("params_digest depends on a secret's value: %v", digests)
	}
}

// A document a run's step produced and the run confirmed is a change the
// run made: a rollback check does not answer ROLLED_BACK_VERIFIED while it
// is still in the document store.
func TestRunRollbackSeesConfirmedArtifact(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "undo2")
	f.step(t, "undo2", "intake", nil, sdk.Record{"id": "p-9", "kind": "patient", "name": "Ada"})
	f.step(t, "undo2", "posting", map[string]string{"amount": "3"}, sdk.Record{"id": "t-9", "kind": "posting", "patient_id": "p-9", "amount": "3"})
	if a := f.letter(t, "undo2", true); a.Verdict != judge.Confirmed {
		t.Fatalf("letter %s", a.Verdict)
	}
	f.tab.mu.Lock()
	f.tab.rows = nil
	f.tab.mu.Unlock()
	rb, err := f.runs.RollbackCheck(ctx, "undo2")
	if err != nil || rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].Step != "posting" || rb.Remains[0].Effect != -1 {
		t.Fatalf("rollback check with the letter still stored: %+v %v", rb, err)
	}
	f.files.mu.Lock()
	f.files.rows = nil
	f.files.mu.Unlock()
	rb, err = f.runs.RollbackCheck(ctx, "undo2")
	if err != nil || !rb.RolledBack || rb.Run.Outcome != run.RolledBackVerified {
		t.Fatalf("rollback check with the letter gone too: %+v %v", rb, err)
	}
}

// A session not verified yet may still be acting: its save may land after
// the read. A rollback check does not seal ROLLED_BACK_VERIFIED over it.
func TestRunRollbackWaitsForUnverifiedSession(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "inflight")
	b, err := f.begin(t, "inflight", "intake", nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := f.runs.RollbackCheck(ctx, "inflight")
	if err != nil || rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].SessionID != b.SessionID {
		t.Fatalf("rollback check with intake in flight: %+v %v", rb, err)
	}
	if _, err := f.m.Verify(ctx, b.SessionID); err != nil {
		t.Fatal(err)
	}
	rb, err = f.runs.RollbackCheck(ctx, "inflight")
	if err != nil || !rb.RolledBack {
		t.Fatalf("rollback check with intake halted: %+v %v", rb, err)
	}
}

// An artifact check that was reading while the run was sealed (FinishRun
// on any replica) is not recorded into the sealed run: the seal did not
// weigh it, and a run sealed with a final outcome takes no further check.
func TestRunArtifactCheckRacingSealRefused(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	files := &table{}
	docs := &memAdapter{kind: docKind, tier: sdk.TierIndependentSystem, table: files}
	m2, st2 := newManager(t, &config.Daemon{Deployments: f.daemon.Deployments}, f.wfs, f.signer, &memAdapter{kind: "runmem", tier: sdk.TierIndependentSystem, table: f.tab}, docs)
	f.daemon.Deployments["docs"] = writeDeployment(t, "effects: {kind: "+docKind+", newness: whole_read}\n")
	f.m, f.runs, f.st = m2, For(m2), st2
	ctx := t.Context()
	f.beginRun(t, "artrace")
	f.step(t, "artrace", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	f.step(t, "artrace", "posting", map[string]string{"amount": "5"}, sdk.Record{"id": "t-1", "kind": "posting", "patient_id": "p-1", "amount": "5"})
	files.add(sdk.Record{"name": "letter.pdf", "sha256": letterSum, "size": json.Number("4")})
	check := func() (*session.ArtifactResult, error) {
		return f.runs.VerifyRunArtifact(ctx, RunArtifactRequest{RunID: "artrace", RunArtifact: "letter", Step: "posting", DeploymentName: "docs",
			Artifact: receipt.Artifact{SHA256: letterSum, Size: 4, Name: "letter.pdf"}})
	}
	if a, err := check(); err != nil || a.Verdict != judge.Confirmed {
		t.Fatalf("letter: %v %v", a, err)
	}
	f.step(t, "artrace", "mail", nil, sdk.Record{"id": "m-1", "kind": "mail", "name": "Ada"})
	// The letter is checked again, and deleted meanwhile: the run is
	// sealed VERIFIED while the check reads.
	var sealed *RunView
	docs.afterRead = func(int) {
		var err error
		if sealed, err = f.runs.FinishRun(ctx, "artrace"); err != nil {
			t.Error(err)
		}
	}
	files.mu.Lock()
	files.rows = nil
	files.mu.Unlock()
	_, err := check()
	if sealed == nil || sealed.Outcome != run.Verified {
		t.Fatalf("the seal during the read: %+v", sealed)
	}
	wantRefusal(t, err, session.Refused, CodeRunSealed, "run_id")
	view, err := f.runs.GetRun(ctx, "artrace")
	if err != nil || view.Outcome != run.Verified || view.Artifacts[0].Verdict != run.ArtifactConfirmed {
		t.Fatalf("the sealed run records the late check: %s %+v %v", view.Outcome, view.Artifacts, err)
	}
}

// An artifact is the producing step's document in this run: before that
// step has a session in the run, a document found in the store (another
// run's, or one left from before) is not its, and is not recorded.
func TestRunArtifactBeforeItsProducerRefused(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "early")
	f.files.add(sdk.Record{"name": "letter.pdf", "sha256": letterSum, "size": json.Number("4")})
	_, err := f.runs.VerifyRunArtifact(ctx, RunArtifactRequest{RunID: "early", RunArtifact: "letter", Step: "posting", DeploymentName: "docs",
		Artifact: receipt.Artifact{SHA256: letterSum, Size: 4, Name: "letter.pdf"}})
	wantRefusal(t, err, session.Refused, CodeStepOutOfOrder, "run_artifact")
	_, err = f.begin(t, "early", "mail", nil)
	wantRefusal(t, err, session.Refused, CodeArtifactUnverified, "step")
}

// TestRunArtifactReadWhereTheWorkflowSays: the workflow's produces: names
// the deployment a run's artifact check reads; a caller naming another is
// refused before anything is read, and a caller naming none gets the
// workflow's.
func TestRunArtifactReadWhereTheWorkflowSays(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	f.daemon.Deployments["elsewhere"] = f.daemon.Deployments["docs"]
	ctx := t.Context()
	f.beginRun(t, "where")
	f.step(t, "where", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	f.step(t, "where", "posting", map[string]string{"amount": "5"}, sdk.Record{"id": "t-1", "kind": "posting", "patient_id": "p-1", "amount": "5"})
	f.files.add(sdk.Record{"name": "letter.pdf", "sha256": letterSum, "size": json.Number("4")})
	art := receipt.Artifact{SHA256: letterSum, Size: 4, Name: "letter.pdf"}
	_, err := f.runs.VerifyRunArtifact(ctx, RunArtifactRequest{RunID: "where", RunArtifact: "letter", Step: "posting", DeploymentName: "elsewhere", Artifact: art})
	var se *session.Error
	if !errors.As(err, &se) || se.Kind != session.Invalid || se.Path != "deployment_name" {
		t.Fatalf("a caller-chosen deployment: %v; want session.Invalid at deployment_name", err)
	}
	if v, _ := f.runs.GetRun(ctx, "where"); len(v.Artifacts) != 1 || v.Artifacts[0].Verdict != "" {
		t.Fatalf("the refused check was recorded: %+v", v.Artifacts)
	}
	res, err := f.runs.VerifyRunArtifact(ctx, RunArtifactRequest{RunID: "where", RunArtifact: "letter", Step: "posting", Artifact: art})
	if err != nil || res.Verdict != judge.Confirmed {
		t.Fatalf("no deployment named: %v %v; want CONFIRMED from the workflow's deployment", res, err)
	}
}

// TestRunStepRefusesChangedDeploymentAndUndeclaredParams: a step reads
// through the deployment the run began with (its digest is in the run
// receipt), so one changed since is refused; a step parameter the workflow
// does not declare is refused with its path, as at BeginRun.
func TestRunStepRefusesChangedDeploymentAndUndeclaredParams(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	f.beginRun(t, "chg")
	_, err := f.begin(t, "chg", "intake", map[string]string{"Patient_ID": "p-1"})
	var se *session.Error
	if !errors.As(err, &se) || se.Kind != session.Invalid || se.Path != "params.Patient_ID" {
		t.Fatalf("an undeclared step parameter: %v; want session.Invalid at params.Patient_ID", err)
	}
	path := f.daemon.Deployments["clinic"]
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(raw, []byte("\n# edited while the run was open\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = f.begin(t, "chg", "intake", nil)
	wantRefusal(t, err, session.Refused, CodeDeploymentChanged, "run_id")
}

// An attempt that ended HALTED_BEFORE_EFFECT, the step begun again and
// VERIFIED, then the first attempt's save lands: two records where the
// run claims one. FinishRun reads every attempt again before it seals, so
// the run is not VERIFIED (earlier_attempt_landed, and the VERIFIED
// attempt no longer reads VERIFIED against its own baseline either).
func TestRunEarlierAttemptLandedBeforeSeal(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	w, err := workflow.Parse([]byte(strings.Split(runWorkflowYAML, "  - step: posting")[0]))
	if err != nil {
		t.Fatal(err)
	}
	f.wfs["clinic"] = w
	f.beginRun(t, "slow")
	first := f.step(t, "slow", "intake", nil)
	if first.Outcome != judge.HaltedBeforeEffect {
		t.Fatalf("intake with nothing saved: %s", first.Outcome)
	}
	if v := f.step(t, "slow", "intake", nil, sdk.Record{"id": "p-2", "kind": "patient", "name": "Ada"}); v.Outcome != judge.Verified {
		t.Fatalf("intake again: %s", v.Outcome)
	}
	// The first attempt's slow save.
	f.tab.add(sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	view, err := f.runs.FinishRun(t.Context(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	codes := reasonCodes(view.Reasons)
	if view.Outcome != run.ReconciliationRequired || !slices.Equal(codes, []string{run.CodeEarlierAttemptLanded, run.CodeVerifiedStepChanged}) {
		t.Fatalf("FinishRun after the first attempt's late save: %s %v; want RECONCILIATION_REQUIRED [earlier_attempt_landed verified_step_changed]", view.Outcome, codes)
	}
	if !strings.Contains(view.Reasons[0].Message, first.SessionID) {
		t.Fatalf("the reason does not name the earlier attempt %s: %s", first.SessionID, view.Reasons[0].Message)
	}
	p := openRunReceipt(t, f, view.Receipt, "slow")
	if p.Outcome != run.ReconciliationRequired || !slices.Contains(p.ReasonCodes, run.CodeEarlierAttemptLanded) {
		t.Fatalf("the run receipt says %s %v", p.Outcome, p.ReasonCodes)
	}
}

// With nothing landed late, the re-reads at the seal change nothing: every
// attempt still reads as its result, and the run is VERIFIED.
func TestRunRereadAtSealKeepsAnHonestRetryVerified(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	w, err := workflow.Parse([]byte(strings.Split(runWorkflowYAML, "  - step: posting")[0]))
	if err != nil {
		t.Fatal(err)
	}
	f.wfs["clinic"] = w
	f.beginRun(t, "retry")
	if v := f.step(t, "retry", "intake", nil); v.Outcome != judge.HaltedBeforeEffect {
		t.Fatalf("intake with nothing saved: %s", v.Outcome)
	}
	if v := f.step(t, "retry", "intake", nil, sdk.Record{"id": "p-2", "kind": "patient", "name": "Ada"}); v.Outcome != judge.Verified {
		t.Fatalf("intake again: %s", v.Outcome)
	}
	view, err := f.runs.FinishRun(t.Context(), "retry")
	if err != nil || view.Outcome != run.Verified || len(view.Reasons) != 0 {
		t.Fatalf("FinishRun of an honest retry: %+v %v", view, err)
	}
}
