package server

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	stdsql "database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/structpb"
	_ "modernc.org/sqlite"

	documenthash "github.com/verifierd/verifierd/adapters/documenthash"
	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/runs"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/workflow"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// clinicWorkflow: intake writes a patient; posting (after intake) takes
// the patient id from intake's record and produces a letter; mail consumes
// the letter.
const clinicWorkflow = `schema: verifierd.workflow/v1
name: clinic
params: {name: {}, patient_id: {}, amount: {}}
steps:
  - step: intake
    risk: irreversible
    effects:
      - {kind: record_written, match: {kind: patient, name: {param: name}}, count_new_only: true, timeout_s: 0.3}
  - step: posting
    after: [intake]
    handoffs: [{param: patient_id, from: {step: intake, effect: 0, field: id}}]
    produces: [{artifact: letter, deployment: docs}]
    effects:
      - {kind: record_written, match: {kind: posting, patient_id: {param: patient_id}, amount: {param: amount}}, count_new_only: true, timeout_s: 0.3}
  - step: mail
    consumes: [{artifact: letter, from_step: posting}]
    effects:
      - {kind: record_written, match: {kind: mail, name: {param: name}}, count_new_only: true, timeout_s: 0.3}
`

// rereadAdapter reads the same SQLite table as the sql adapter, but says
// it re-opens the record on screen (tier 3): a weaker oracle.
type rereadAdapter struct{ db string }

