package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// pendingWorkflowYAML: intake, then mail and audit, neither of which names
// intake in after:; audit declares itself independent.
const pendingWorkflowYAML = `schema: verifierd.workflow/v1
name: clinic
params: {name: {}}
steps:
  - step: intake
    risk: irreversible
    effects:
      - {kind: record_written, match: {kind: patient, name: {param: name}}, count_new_only: true, timeout_s: 0.2}
  - step: mail
    effects:
      - {kind: record_written, match: {kind: mail, name: {param: name}}, count_new_only: true, timeout_s: 0.2}
  - step: audit
    independent: true
    effects:
      - {kind: record_written, match: {kind: audit, name: {param: name}}, count_new_only: true, timeout_s: 0.2}
`

// A step that ended RECONCILIATION_REQUIRED stops every later step of the
// run, named in its after: or not (reconciliation_pending, naming the
// step and its session), except one declared independent: true; once the
// step is re-verified VERIFIED, the later steps begin.
func TestRunReconciliationPendingBlocksLaterSteps(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	w, err := workflow.Parse([]byte(pendingWorkflowYAML))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := w.Step("audit"); !s.Independent {
		t.Fatal("independent: true was not parsed")
	}
	f.wfs["clinic"] = w
	ctx := t.Context()
	f.beginRun(t, "pend")
	// A double submit: intake is RECONCILIATION_REQUIRED.
	intake := f.step(t, "pend", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"}, sdk.Record{"id": "p-2", "kind": "patient", "name": "Ada"})
	if intake.Outcome != judge.ReconciliationRequired {
		t.Fatalf("intake saved twice: %s", intake.Outcome)
	}
	_, err = f.begin(t, "pend", "mail", nil)
	wantRefusal(t, err, session.Refused, CodeReconciliationPending, "step")
	if msg := err.Error(); !strings.Contains(msg, `"intake"`) || !strings.Contains(msg, intake.SessionID) {
		t.Fatalf("the refusal does not name the step and its session %s: %s", intake.SessionID, msg)
	}
	var se *session.Error
	if !errors.As(err, &se) || se.TerminalOutcome != session.OutcomeRejectedPolicy {
		t.Fatalf("the refusal's terminal outcome: %+v; want REJECTED_POLICY", se)
	}
	// The independent step is not held.
	if v := f.step(t, "pend", "audit", nil, sdk.Record{"id": "a-1", "kind": "audit", "name": "Ada"}); v.Outcome != judge.Verified {
		t.Fatalf("the independent step: %s", v.Outcome)
	}
	// Reconciled: the duplicate goes, intake is re-verified VERIFIED.
	f.tab.mu.Lock()
	f.tab.rows = slices.DeleteFunc(f.tab.rows, func(r sdk.Record) bool { return r["id"] == "p-2" })
	f.tab.mu.Unlock()
	if r, err := f.m.Reverify(ctx, intake.SessionID, "duplicate removed"); err != nil || r.Outcome != judge.Verified {
		t.Fatalf("Reverify after the repair: %v %v", r, err)
	}
	if v := f.step(t, "pend", "mail", nil, sdk.Record{"id": "m-1", "kind": "mail", "name": "Ada"}); v.Outcome != judge.Verified {
		t.Fatalf("mail after the repair: %s", v.Outcome)
	}
	view, err := f.runs.FinishRun(ctx, "pend")
	if err != nil || view.Outcome != run.Verified {
		t.Fatalf("FinishRun: %+v %v", view, err)
	}
}

// A Begin of the consuming step racing a VerifyArtifact of other bytes
// under the artifact's name: whichever lands first, the consumer's bound
// digest, the run's record of the artifact and the run receipt name the
// same file, every time (the binding is decided in the run's one store
// transaction, on the real bbolt store).
func TestRunConsumerBindingRacingArtifactCheck(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	other := strings.Repeat("cd", 32)
	f.files.add(sdk.Record{"name": "other.pdf", "sha256": other, "size": json.Number("5")})
	f.files.add(sdk.Record{"name": "letter.pdf", "sha256": letterSum, "size": json.Number("4")})
	bound := map[string]int{}
	for i := range 30 {
		id := fmt.Sprintf("race%d", i)
		// Each run is its own patient: FinishRun reads every session
		// again, and another run's records must not count as this one's.
		if _, err := f.runs.BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"name": id}, RunID: id}); err != nil {
			t.Fatal(err)
		}
		f.step(t, id, "intake", nil, sdk.Record{"id": "p-" + id, "kind": "patient", "name": id})
		f.step(t, id, "posting", map[string]string{"amount": "1"}, sdk.Record{"id": "t-" + id, "kind": "posting", "patient_id": "p-" + id, "amount": "1"})
		if a := f.letter(t, id, false); a.Verdict != judge.Confirmed {
			t.Fatalf("letter %s", a.Verdict)
		}
		var (
			wg    sync.WaitGroup
			res   *session.BeginResult
			begun error
		)
		wg.Go(func() { res, begun = f.begin(t, id, "mail", nil) })
		wg.Go(func() {
			// Its answer does not matter: the race is what is tested.
			_, _ = f.runs.VerifyRunArtifact(ctx, RunArtifactRequest{RunID: id, RunArtifact: "letter", Step: "posting", DeploymentName: "docs",
				Artifact: receipt.Artifact{SHA256: other, Size: 5, Name: "other.pdf"}})
		})
		wg.Wait()
		view, err := f.runs.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		recorded := view.Artifacts[0].SHA256
		if begun != nil {
			wantRefusal(t, begun, session.Refused, CodeArtifactUnverified, "step")
			bound["refused"]++
			continue
		}
		raw, _, err := f.st.Session(ctx, res.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		var md storedMeta
		if err := json.Unmarshal(raw, &md); err != nil {
			t.Fatal(err)
		}
		if md.Run == nil || len(md.Run.Consumed) != 1 || md.Run.Consumed[0].SHA256 != recorded {
			t.Fatalf("iteration %d: the consumer bound %+v, the run records the letter at %s", i, md.Run, recorded)
		}
		f.tab.add(sdk.Record{"id": "m-" + id, "kind": "mail", "name": id})
		if _, err := f.m.Verify(ctx, res.SessionID); err != nil {
			t.Fatal(err)
		}
		sealed, err := f.runs.FinishRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		p := openRunReceipt(t, f, sealed.Receipt, id)
		if len(p.Artifacts) != 1 || p.Artifacts[0].SHA256 != md.Run.Consumed[0].SHA256 {
			t.Fatalf("iteration %d: the receipt names %+v, the consumer bound %s", i, p.Artifacts, md.Run.Consumed[0].SHA256)
		}
		bound[md.Run.Consumed[0].SHA256]++
	}
	// Both orders are allowed; what each iteration asserted is that the
	// consumer, the run record and the receipt agree.
	if bound["refused"]+bound[letterSum]+bound[other] != 30 {
		t.Fatalf("outcomes over the iterations: %v; want 30", bound)
	}
	t.Logf("outcomes over the iterations: %v", bound)
}

