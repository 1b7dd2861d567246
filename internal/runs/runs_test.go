package runs

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/oracle"
	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// runWorkflow is intake -> posting (after intake, the patient id handed
// off from intake's record, produces a letter) -> mail (consumes the
// letter).
const runWorkflowYAML = `schema: verifierd.workflow/v1
name: clinic
params: {name: {}, patient_id: {}, amount: {}}
steps:
  - step: intake
    risk: irreversible
    effects:
      - {kind: record_written, match: {kind: patient, name: {param: name}}, count_new_only: true, timeout_s: 0.2}
  - step: posting
    after: [intake]
    handoffs: [{param: patient_id, from: {step: intake, effect: 0, field: id}}]
    produces: [{artifact: letter, deployment: docs}]
    effects:
      - {kind: record_written, match: {kind: posting, patient_id: {param: patient_id}, amount: {param: amount}}, count_new_only: true, timeout_s: 0.2}
  - step: mail
    consumes: [{artifact: letter, from_step: posting}]
    effects:
      - {kind: record_written, match: {kind: mail, name: {param: name}}, count_new_only: true, timeout_s: 0.2}
`

// fileTable stands in for a document-hash store: records with name, sha256
// and size.
const letterSum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

type runFixture struct {
	m      *session.Manager
	runs   *Service
	st     store.Backend
	daemon *config.Daemon
	wfs    map[string]*workflow.Workflow
	signer *signing.Signer
	tab    *table
	files  *table
	pub    ed25519.PublicKey
}

// newRunFixture: the clinic workflow over deployment clinic (kind, at
// tier) with its letters in deployment docs (a document store).
func newRunFixture(t *testing.T, tier sdk.Tier, kind string) *runFixture {
	t.Helper()
	tab, files := &table{}, &table{}
	daemon := &config.Daemon{Deployments: map[string]string{
		"clinic": writeDeployment(t, "effects: {kind: "+kind+", newness: whole_read}\n"),
		"docs":   writeDeployment(t, "effects: {kind: "+docKind+", newness: whole_read}\n"),
	}}
	w, err := workflow.Parse([]byte(runWorkflowYAML))
	if err != nil {
		t.Fatal(err)
	}
	wfs := map[string]*workflow.Workflow{"clinic": w}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer := signing.New(priv)
	m, st := newManager(t, daemon, wfs, signer, &memAdapter{kind: kind, tier: tier, table: tab}, &memAdapter{kind: docKind, tier: sdk.TierIndependentSystem, table: files})
	return &runFixture{m: m, runs: For(m), st: st, daemon: daemon, wfs: wfs, signer: signer, tab: tab, files: files, pub: pub}
}

func (f *runFixture) begin(t *testing.T, id, step string, params map[string]string) (*session.BeginResult, error) {
	t.Helper()
	return f.m.Begin(t.Context(), session.BeginRequest{RunID: id, Step: step, Params: params})
}

func (f *runFixture) step(t *testing.T, id, step string, params map[string]string, write ...sdk.Record) *session.Result {
	t.Helper()
	res, err := f.begin(t, id, step, params)
	if err != nil {
		t.Fatalf("Begin %s: %v", step, err)
	}
	for _, r := range write {
		f.tab.add(r)
	}
	v, err := f.m.Verify(t.Context(), res.SessionID)
	if err != nil {
		t.Fatalf("Verify %s: %v", step, err)
	}
	return v
}

func (f *runFixture) letter(t *testing.T, id string, present bool) *session.ArtifactResult {
	t.Helper()
	if present {
		f.files.add(sdk.Record{"name": "letter.pdf", "sha256": letterSum, "size": json.Number("4")})
	}
	res, err := f.runs.VerifyRunArtifact(t.Context(), RunArtifactRequest{RunID: id, RunArtifact: "letter", Step: "posting", DeploymentName: "docs",
		Artifact: receipt.Artifact{SHA256: letterSum, Size: 4, Name: "letter.pdf"}})
	if err != nil {
		t.Fatalf("VerifyRunArtifact: %v", err)
	}
	return res
}