func (rereadAdapter) Info() sdk.Info {
	return sdk.Info{Kind: "reread", Tier: sdk.TierReacquiredState}
}
func (rereadAdapter) Configure(context.Context, sdk.ConfigureRequest) error { return nil }
func (rereadAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true}, nil
}
func (a rereadAdapter) read(ctx context.Context) (sdk.Capture, error) {
	db, err := stdsql.Open("sqlite", a.db)
	if err != nil {
		return sdk.Unreachable("%v", err), nil
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT id, kind, name, patient_id, amount FROM records ORDER BY id")
	if err != nil {
		return sdk.Unreachable("%v", err), nil
	}
	defer rows.Close()
	var recs []sdk.Record
	for rows.Next() {
		var id int64
		var kind, name, pid, amount string
		if err := rows.Scan(&id, &kind, &name, &pid, &amount); err != nil {
			return sdk.Unreachable("%v", err), nil
		}
		recs = append(recs, sdk.Record{"id": json.Number(fmt.Sprint(id)), "kind": kind, "name": name, "patient_id": pid, "amount": amount})
	}
	return sdk.Capture{Reachable: true, Records: sdk.Records(recs...)}, nil
}
func (a rereadAdapter) CaptureBefore(ctx context.Context, _ sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read(ctx)
}
func (a rereadAdapter) CaptureAfter(ctx context.Context, _ sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read(ctx)
}

type runRig struct {
	c    verifierv1.VerifierServiceClient
	db   *stdsql.DB
	docs string
	pub  ed25519.PublicKey
}

// startRunRig serves the API over a real SQLite database (the sql
// adapter), a real folder of documents (document-hash) and the tier-3
// reread adapter, with the clinic workflow registered.
func startRunRig(t *testing.T) *runRig {
	t.Helper()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "clinic.db")
	db, err := stdsql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE records (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL DEFAULT '', patient_id TEXT NOT NULL DEFAULT '', amount TEXT NOT NULL DEFAULT '')`); err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join(dir, "docs")
	if err := os.MkdirAll(docs, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deployments := map[string]string{
		"clinic":  write("clinic.yaml", fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, kind, name, patient_id, amount FROM records ORDER BY id\n", dbPath)),
		"clinic3": write("clinic3.yaml", "effects: {kind: reread, newness: whole_read}\n"),
		"docs":    write("docs.yaml", fmt.Sprintf("effects:\n  kind: document-hash\n  root: %s\n", docs)),
	}
	wf, err := workflow.Load(write("clinic-workflow.yaml", clinicWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host.RegisterInProcess("sql", sqladapter.New)
	host.RegisterInProcess("document-hash", documenthash.New)
	host.RegisterInProcess("reread", func() sdk.Adapter { return rereadAdapter{db: dbPath} })
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(nil)
	m := mustManager(t, session.Options{Host: host, Store: st, Daemon: &config.Daemon{Deployments: deployments}, Signer: signing.New(priv),
		Workflows: map[string]*workflow.Workflow{"clinic": wf}})
	srv, _ := New(m, Options{})
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(); host.Close(); st.Close() })
	return &runRig{c: verifierv1.NewVerifierServiceClient(conn), db: db, docs: docs, pub: pub}
}

func (r *runRig) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := r.db.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}

func (r *runRig) beginRun(t *testing.T, id, deployment string) {
	t.Helper()
	res, err := r.c.BeginRun(t.Context(), &verifierv1.BeginRunRequest{Workflow: "clinic", DeploymentName: deployment, RunId: id,
		Params: map[string]*structpb.Value{"name": structpb.NewStringValue("Ada " + id)}})
	if err != nil || res.GetRunId() != id {
		t.Fatalf("BeginRun %s: %v %v", id, res, err)
	}
}

func (r *runRig) begin(t *testing.T, run, step string, params map[string]string) (*verifierv1.BeginResponse, error) {
	t.Helper()
	ps := map[string]*structpb.Value{}
	for k, v := range params {
		ps[k] = structpb.NewStringValue(v)
	}
	return r.c.Begin(t.Context(), &verifierv1.BeginRequest{RunId: run, Step: step, Params: ps})
}

// step begins a step, runs act (the automation's write), verifies and
// returns the outcome.
func (r *runRig) step(t *testing.T, run, step string, params map[string]string, act func()) (string, verifierv1.Outcome) {
	t.Helper()
	b, err := r.begin(t, run, step, params)
	if err != nil {
		t.Fatalf("Begin %s/%s: %v", run, step, err)
	}
	if act != nil {
		act()
	}
	v, err := r.c.Verify(t.Context(), &verifierv1.VerifyRequest{SessionId: b.GetSessionId()})
	if err != nil {
		t.Fatalf("Verify %s/%s: %v", run, step, err)
	}
	for _, e := range v.GetEffects() {
		if e.GetOracleRung() == 0 && e.GetSubstrate() == "sql" {
			t.Errorf("%s/%s: a sql read shows oracle rung 0", run, step)
		}
	}
	return b.GetSessionId(), v.GetOutcome()
}

// refused asserts a FailedPrecondition whose ErrorInfo carries code.
func refused(t *testing.T, err error, want codes.Code, code string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != want {
		t.Fatalf("status %s %q, want %s (%s)", st.Code(), st.Message(), want, code)
	}
	if code == "" {
		return
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == code {
			return
		}
	}
	t.Fatalf("status %s %q carries no ErrorInfo %s", st.Code(), st.Message(), code)
}

func (r *runRig) letter(t *testing.T, run string) *verifierv1.VerifyArtifactResponse {
	t.Helper()
	body := []byte("Dear Ada, your posting is booked.")
	if err := os.WriteFile(filepath.Join(r.docs, "letter-"+run+".pdf"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	res, err := r.c.VerifyArtifact(t.Context(), &verifierv1.VerifyArtifactRequest{DeploymentName: "docs", RunId: run, RunArtifact: "letter", Step: "posting",
		Artifact: &verifierv1.Artifact{Sha256: hex.EncodeToString(sum[:]), Size: int64(len(body)), Name: "letter-" + run + ".pdf"}})
	if err != nil {
		t.Fatalf("VerifyArtifact: %v", err)
	}
	return res
}

func (r *runRig) finish(t *testing.T, run string) *verifierv1.FinishRunResponse {
	t.Helper()
	res, err := r.c.FinishRun(t.Context(), &verifierv1.FinishRunRequest{RunId: run})
	if err != nil {
		t.Fatalf("FinishRun %s: %v", run, err)
	}
	return res
}

// checkReceipt verifies a run receipt offline, as verifyctl does.
func (r *runRig) checkReceipt(t *testing.T, env *structpb.Struct, run string, attempt int, outcome string) *receipt.RunPayload {
	t.Helper()
	raw, err := env.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	e, err := receipt.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.OpenRun(r.pub, run)
	if err != nil {
		t.Fatalf("run receipt: %v", err)
	}
	if p.Attempt != attempt || p.Outcome != outcome {
		t.Fatalf("run receipt attempt %d %s, want %d %s", p.Attempt, p.Outcome, attempt, outcome)
	}
	if _, err := e.OpenRun(r.pub, run+"-other"); err == nil {
		t.Fatal("the receipt checked as another run's")
	}
	return p
}

func codesOfRun(run *verifierv1.Run) []string {
	var out []string
	for _, r := range run.GetReasons() {
		out = append(out, r.GetCode())
	}
	return out
}

func TestRunsThroughTheAPI(t *testing.T) {
	t.Parallel()
	r := startRunRig(t)
	ctx := t.Context()
	patient := func(run string) func() {
		return func() { r.exec(t, "INSERT INTO records (kind, name) VALUES ('patient', ?)", "Ada "+run) }
	}
	patientID := func(run string) string {
		var id int64
		if err := r.db.QueryRow("SELECT id FROM records WHERE kind = 'patient' AND name = ?", "Ada "+run).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(id)
	}
	posting := func(run string, n int) func() {
		return func() {
			for range n {
				r.exec(t, "INSERT INTO records (kind, patient_id, amount) VALUES ('posting', ?, '10')", patientID(run))
			}
		}
	}
	mail := func(run string) func() {
		return func() { r.exec(t, "INSERT INTO records (kind, name) VALUES ('mail', ?)", "Ada "+run) }
	}

	t.Run("honest run VERIFIED, refusals on the way", func(t *testing.T) {
		r.beginRun(t, "honest", "clinic")
		_, err := r.c.BeginRun(ctx, &verifierv1.BeginRunRequest{Workflow: "clinic", DeploymentName: "clinic", RunId: "honest",
			Params: map[string]*structpb.Value{"name": structpb.NewStringValue("Eve")}})
		refused(t, err, codes.AlreadyExists, "")
		_, err = r.begin(t, "honest", "posting", map[string]string{"amount": "10"})
		refused(t, err, codes.FailedPrecondition, runs.CodeStepOutOfOrder)
		if _, o := r.step(t, "honest", "intake", nil, patient("honest")); o != verifierv1.Outcome_VERIFIED {
			t.Fatalf("intake %s", o)
		}
		_, err = r.begin(t, "honest", "posting", map[string]string{"amount": "10", "patient_id": "999"})
		refused(t, err, codes.FailedPrecondition, runs.CodeHandoffForged)
		if _, o := r.step(t, "honest", "posting", map[string]string{"amount": "10"}, posting("honest", 1)); o != verifierv1.Outcome_VERIFIED {
			t.Fatalf("posting %s", o)
		}
		_, err = r.begin(t, "honest", "mail", nil)
		refused(t, err, codes.FailedPrecondition, runs.CodeArtifactUnverified)
		if a := r.letter(t, "honest"); a.GetVerdict() != verifierv1.Verdict_CONFIRMED || a.GetOracleRung() != 2 {
			t.Fatalf("letter %s rung %d", a.GetVerdict(), a.GetOracleRung())
		}
		if _, o := r.step(t, "honest", "mail", nil, mail("honest")); o != verifierv1.Outcome_VERIFIED {
			t.Fatalf("mail %s", o)
		}
		res := r.finish(t, "honest")
		if run := res.GetRun(); run.GetOutcome() != verifierv1.Outcome_VERIFIED || run.GetState() != verifierv1.RunState_sealed || run.GetAttempt() != 1 ||
			run.GetTier() != 1 || run.GetOracleRung() != 2 || len(run.GetSteps()) != 3 || run.GetArtifacts()[0].GetVerdict() != verifierv1.Verdict_CONFIRMED {
			t.Fatalf("FinishRun = %v", run)
		}
		p := r.checkReceipt(t, res.GetReceipt(), "honest", 1, "VERIFIED")
		if len(p.Handoffs) != 1 || p.Handoffs[0].ValueDigest == "" || p.RunMinTier != 2 {
			t.Fatalf("receipt handoffs %+v run_min_tier %d", p.Handoffs, p.RunMinTier)
		}
		got, err := r.c.GetRun(ctx, &verifierv1.GetRunRequest{RunId: "honest"})
		if err != nil || got.GetRun().GetOutcome() != verifierv1.Outcome_VERIFIED || got.GetReceipt() == nil {
			t.Fatalf("GetRun = %v %v", got, err)
		}
		_, err = r.c.GetRun(ctx, &verifierv1.GetRunRequest{RunId: "nope"})
		refused(t, err, codes.NotFound, "")
		_, err = r.c.GetRun(ctx, &verifierv1.GetRunRequest{RunId: "bad id"})
		refused(t, err, codes.InvalidArgument, "")
	})

	t.Run("double submit, then reconciled and re-sealed attempt 2", func(t *testing.T) {
		r.beginRun(t, "double", "clinic")
		r.step(t, "double", "intake", nil, patient("double"))
		sid, o := r.step(t, "double", "posting", map[string]string{"amount": "10"}, posting("double", 2))
		if o != verifierv1.Outcome_RECONCILIATION_REQUIRED {
			t.Fatalf("double submit %s", o)
		}
		if a := r.letter(t, "double"); a.GetVerdict() != verifierv1.Verdict_CONFIRMED {
			t.Fatal(a.GetVerdict())
		}
		// posting stands RECONCILIATION_REQUIRED: mail, written after it,
		// does not begin (though it does not name posting in after:).
		_, err := r.begin(t, "double", "mail", nil)
		refused(t, err, codes.FailedPrecondition, runs.CodeReconciliationPending)
		res := r.finish(t, "double")
		if res.GetRun().GetOutcome() != verifierv1.Outcome_RECONCILIATION_REQUIRED || !slices.Contains(codesOfRun(res.GetRun()), "step_not_verified") {
			t.Fatalf("first seal %v", res.GetRun())
		}
		r.checkReceipt(t, res.GetReceipt(), "double", 1, "RECONCILIATION_REQUIRED")
		r.exec(t, "DELETE FROM records WHERE id = (SELECT max(id) FROM records WHERE kind = 'posting' AND patient_id = ?)", patientID("double"))
		rv, err := r.c.Reverify(ctx, &verifierv1.ReverifyRequest{SessionId: sid, Reason: "deleted the duplicate posting"})
		if err != nil || rv.GetReverification().GetResult().GetOutcome() != verifierv1.Outcome_VERIFIED || rv.GetReverification().GetOracleRung() != 2 {
			t.Fatalf("Reverify %v %v", rv, err)
		}
		r.step(t, "double", "mail", nil, mail("double"))
		res = r.finish(t, "double")
		if res.GetRun().GetOutcome() != verifierv1.Outcome_VERIFIED || res.GetRun().GetAttempt() != 2 {
			t.Fatalf("re-seal %v", res.GetRun())
		}
		r.checkReceipt(t, res.GetReceipt(), "double", 2, "VERIFIED")
	})

	t.Run("nothing saved: HALTED_BEFORE_EFFECT", func(t *testing.T) {
		r.beginRun(t, "nothing", "clinic")
		if _, o := r.step(t, "nothing", "intake", nil, nil); o != verifierv1.Outcome_HALTED_BEFORE_EFFECT {
			t.Fatalf("intake %s", o)
		}
		res := r.finish(t, "nothing")
		if res.GetRun().GetOutcome() != verifierv1.Outcome_HALTED_BEFORE_EFFECT {
			t.Fatalf("run %v", res.GetRun())
		}
		r.checkReceipt(t, res.GetReceipt(), "nothing", 1, "HALTED_BEFORE_EFFECT")
	})

	t.Run("saves undone: ROLLED_BACK_VERIFIED", func(t *testing.T) {
		r.beginRun(t, "undone", "clinic")
		r.step(t, "undone", "intake", nil, patient("undone"))
		r.step(t, "undone", "posting", map[string]string{"amount": "10"}, posting("undone", 1))
		rb, err := r.c.RollbackCheck(ctx, &verifierv1.RollbackCheckRequest{RunId: "undone"})
		if err != nil || rb.GetRolledBack() || len(rb.GetRemains()) != 2 || rb.GetRun().GetState() != verifierv1.RunState_open || rb.GetReceipt() != nil {
			t.Fatalf("rollback check with the saves there: %v %v", rb, err)
		}
		pid := patientID("undone")
		r.exec(t, "DELETE FROM records WHERE (kind = 'patient' AND name = ?) OR (kind = 'posting' AND patient_id = ?)", "Ada undone", pid)
		rb, err = r.c.RollbackCheck(ctx, &verifierv1.RollbackCheckRequest{RunId: "undone"})
		if err != nil || !rb.GetRolledBack() || rb.GetRun().GetOutcome() != verifierv1.Outcome_ROLLED_BACK_VERIFIED || len(rb.GetRemains()) != 0 {
			t.Fatalf("rollback check with the saves undone: %v %v", rb, err)
		}
		r.checkReceipt(t, rb.GetReceipt(), "undone", 1, "ROLLED_BACK_VERIFIED")
	})

	t.Run("a tier-3 step keeps the run from VERIFIED", func(t *testing.T) {
		r.beginRun(t, "weak", "clinic3")
		if _, o := r.step(t, "weak", "intake", nil, patient("weak")); o != verifierv1.Outcome_VERIFIED {
			t.Fatalf("intake %s", o)
		}
		res := r.finish(t, "weak")
		if res.GetRun().GetOutcome() != verifierv1.Outcome_RECONCILIATION_REQUIRED || res.GetRun().GetTier() != 3 || !slices.Contains(codesOfRun(res.GetRun()), "tier_below_run_min") {
			t.Fatalf("tier-3 run %v", res.GetRun())
		}
	})
}