// A VERIFIED run whose records were re-pointed to another patient and
// whose letter was renamed is not rolled back: each record the run created
// is still in the collection (record_remains) and the letter's bytes are
// still in the folder (artifact_moved). Once the records and the file are
// really gone, the run is sealed ROLLED_BACK_VERIFIED.
func TestRunRollbackRepointedAndRenamedRemain(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "repoint")
	f.step(t, "repoint", "intake", nil, sdk.Record{"id": "p-9", "kind": "patient", "name": "Ada"})
	f.step(t, "repoint", "posting", map[string]string{"amount": "3"}, sdk.Record{"id": "t-9", "kind": "posting", "patient_id": "p-9", "amount": "3"})
	if a := f.letter(t, "repoint", true); a.Verdict != judge.Confirmed {
		t.Fatalf("letter %s", a.Verdict)
	}
	f.step(t, "repoint", "mail", nil, sdk.Record{"id": "m-9", "kind": "mail", "name": "Ada"})
	if view, err := f.runs.FinishRun(ctx, "repoint"); err != nil || view.Outcome != run.Verified {
		t.Fatalf("FinishRun: %+v %v", view, err)
	}
	// The "undo": every row re-pointed to another patient, the letter
	// renamed in its folder.
	f.tab.mu.Lock()
	for _, r := range f.tab.rows {
		if r["name"] == "Ada" {
			r["name"] = "Bob"
		}
		if r["patient_id"] == "p-9" {
			r["patient_id"] = "p-77"
		}
	}
	f.tab.mu.Unlock()
	f.files.mu.Lock()
	f.files.rows[0]["name"] = "letter-old.pdf"
	f.files.mu.Unlock()
	rb, err := f.runs.RollbackCheck(ctx, "repoint")
	if err != nil || rb.RolledBack {
		t.Fatalf("rollback check of re-pointed rows and a renamed letter: %+v %v; want not rolled back", rb, err)
	}
	got := map[string]int{}
	for _, r := range rb.Remains {
		for _, rs := range r.Reasons {
			got[r.Step+"/"+rs.Code]++
		}
	}
	want := map[string]int{"intake/" + ReasonRecordRemains: 1, "posting/" + ReasonRecordRemains: 1, "mail/" + ReasonRecordRemains: 1, "posting/" + ReasonArtifactMoved: 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("remainder %s: %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(rb.Remains) != 4 {
		t.Errorf("%d remainders, want the three records and the letter: %+v", len(rb.Remains), rb.Remains)
	}
	if view, _ := f.runs.GetRun(ctx, "repoint"); view.Outcome != run.Verified || view.Attempt != 1 {
		t.Fatalf("the run after a failed rollback check: %s attempt %d; want it unchanged", view.Outcome, view.Attempt)
	}
	// Really undone: the rows and the file gone. While the letters'
	// folder cannot be read, its absence is not shown: the letter remains
	// INDETERMINATE.
	f.tab.mu.Lock()
	f.tab.rows = nil
	f.tab.mu.Unlock()
	f.files.mu.Lock()
	f.files.rows, f.files.unreachable = nil, true
	f.files.mu.Unlock()
	rb, err = f.runs.RollbackCheck(ctx, "repoint")
	if err != nil || rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].Effect != -1 || rb.Remains[0].Class != string(judge.ClassIndeterminate) {
		t.Fatalf("rollback check with the letters' folder unreadable: %+v %v; want the letter INDETERMINATE", rb, err)
	}
	f.files.mu.Lock()
	f.files.unreachable = false
	f.files.mu.Unlock()
	rb, err = f.runs.RollbackCheck(ctx, "repoint")
	if err != nil || !rb.RolledBack || rb.Run.Outcome != run.RolledBackVerified || len(rb.Remains) != 0 {
		t.Fatalf("rollback check with everything gone: %+v %v", rb, err)
	}
}