func (f *runFixture) beginRun(t *testing.T, id string) {
	t.Helper()
	got, err := f.runs.BeginRun(t.Context(), BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"name": "Ada"}, RunID: id})
	if err != nil || got != id {
		t.Fatalf("BeginRun = %q, %v", got, err)
	}
}

func reasonCodes(rs []run.Reason) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}

func TestRunHonestVerifiedAndRefusals(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "r1")
	// Idempotent; the same id with other arguments is refused.
	f.beginRun(t, "r1")
	_, err := f.runs.BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"name": "Bob"}, RunID: "r1"})
	wantRefusal(t, err, session.Exists, "", "run_id")
	_, err = f.runs.BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"patient_id": "7"}, RunID: "r9"})
	wantRefusal(t, err, session.Refused, CodeHandoffForged, "params.patient_id")
	_, err = f.runs.BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", Params: map[string]string{"nme": "x"}})
	wantRefusal(t, err, session.Invalid, "", "params.nme")
	_, err = f.runs.BeginRun(ctx, BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", RunID: "bad id"})
	wantRefusal(t, err, session.Invalid, "", "run_id")

	// posting before intake: out of order.
	_, err = f.begin(t, "r1", "posting", map[string]string{"amount": "10"})
	wantRefusal(t, err, session.Refused, CodeStepOutOfOrder, "step")
	var se *session.Error
	if !errors.As(err, &se) || se.TerminalOutcome != session.OutcomeRejectedPolicy || len(se.Receipt) == 0 {
		t.Fatalf("out of order: terminal %q, receipt %d bytes; want REJECTED_POLICY with its refusal receipt", se.TerminalOutcome, len(se.Receipt))
	}
	// A run parameter cannot be overridden; unknown steps are invalid.
	_, err = f.begin(t, "r1", "intake", map[string]string{"name": "Eve"})
	wantRefusal(t, err, session.Refused, CodeRunParamOverridden, "params.name")
	_, err = f.begin(t, "r1", "intak", nil)
	wantRefusal(t, err, session.Invalid, "", "step")
	_, err = f.m.Begin(ctx, session.BeginRequest{RunID: "r1", Step: "intake", Workflow: "clinic"})
	wantRefusal(t, err, session.Invalid, "", "run_id")
	_, err = f.begin(t, "nope", "intake", nil)
	wantRefusal(t, err, session.NotFound, "", "run_id")

	if v := f.step(t, "r1", "intake", nil, sdk.Record{"id": "p-41", "kind": "patient", "name": "Ada"}); v.Outcome != judge.Verified {
		t.Fatalf("intake %s", v.Outcome)
	}
	// intake again: it is VERIFIED in the run.
	_, err = f.begin(t, "r1", "intake", nil)
	wantRefusal(t, err, session.Refused, CodeStepAlreadyBegun, "step")
	// A caller-sent value for the handed-off parameter is forged.
	_, err = f.begin(t, "r1", "posting", map[string]string{"amount": "10", "patient_id": "p-99"})
	wantRefusal(t, err, session.Refused, CodeHandoffForged, "params.patient_id")

	res, err := f.begin(t, "r1", "posting", map[string]string{"amount": "10"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := f.st.Session(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	var md storedMeta
	if err := json.Unmarshal(raw, &md); err != nil {
		t.Fatal(err)
	}
	if md.Params["patient_id"] != "p-41" || md.Run == nil || md.Run.RunID != "r1" || len(md.Run.Handoffs) != 1 || md.Run.Handoffs[0].ValueDigest == "" {
		t.Fatalf("posting's session: params %v run %+v; want the handed-off p-41 bound", md.Params, md.Run)
	}
	f.tab.add(sdk.Record{"id": "t-1", "kind": "posting", "patient_id": "p-41", "amount": json.Number("10")})
	if v, err := f.m.Verify(ctx, res.SessionID); err != nil || v.Outcome != judge.Verified {
		t.Fatalf("posting: %v %v", v, err)
	}

	// mail before the letter is confirmed.
	_, err = f.begin(t, "r1", "mail", nil)
	wantRefusal(t, err, session.Refused, CodeArtifactUnverified, "step")
	if a := f.letter(t, "r1", true); a.Verdict != judge.Confirmed {
		t.Fatalf("letter %s", a.Verdict)
	}
	mail, err := f.begin(t, "r1", "mail", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.tab.add(sdk.Record{"id": "m-1", "kind": "mail", "name": "Ada"})
	v, err := f.m.Verify(ctx, mail.SessionID)
	if err != nil || v.Outcome != judge.Verified {
		t.Fatalf("mail: %v %v", v, err)
	}
	// The consumer's receipt binds the letter's exact digest.
	env, err := receipt.ParseEnvelope(v.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := env.Open(f.pub)
	if err != nil {
		t.Fatal(err)
	}
	var vp receipt.VerdictPayload
	if err := json.Unmarshal(payload, &vp); err != nil || vp.Run == nil || len(vp.Run.Consumed) != 1 || vp.Run.Consumed[0].SHA256 != letterSum {
		t.Fatalf("mail's receipt binds %+v (%v), want the letter's digest", vp.Run, err)
	}

	view, err := f.runs.FinishRun(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if view.Outcome != run.Verified || view.Attempt != 1 || view.State != RunSealed || view.Tier != 1 || view.OracleRung != 2 || len(view.Reasons) != 0 {
		t.Fatalf("FinishRun = %+v", view)
	}
	p := openRunReceipt(t, f, view.Receipt, "r1")
	if p.Outcome != run.Verified || p.Attempt != 1 || len(p.Steps) != 3 || p.RunMinTier != 2 || len(p.Handoffs) != 1 || p.Handoffs[0].Param != "patient_id" ||
		len(p.Artifacts) != 1 || p.Artifacts[0].SHA256 != letterSum || p.Artifacts[0].ReceiptDigest == "" || p.Steps[2].SessionID != mail.SessionID || p.Steps[2].ReceiptDigest == "" {
		t.Fatalf("run receipt payload = %+v", p)
	}
	if strings.Contains(string(payload), "p-41") || strings.Contains(string(p.ParamsDigest), "Ada") {
		t.Fatal("a value leaked into a receipt")
	}
	// Finishing again answers the same seal.
	again, err := f.runs.FinishRun(ctx, "r1")
	if err != nil || again.Attempt != 1 || string(again.Receipt) != string(view.Receipt) {
		t.Fatalf("FinishRun again: attempt %d %v", again.Attempt, err)
	}
	// A sealed run takes no further step.
	_, err = f.begin(t, "r1", "mail", nil)
	wantRefusal(t, err, session.Refused, CodeRunSealed, "run_id")
	list, err := f.runs.ListRuns(ctx)
	if err != nil || len(list) != 1 || list[0].RunID != "r1" || list[0].Outcome != run.Verified || list[0].Steps[2].SessionID != mail.SessionID {
		t.Fatalf("ListRuns = %+v %v", list, err)
	}
	got, err := f.runs.GetRun(ctx, "r1")
	if err != nil || got.Outcome != run.Verified || got.Steps[1].SessionID != res.SessionID || got.Steps[1].Outcome != run.Verified || got.Artifacts[0].Verdict != "CONFIRMED" {
		t.Fatalf("GetRun = %+v %v", got, err)
	}
}

func openRunReceipt(t *testing.T, f *runFixture, raw json.RawMessage, id string) *receipt.RunPayload {
	t.Helper()
	env, err := receipt.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.OpenRun(f.pub, id)
	if err != nil {
		t.Fatalf("the run receipt does not verify offline: %v", err)
	}
	// The ledger holds it where it says.
	var entries []receipt.Entry
	if err := f.st.ExportLedger(t.Context(), 1, func(e receipt.Entry, _ []byte) error { entries = append(entries, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.FindReceipt(entries, env.Payload); err != nil {
		t.Fatalf("the run receipt is not in the ledger: %v", err)
	}
	return p
}

func TestRunDoubleSubmitReconciledAndResealed(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "r2")
	f.step(t, "r2", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	dup := sdk.Record{"id": "t-2", "kind": "posting", "patient_id": "p-1", "amount": "5"}
	v := f.step(t, "r2", "posting", map[string]string{"amount": "5"}, sdk.Record{"id": "t-1", "kind": "posting", "patient_id": "p-1", "amount": "5"}, dup)
	if v.Outcome != judge.ReconciliationRequired {
		t.Fatalf("double submit: %s", v.Outcome)
	}
	view, err := f.runs.FinishRun(ctx, "r2")
	if err != nil {
		t.Fatal(err)
	}
	if view.Outcome != run.ReconciliationRequired || view.Attempt != 1 || !slices.Contains(reasonCodes(view.Reasons), run.CodeStepNotVerified) {
		t.Fatalf("FinishRun after a double submit = %s attempt %d %v", view.Outcome, view.Attempt, reasonCodes(view.Reasons))
	}
	// Nothing changed: finishing again is the same seal.
	if again, err := f.runs.FinishRun(ctx, "r2"); err != nil || again.Attempt != 1 {
		t.Fatalf("FinishRun with nothing changed: attempt %d %v", again.Attempt, err)
	}
	// Repair: remove the duplicate, re-verify posting, finish again.
	f.tab.mu.Lock()
	f.tab.rows = slices.DeleteFunc(f.tab.rows, func(r sdk.Record) bool { return r["id"] == "t-2" })
	f.tab.mu.Unlock()
	if r, err := f.m.Reverify(ctx, view.Steps[1].SessionID, "removed the duplicate posting"); err != nil || r.Outcome != judge.Verified {
		t.Fatalf("Reverify: %v %v", r, err)
	}
	// The run stays RECONCILIATION_REQUIRED (sticky) while mail is not
	// begun: attempt 2.
	view, err = f.runs.FinishRun(ctx, "r2")
	if err != nil {
		t.Fatal(err)
	}
	if view.Outcome != run.ReconciliationRequired || view.Attempt != 2 || !slices.Equal(reasonCodes(view.Reasons), []string{run.CodeStepNotBegun, run.CodeArtifactUnverified, run.CodeReconciliationSticky}) {
		t.Fatalf("re-seal with mail not begun = %s attempt %d %v", view.Outcome, view.Attempt, reasonCodes(view.Reasons))
	}
	// A run sealed RECONCILIATION_REQUIRED goes on: the letter, then mail,
	// then attempt 3 is VERIFIED.
	if a := f.letter(t, "r2", true); a.Verdict != judge.Confirmed {
		t.Fatalf("letter %s", a.Verdict)
	}
	if v := f.step(t, "r2", "mail", nil, sdk.Record{"id": "m-2", "kind": "mail", "name": "Ada"}); v.Outcome != judge.Verified {
		t.Fatalf("mail %s", v.Outcome)
	}
	view, err = f.runs.FinishRun(ctx, "r2")
	if err != nil || view.Outcome != run.Verified || view.Attempt != 3 {
		t.Fatalf("attempt 3: %+v %v", view, err)
	}
	// Sealed VERIFIED, the run takes no further step.
	_, err = f.begin(t, "r2", "intake", nil)
	wantRefusal(t, err, session.Refused, CodeRunSealed, "run_id")
}

// A two-step process (mail dropped) for the re-seal to VERIFIED.
func TestRunResealedVerifiedAttempt2(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	w, err := workflow.Parse([]byte(strings.Split(runWorkflowYAML, "  - step: mail")[0]))
	if err != nil {
		t.Fatal(err)
	}
	f.wfs["clinic"] = w
	ctx := t.Context()
	f.beginRun(t, "r3")
	f.step(t, "r3", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	v := f.step(t, "r3", "posting", map[string]string{"amount": "5"},
		sdk.Record{"id": "t-1", "kind": "posting", "patient_id": "p-1", "amount": "5"}, sdk.Record{"id": "t-2", "kind": "posting", "patient_id": "p-1", "amount": "5"})
	view, err := f.runs.FinishRun(ctx, "r3")
	if err != nil || view.Outcome != run.ReconciliationRequired {
		t.Fatalf("first seal %v %v", view, err)
	}
	first := openRunReceipt(t, f, view.Receipt, "r3")
	f.tab.mu.Lock()
	f.tab.rows = slices.DeleteFunc(f.tab.rows, func(r sdk.Record) bool { return r["id"] == "t-2" })
	f.tab.mu.Unlock()
	if r, err := f.m.Reverify(ctx, v.SessionID, "removed the duplicate"); err != nil || r.Outcome != judge.Verified {
		t.Fatalf("Reverify: %v %v", r, err)
	}
	view, err = f.runs.FinishRun(ctx, "r3")
	if err != nil || view.Outcome != run.Verified || view.Attempt != 2 {
		t.Fatalf("re-seal: %+v %v", view, err)
	}
	second := openRunReceipt(t, f, view.Receipt, "r3")
	if second.Attempt != 2 || second.Outcome != run.Verified || second.Steps[1].ReceiptDigest == first.Steps[1].ReceiptDigest || second.Ledger.Seq <= first.Ledger.Seq {
		t.Fatalf("second receipt %+v after %+v", second, first)
	}
}

func TestRunHaltedAndRolledBack(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	// Nothing saved: intake halted, nothing else began.
	f.beginRun(t, "halt")
	if v := f.step(t, "halt", "intake", nil); v.Outcome != judge.HaltedBeforeEffect {
		t.Fatalf("intake with nothing saved: %s", v.Outcome)
	}
	view, err := f.runs.FinishRun(ctx, "halt")
	if err != nil || view.Outcome != run.HaltedBeforeEffect {
		t.Fatalf("nothing saved: %+v %v", view, err)
	}
	openRunReceipt(t, f, view.Receipt, "halt")

	// Stopped on a policy refusal before anything was done.
	f.beginRun(t, "refused")
	_, err = f.begin(t, "refused", "posting", map[string]string{"amount": "1"})
	wantRefusal(t, err, session.Refused, CodeStepOutOfOrder, "step")
	view, err = f.runs.FinishRun(ctx, "refused")
	if err != nil || view.Outcome != run.RejectedPolicy || !slices.Contains(reasonCodes(view.Reasons), run.CodeStepRefused) {
		t.Fatalf("stopped on a refusal: %+v %v", view, err)
	}
	openRunReceipt(t, f, view.Receipt, "refused")

	// Saved, then undone: the rollback check sees every change gone.
	f.beginRun(t, "undo")
	_, err = f.runs.RollbackCheck(ctx, "undo")
	wantRefusal(t, err, session.Refused, CodeNothingToRollBack, "run_id")
	f.step(t, "undo", "intake", nil, sdk.Record{"id": "p-9", "kind": "patient", "name": "Ada"})
	f.step(t, "undo", "posting", map[string]string{"amount": "3"}, sdk.Record{"id": "t-9", "kind": "posting", "patient_id": "p-9", "amount": "3"})
	rb, err := f.runs.RollbackCheck(ctx, "undo")
	if err != nil {
		t.Fatal(err)
	}
	if rb.RolledBack || len(rb.Remains) != 2 || rb.Remains[0].Step != "intake" || rb.Remains[1].Step != "posting" || rb.Run.State != RunOpen {
		t.Fatalf("rollback check with both records there: %+v", rb)
	}
	f.tab.mu.Lock()
	f.tab.rows = nil
	f.tab.mu.Unlock()
	rb, err = f.runs.RollbackCheck(ctx, "undo")
	if err != nil || !rb.RolledBack || rb.Run.Outcome != run.RolledBackVerified || rb.Run.Attempt != 1 {
		t.Fatalf("rollback check with everything undone: %+v %v", rb, err)
	}
	if p := openRunReceipt(t, f, rb.Run.Receipt, "undo"); p.Kind != "rollback_check" || p.Outcome != run.RolledBackVerified {
		t.Fatalf("rollback receipt %+v", p)
	}
}

func TestRunTier3BlocksVerified(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierReacquiredState, "runmem3")
	w, err := workflow.Parse([]byte(strings.Split(runWorkflowYAML, "  - step: posting")[0]))
	if err != nil {
		t.Fatal(err)
	}
	f.wfs["clinic"] = w
	f.beginRun(t, "t3")
	if v := f.step(t, "t3", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"}); v.Outcome != judge.Verified {
		t.Fatalf("intake %s", v.Outcome)
	}
	view, err := f.runs.FinishRun(t.Context(), "t3")
	if err != nil || view.Outcome != run.ReconciliationRequired || view.Tier != 3 || !slices.Equal(reasonCodes(view.Reasons), []string{run.CodeTierBelowRunMin, run.CodeRungBelowRunMin}) {
		t.Fatalf("a tier-3 step under run_min_tier 2: %+v %v", view, err)
	}
}

// TestRunRungFloor: a step read through a separate session (rung 1)
// keeps a run from VERIFIED under the default run_min_rung 2, whatever its
// tier; a workflow whose policy lowers the floor explicitly gets VERIFIED,
// and its run receipt states the floor applied.
func TestRunRungFloor(t *testing.T) {
	t.Parallel()
	intakeOnly, _, _ := strings.Cut(runWorkflowYAML, "  - step: posting")
	for _, tc := range []struct {
		name    string
		policy  string
		outcome string
		codes   []string
		floor   int
	}{
		{"default floor", "", run.ReconciliationRequired, []string{run.CodeRungBelowRunMin}, 2},
		{"floor lowered to 1", "policy: {run_min_rung: 1}\n", run.Verified, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newRunFixture(t, sdk.TierIndependentSession, "runmemsession")
			w, err := workflow.Parse([]byte(strings.Replace(intakeOnly, "steps:\n", tc.policy+"steps:\n", 1)))
			if err != nil {
				t.Fatal(err)
			}
			f.wfs["clinic"] = w
			f.beginRun(t, "r1")
			if v := f.step(t, "r1", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"}); v.Outcome != judge.Verified {
				t.Fatalf("intake %s", v.Outcome)
			}
			view, err := f.runs.FinishRun(t.Context(), "r1")
			if err != nil || view.Outcome != tc.outcome || view.Tier != 2 || view.OracleRung != int(oracle.SeparateSession) || !slices.Equal(reasonCodes(view.Reasons), tc.codes) {
				t.Fatalf("FinishRun: %s tier %d rung %d %v %v; want %s %v", view.Outcome, view.Tier, view.OracleRung, reasonCodes(view.Reasons), err, tc.outcome, tc.codes)
			}
			if p := openRunReceipt(t, f, view.Receipt, "r1"); p.RunMinRung != tc.floor || p.Outcome != tc.outcome {
				t.Errorf("receipt: run_min_rung %d outcome %s; want %d %s", p.RunMinRung, p.Outcome, tc.floor, tc.outcome)
			}
		})
	}
}

func TestRunHandoffAmbiguousAndArtifactRefuted(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "amb")
	f.step(t, "amb", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"})
	_, err := f.begin(t, "amb", "posting", map[string]string{"amount": "1"})
	if err != nil {
		t.Fatalf("posting after a verified intake: %v", err)
	}
	// A refuted letter makes the run sticky RECONCILIATION_REQUIRED.
	if a := f.letter(t, "amb", false); a.Verdict != judge.Refuted {
		t.Fatalf("missing letter %s", a.Verdict)
	}
	view, err := f.runs.FinishRun(ctx, "amb")
	if err != nil || view.Outcome != run.ReconciliationRequired || !slices.Contains(reasonCodes(view.Reasons), run.CodeArtifactUnverified) {
		t.Fatalf("refuted letter: %+v %v", view, err)
	}

	// handoffValue itself: zero or several records, or a redacted field.
	src := &stepState{Step: run.Step{Outcome: run.Verified}, latest: &session.Result{Effects: []session.EffectResult{{}}}}
	h := workflow.Handoff{Param: "patient_id", From: workflow.HandoffSource{Step: "intake", Field: "id"}}
	for name, recs := range map[string][]judge.Record{
		"none":     nil,
		"several":  {{"id": "a"}, {"id": "b"}},
		"no field": {{"other": "a"}},
		"object":   {{"id": map[string]any{"x": 1}}},
		"redacted": {{"id": judge.RedactedMarker}},
	} {
		src.latest.Effects[0].MatchedRecords = recs
		if v, err := handoffValue(src, h); err == nil {
			t.Errorf("%s: handed off %q", name, v)
		}
	}
	src.latest.Effects[0].MatchedRecords = []judge.Record{{"id": json.Number("42")}}
	if v, err := handoffValue(src, h); err != nil || v != "42" {
		t.Errorf("a number: %q %v", v, err)
	}
}
