package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	"github.com/verifierd/verifierd/receipt"
)

// wsTable creates a write-set table (REPLICA IDENTITY FULL is set by
// verifyctl changes setup) and returns a deployment file reading one
// patient's rows of it through the changes: candidate, and an effects
// file asking for exactly one new Triage row for the patient.
func wsTable(t *testing.T, pg *sqlservers.Postgres, table string) (deployment, effects string) {
	t.Helper()
	if err := pg.Exec(context.Background(), pg.Database, fmt.Sprintf("CREATE TABLE %s (id bigserial PRIMARY KEY, patient_id text NOT NULL, type text, note text)", table)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	deployment = writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sql_driver: postgres
  sql_query: SELECT id, patient_id, type, note FROM %s WHERE patient_id = %%(patient_id)s ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  changes: {source: logical, tables: [%s]}
  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}
  sql_password_env: VERIFIER_DB_PASSWORD
`, table, table, pg.Port, pg.Reader.User, pg.Database))
	effects = writeFile(t, dir, "effects.yaml", "- {kind: record_written, match: {patient_id: {param: patient_id}, type: Triage}, count_new_only: true, timeout_s: 2}\n")
	return deployment, effects
}

// wsInsert saves one Triage row for patient, as the automation would.
// wsDaemon starts a daemon reading table through a changes: deployment
// (wsTable) it registers, and sets up that deployment's slot.
func wsDaemon(t *testing.T, pg *sqlservers.Postgres, table string) (*daemon, *clinicDB, string) {
	t.Helper()
	deployment, effects := wsTable(t, pg, table)
	d := startDaemon(t, daemonOpts{config: "secrets:\n  allow: [VERIFIER_DB_*]\n", env: []string{"VERIFIER_DB_PASSWORD=" + pg.Reader.Password}})
	name := d.register(t, deployment)
	setupSlot(t, pg, name, deployment)
	return d, &clinicDB{deployment: deployment, effects: effects}, name
}

func wsInsert(t *testing.T, pg *sqlservers.Postgres, table, patient string) {
	t.Helper()
	if err := pg.Exec(context.Background(), pg.Database, fmt.Sprintf("INSERT INTO %s (patient_id, type, note) VALUES ('%s', 'Triage', 'x')", table, patient)); err != nil {
		t.Fatal(err)
	}
}

// wsVerified checks that v is VERIFIED on a complete write set, with its
// positions and change count in the signed receipt.
func wsVerified(t *testing.T, d *daemon, v verifyOutput, what string) {
	t.Helper()
	if got := v.summary(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT" {
		t.Errorf("%s: verify = %s, want VERIFIED on the write set\n%.6000s", what, got, d.logs())
	}
	checkWriteSetReceipt(t, v, true)
}

// TestWriteSetHoldSurvivesRestart: a session begun before the daemon
// stopped keeps its log. Begin, stop the daemon, the automation's write,
// start it again; a second session, begun, written and verified after the
// restart, advances the slot as far as the holds allow; the first session
// is still VERIFIED on a complete write set (newness write_set), because
// its hold is in the store, not in the stopped daemon's memory. A session
// begun and verified after that finds nothing of the first's log missing.
func TestWriteSetHoldSurvivesRestart(t *testing.T) {
	pg := startWriteSetPostgres(t)
	d, c, name := wsDaemon(t, pg, "enc_restart")

	first := d.beginNamed(t, c, name, "p-1", "x")
	d.stop()
	wsInsert(t, pg, "enc_restart", "p-1")
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	second := d.beginNamed(t, c, name, "p-2", "x")
	wsInsert(t, pg, "enc_restart", "p-2")
	wsVerified(t, d, d.verify(t, second.SessionID), "the session begun after the restart")
	wsVerified(t, d, d.verify(t, first.SessionID), "the session begun before the restart, verified after a later session's Verify")
}

// TestWriteSetHoldsSharedByReplicas: two replicas on one PostgreSQL store
// share the deployment's slot and its holds. A session begun on A stays
// held while B begins, verifies (and advances the slot) twice; A's session
// is then VERIFIED on a complete write set.
func TestWriteSetHoldsSharedByReplicas(t *testing.T) {
	pg := startWriteSetPostgres(t)
	deployment, effects := wsTable(t, pg, "enc_replicas")
	c := &clinicDB{deployment: deployment, effects: effects}
	ds := replicasWith(t, 2, daemonOpts{config: namedClinic(t, c, "secrets:\n  allow: [VERIFIER_DB_*]\n"), env: []string{"VERIFIER_DB_PASSWORD=" + pg.Reader.Password}})
	a, b := ds[0], ds[1]
	setupSlot(t, pg, "clinic", deployment)

	held := a.beginNamed(t, c, "clinic", "p-1", "x")
	wsInsert(t, pg, "enc_replicas", "p-1")
	for _, patient := range []string{"p-2", "p-3"} {
		s := b.beginNamed(t, c, "clinic", patient, "x")
		wsInsert(t, pg, "enc_replicas", patient)
		wsVerified(t, b, b.verify(t, s.SessionID), "a session of replica B")
	}
	wsVerified(t, a, a.verify(t, held.SessionID), "replica A's session, after B advanced the slot")
}

// TestWriteSetReverifyAfterRelease: a session's Verify releases its log;
// a Reverify after the slot moved on (another session's Verify) cannot
// read the write set since Begin and answers INDETERMINATE
// CHANGES_UNUSABLE, never a read-only VERIFIED, even when the duplicate
// was repaired.
func TestWriteSetReverifyAfterRelease(t *testing.T) {
	pg := startWriteSetPostgres(t)
	d, c, name := wsDaemon(t, pg, "enc_reverify")

	s := d.beginNamed(t, c, name, "p-1", "x")
	wsInsert(t, pg, "enc_reverify", "p-1")
	wsInsert(t, pg, "enc_reverify", "p-1") // a double submit
	if got := d.verify(t, s.SessionID).summary(); got != "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER" {
		t.Fatalf("verify of a double submit = %s", got)
	}
	other := d.beginNamed(t, c, name, "p-2", "x")
	wsInsert(t, pg, "enc_reverify", "p-2")
	wsVerified(t, d, d.verify(t, other.SessionID), "a later session")
	// The duplicate is repaired by hand: the read alone would now show
	// one new row.
	if err := pg.Exec(context.Background(), pg.Database, "DELETE FROM enc_reverify WHERE id = (SELECT max(id) FROM enc_reverify WHERE patient_id = 'p-1')"); err != nil {
		t.Fatal(err)
	}
	out, code := d.ctl(t, "reverify", "--session", s.SessionID, "--reason", "deleted the duplicate by hand")
	if !strings.Contains(out, "CHANGES_UNUSABLE") || !strings.Contains(out, "INDETERMINATE") || strings.Contains(out, `"outcome": "VERIFIED"`) {
		t.Errorf("reverify after the log was released: exit %d %s; want INDETERMINATE CHANGES_UNUSABLE", code, out)
	}
}

// wsWorkflow is a one-step workflow saving a patient's triage.
func wsWorkflow(t *testing.T) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "workflow.yaml", `schema: verifierd.workflow/v1
name: triage
params:
  patient_id: {}
policy:
  subject_params: [patient_id]
steps:
  - step: save
    intent: "save the patient's triage"
    risk: irreversible
    effects:
      - kind: record_written
        match: {patient_id: {param: patient_id}, type: Triage}
        count_new_only: true
        risk: irreversible
        timeout_s: 2
`)
}

// wsRun starts a daemon with the deployment clinic (a changes: candidate)
// and the workflow triage, with the slot set up; it returns the
// deployment file.
func wsRun(t *testing.T, pg *sqlservers.Postgres, table string) (*daemon, string) {
	t.Helper()
	deployment, _ := wsTable(t, pg, table)
	cfg := fmt.Sprintf("deployments:\n  clinic: %s\nworkflows:\n  triage: %s\nsecrets:\n  allow: [VERIFIER_DB_*]\n", deployment, wsWorkflow(t))
	d := startDaemon(t, daemonOpts{config: cfg, env: []string{"VERIFIER_DB_PASSWORD=" + pg.Reader.Password}})
	setupSlot(t, pg, "clinic", deployment)
	return d, deployment
}

// wsRunStep begins a run for patient and its save step, and saves.
func wsRunStep(t *testing.T, d *daemon, pg *sqlservers.Postgres, table, patient string) (run, sid string) {
	t.Helper()
	out, code := d.ctl(t, "run", "begin", "--workflow", "triage", "--deployment-name", "clinic", "--param", "patient_id="+patient)
	if code != 0 {
		t.Fatalf("run begin: exit %d %s\n%.6000s", code, out, d.logs())
	}
	run = mustJSON[struct {
		RunID string `json:"run_id"`
	}](t, out).RunID
	sid = d.mustStep(t, run, "save")
	wsInsert(t, pg, table, patient)
	return run, sid
}

// wsVerifySigned verifies a session, saving its receipt, which must check
// offline against the daemon's key and show the write set.
func wsVerifySigned(t *testing.T, d *daemon, sid string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "receipt.json")
	out, code := d.ctl(t, "verify", "--session", sid, "--receipt-out", file)
	if code != 0 {
		t.Fatalf("verify: exit %d %s", code, out)
	}
	wsVerified(t, d, mustJSON[verifyOutput](t, out), "the run's step")
	key, _ := d.keyFile(t)
	res, code := d.offline(t, "receipt", "verify", "--receipt", file, "--public-key", key)
	var p struct {
		Effects []struct {
			Newness  string `json:"newness"`
			WriteSet *struct {
				From, To string
				Changes  int
				Complete bool
			} `json:"write_set"`
		} `json:"effects"`
	}
	if code != 0 || !res.Valid || json.Unmarshal(res.Payload, &p) != nil || len(p.Effects) != 1 {
		t.Fatalf("receipt verify of the step's receipt: exit %d %+v", code, res)
	}
	if e := p.Effects[0]; e.Newness != "write_set" || e.WriteSet == nil || e.WriteSet.From == "" || e.WriteSet.To == "" || e.WriteSet.Changes != 1 || !e.WriteSet.Complete {
		t.Errorf("the step's receipt, checked offline: newness %q, write_set %+v; want write_set, one change, complete", e.Newness, e.WriteSet)
	}
}

// wsFinishVerified finishes the run, which must be sealed VERIFIED with a
// run receipt that checks offline, binds the step's session and shows its
// effect judged on the write set (newness, positions, count).
func wsFinishVerified(t *testing.T, d *daemon, run, sid string) {
	t.Helper()
	rcpt := filepath.Join(t.TempDir(), "run-receipt.json")
	r, code := d.runCmd(t, "run", "finish", "--run", run, "--receipt-out", rcpt)
	if code != 0 || r.outcome() != "VERIFIED" {
		t.Fatalf("run finish: exit %d %s (%s) %v\n%.6000s", code, r.outcome(), r.stepOutcomes(), r.Reasons, d.logs())
	}
	key, _ := d.keyFile(t)
	res, code := d.offline(t, "receipt", "verify", "--receipt", rcpt, "--public-key", key, "--expect-run", run)
	var p receipt.RunPayload
	if code != 0 || !res.Valid || json.Unmarshal(res.Payload, &p) != nil {
		t.Fatalf("receipt verify --expect-run: exit %d %+v", code, res)
	}
	if p.Outcome != "VERIFIED" || len(p.Steps) != 1 || p.Steps[0].SessionID != sid || !strings.HasPrefix(p.Steps[0].ReceiptDigest, "sha256:") || p.Deployment.Name != "clinic" {
		t.Errorf("run receipt payload: %+v; want VERIFIED, binding session %s's receipt", p, sid)
	}
	if st := p.Steps[0]; len(st.Effects) != 1 || st.Effects[0].Newness != "write_set" || st.Effects[0].WriteSet == nil {
		t.Errorf("run receipt's step effects: %+v; want one, newness write_set, with its write set", st.Effects)
	} else if ws := st.Effects[0].WriteSet; ws.Source != "logical" || ws.From == "" || ws.To == "" || ws.Changes != 1 || !ws.Reachable || !ws.Complete {
		t.Errorf("run receipt's write set: %+v; want logical, positions, one change, complete", ws)
	}
}

// TestWriteSetRun: a run end to end with changes: (BeginRun, Begin,
// Verify, FinishRun through the real daemon): the step's signed receipt
// shows newness write_set with the write set's positions and count, the
// run is sealed VERIFIED and its receipt, checked offline, binds the
// step's. The step stays held after its Verify: another run's step,
// verified in between, does not move the slot past it.
func TestWriteSetRun(t *testing.T) {
	pg := startWriteSetPostgres(t)
	d, _ := wsRun(t, pg, "enc_run")
	run, sid := wsRunStep(t, d, pg, "enc_run", "p-1")
	wsVerifySigned(t, d, sid)
	other, sid2 := wsRunStep(t, d, pg, "enc_run", "p-2")
	wsVerifySigned(t, d, sid2)
	wsFinishVerified(t, d, run, sid)
	wsFinishVerified(t, d, other, sid2)
}

// TestWriteSetRunReleasedLog: once a run's log is released, every later
// proof says CHANGES_UNUSABLE. A rollback check of a run sealed VERIFIED
// (which released its step's hold), after a later Verify moved the slot,
// leaves its effect remaining with CHANGES_UNUSABLE, never undone, though
// the read alone shows the save gone. A run whose log was discarded
// between its step's Verify and its finish (the slot dropped and created
// again) is not sealed VERIFIED: the re-read is INDETERMINATE
// CHANGES_UNUSABLE.
func TestWriteSetRunReleasedLog(t *testing.T) {
	pg := startWriteSetPostgres(t)
	d, deployment := wsRun(t, pg, "enc_runlog")

	sealed, sid := wsRunStep(t, d, pg, "enc_runlog", "p-1")
	wsVerified(t, d, d.verify(t, sid), "the sealed run's step")
	wsFinishVerified(t, d, sealed, sid)
	effects := writeFile(t, t.TempDir(), "effects.yaml", "- {kind: record_written, match: {patient_id: {param: patient_id}, type: Triage}, count_new_only: true, timeout_s: 2}\n")
	later := d.beginNamed(t, &clinicDB{deployment: deployment, effects: effects}, "clinic", "p-2", "x")
	wsInsert(t, pg, "enc_runlog", "p-2")
	wsVerified(t, d, d.verify(t, later.SessionID), "a later session")
	// The run's save is undone; the read alone would show it gone.
	if err := pg.Exec(context.Background(), pg.Database, "DELETE FROM enc_runlog WHERE patient_id = 'p-1'"); err != nil {
		t.Fatal(err)
	}
	out, code := d.ctl(t, "run", "rollback-check", "--run", sealed)
	rb := mustJSON[struct {
		Outcome *string `json:"outcome"`
		Remains []struct {
			SessionID string `json:"session_id"`
			Reasons   []struct {
				Code string `json:"code"`
			} `json:"reasons"`
		} `json:"remains"`
	}](t, out)
	if code != 4 || rb.Outcome == nil || *rb.Outcome != "VERIFIED" || len(rb.Remains) != 1 || rb.Remains[0].SessionID != sid ||
		len(rb.Remains[0].Reasons) == 0 || rb.Remains[0].Reasons[0].Code != "CHANGES_UNUSABLE" {
		t.Errorf("rollback check after the log was released: exit %d %s; want exit 4, the run left VERIFIED, its effect remaining with CHANGES_UNUSABLE", code, out)
	}

	discarded, sid2 := wsRunStep(t, d, pg, "enc_runlog", "p-3")
	wsVerified(t, d, d.verify(t, sid2), "the discarded run's step")
	env := []string{"VERIFIER_DB_PASSWORD=" + pg.Reader.Password, "PG_ADMIN_PASSWORD=" + pg.Admin.Password}
	args := []string{"--deployment-name", "clinic", "--deployment", deployment, "--user", pg.Admin.User, "--password-env", "PG_ADMIN_PASSWORD"}
	for _, cmd := range []string{"drop", "setup"} {
		if out, code := verifyctl(t, env, append([]string{"changes", cmd}, args...)...); code != 0 {
			t.Fatalf("changes %s: exit %d %s", cmd, code, out)
		}
	}
	r, code := d.runCmd(t, "run", "finish", "--run", discarded)
	if code != 4 || r.outcome() != "RECONCILIATION_REQUIRED" || len(r.Reasons) != 1 || r.Reasons[0].Code != "verified_step_changed" ||
		!strings.Contains(r.Reasons[0].Message, "reads indeterminate (CHANGES_UNUSABLE)") {
		t.Errorf("finish of a run whose log was discarded: exit %d %s %+v; want exit 4, RECONCILIATION_REQUIRED, verified_step_changed naming CHANGES_UNUSABLE", code, r.outcome(), r.Reasons)
	}
}

// TestDemoWriteSetWalkthrough runs scripts/demo-writeset.sh, the README
// walk-through with changes: on PostgreSQL, against a test PostgreSQL: the
// save is VERIFIED with newness write_set in the signed receipt, which
// checks offline, and the double submit is caught.
func TestDemoWriteSetWalkthrough(t *testing.T) {
	pg := startWriteSetPostgres(t)
	_, port, _ := strings.Cut(freeAddr(t), ":")
	cmd := exec.Command("bash", "../scripts/demo-writeset.sh")
	cmd.Env = append(os.Environ(), "DEMO_BIN="+bins.dir, "DEMO_PORT="+port,
		"DEMO_PG_HOST=127.0.0.1", fmt.Sprintf("DEMO_PG_PORT=%d", pg.Port), "DEMO_PG_DATABASE="+pg.Database,
		"DEMO_PG_USER="+pg.Reader.User, "DEMO_PG_PASSWORD="+pg.Reader.Password,
		"DEMO_PG_ADMIN="+pg.Admin.User, "DEMO_PG_ADMIN_PASSWORD="+pg.Admin.Password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo-writeset.sh: %v\n%s", err, out)
	}
	for _, want := range []string{
		"outcome: VERIFIED, receipt valid: True",
		"signed receipt: newness: write_set, write_set: {'changes': 1, 'complete': True, 'from': '0/",
		"'reachable': True, 'source': 'logical', 'to': '0/",
		"outcome: RECONCILIATION_REQUIRED, record_written: conflicting COUNT_OVER, newness: write_set",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walk-through's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), pg.Reader.Password) || strings.Contains(string(out), pg.Admin.Password) {
		t.Error("a password is in the walk-through's output")
	}
}