// A step that changed a record existing before the run (field_equals on
// it) is not undone when the record merely no longer matches the step's
// selector (moved to another patient): a read against the baseline cannot
// show it back to its baseline state, so a rollback check leaves it
// INDETERMINATE (rollback_unprovable), never ROLLED_BACK_VERIFIED.
func TestRunRollbackOfAnUpdateUnprovable(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	w, err := workflow.Parse([]byte(`schema: verifierd.workflow/v1
name: clinic
params: {name: {}}
policy: {require_change_claim: false}
steps:
  - step: close
    effects:
      - {kind: field_equals, match: {kind: patient, name: {param: name}}, field: status, value: closed, timeout_s: 0.2}
`))
	if err != nil {
		t.Fatal(err)
	}
	f.wfs["clinic"] = w
	ctx := t.Context()
	f.tab.add(sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada", "status": "open"})
	f.beginRun(t, "update")
	res, err := f.begin(t, "update", "close", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.tab.mu.Lock()
	f.tab.rows[0]["status"] = "closed"
	f.tab.mu.Unlock()
	if v, err := f.m.Verify(ctx, res.SessionID); err != nil || v.Outcome != judge.Verified {
		t.Fatalf("close: %v %v", v, err)
	}
	// Set to yet another value: the judge reads a mismatch, which remains.
	f.tab.mu.Lock()
	f.tab.rows[0]["status"] = "archived"
	f.tab.mu.Unlock()
	rb, err := f.runs.RollbackCheck(ctx, "update")
	if err != nil || rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].Class == run.ClassAbsent {
		t.Fatalf("rollback check of a record set to a third value: %+v %v; want it remaining", rb, err)
	}
	// Moved to another patient: the step's selector finds nothing, which
	// reads absent, but the record is not back as it was.
	f.tab.mu.Lock()
	f.tab.rows[0]["name"] = "Bob"
	f.tab.mu.Unlock()
	rb, err = f.runs.RollbackCheck(ctx, "update")
	if err != nil || rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].Class != string(judge.ClassIndeterminate) || !slices.Contains(reasonCodes(rb.Remains[0].Reasons), ReasonRollbackUnprovable) {
		t.Fatalf("rollback check of a changed existing record: %+v %v; want it INDETERMINATE, rollback_unprovable", rb, err)
	}
}
