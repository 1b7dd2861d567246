package e2e

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/verifierd/verifierd/receipt"
)

// runSoR is the system of record of the run tests: one real SQLite table
// that every step writes to (column kind tells intake, posting, letter and
// dispatch records apart), and the folder the letters land in, read by a
// document-hash deployment.
type runSoR struct {
	path    string
	db      *sql.DB
	letters string
	// deployment, tier3 and lettersDep are the deployment files.
	deployment, tier3, lettersDep string
}

func newRunSoR(t *testing.T) *runSoR {
	t.Helper()
	dir := t.TempDir()
	s := &runSoR{path: filepath.Join(dir, "claims.db"), letters: filepath.Join(dir, "letters")}
	if err := os.Mkdir(s.letters, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", s.path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
		patient_id TEXT NOT NULL, intake_id INTEGER, note TEXT)`); err != nil {
		t.Fatal(err)
	}
	s.db = db
	s.deployment = writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, kind, patient_id, intake_id, note FROM records WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  census: {sql_query: SELECT id FROM records}
`, s.path))
	// The same table through a reading mechanism of tier 3: the whole
	// table, which the operator declares (a plugin's read is never proven
	// whole), so newness needs no census.
	s.tier3 = writeFile(t, dir, "deployment-tier3.yaml", fmt.Sprintf(`effects:
  kind: tier3-sql
  sqlite_database: %s
  sql_query: SELECT id, kind, patient_id, intake_id, note FROM records ORDER BY id
  newness: whole_read
`, s.path))
	s.lettersDep = writeFile(t, dir, "letters.yaml", fmt.Sprintf("effects:\n  kind: document-hash\n  root: %s\n  glob: \"letter-*.txt\"\n", s.letters))
	return s
}

// config is the daemon config registering the deployments and the claims
// workflow, with extra appended.
func (s *runSoR) config(extra string) string {
	wf, _ := filepath.Abs("testdata/runs/workflow.yaml")
	return fmt.Sprintf("deployments:\n  ledger: %s\n  ledger-tier3: %s\n  letters: %s\nworkflows:\n  claims: %s\n%s",
		s.deployment, s.tier3, s.lettersDep, wf, extra)
}

// insert writes a record as the automation's action would, and returns its id.
func (s *runSoR) insert(t *testing.T, kind, patient string, intakeID int64, note string) int64 {
	t.Helper()
	var ref any
	if intakeID != 0 {
		ref = intakeID
	}
	res, err := s.db.Exec(`INSERT INTO records (kind, patient_id, intake_id, note) VALUES (?, ?, ?, ?)`, kind, patient, ref, note)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (s *runSoR) remove(t *testing.T, id int64) {
	t.Helper()
	if _, err := s.db.Exec(`DELETE FROM records WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
}

// writeLetter leaves the letter document in the store and returns its path.
func (s *runSoR) writeLetter(t *testing.T, patient string) string {
	t.Helper()
	return writeFile(t, s.letters, "letter-"+patient+".txt", "Dear patient "+patient+", your claim is booked.\n")
}

// runOutput is what verifyctl run finish, run show and run rollback-check
// print.
type runOutput struct {
	RunID      string  `json:"run_id"`
	Workflow   string  `json:"workflow"`
	Deployment string  `json:"deployment_name"`
	State      string  `json:"state"`
	Outcome    *string `json:"outcome"`
	Attempt    int     `json:"attempt"`
	Tier       int     `json:"tier"`
	Steps      []struct {
		Step          string  `json:"step"`
		Consequential bool    `json:"consequential"`
		SessionID     *string `json:"session_id"`
		Outcome       *string `json:"outcome"`
		Tier          int     `json:"tier"`
		ReceiptDigest *string `json:"receipt_digest"`
	} `json:"steps"`
	Artifacts []struct {
		Artifact string  `json:"artifact"`
		FromStep string  `json:"from_step"`
		Verdict  *string `json:"verdict"`
		SHA256   *string `json:"sha256"`
		Size     int64   `json:"size"`
	} `json:"artifacts"`
	Reasons []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"reasons"`
	Receipt    json.RawMessage `json:"receipt"`
	RolledBack *bool           `json:"rolled_back"`
	Remains    []struct {
		Step      string `json:"step"`
		SessionID string `json:"session_id"`
	} `json:"remains"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
	} `json:"error"`
}

func (r runOutput) outcome() string {
	if r.Outcome == nil {
		return "<none>"
	}
	return *r.Outcome
}

// stepOutcomes is each step's outcome, "-" for none: "intake=VERIFIED posting=-".
func (r runOutput) stepOutcomes() string {
	var parts []string
	for _, s := range r.Steps {
		o := "-"
		if s.Outcome != nil {
			o = *s.Outcome
		}
		parts = append(parts, s.Step+"="+o)
	}
	return strings.Join(parts, " ")
}

func (r runOutput) reasonCodes() []string {
	var codes []string
	for _, x := range r.Reasons {
		codes = append(codes, x.Code)
	}
	return codes
}

// runBegin opens a run of the claims workflow on the deployment and
// returns its id.
func (d *daemon) runBegin(t *testing.T, deployment, patient string, extra ...string) string {
	t.Helper()
	out, code := d.ctl(t, append([]string{"run", "begin", "--workflow", "claims", "--deployment-name", deployment, "--param", "patient_id=" + patient}, extra...)...)
	if code != 0 {
		t.Fatalf("run begin exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
	}
	id := mustJSON[struct {
		RunID string `json:"run_id"`
	}](t, out).RunID
	if id == "" {
		t.Fatalf("run begin printed no run_id: %s", out)
	}
	return id
}

// stepBegin begins a step of the run and returns begin's output and exit code.
func (d *daemon) stepBegin(t *testing.T, run, step string, params ...string) (beginOutput, string, int) {
	t.Helper()
	args := []string{"begin", "--run", run, "--step", step}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	out, code := d.ctl(t, args...)
	return mustJSON[beginOutput](t, out), out, code
}

// mustStep begins a step that must be begun.
func (d *daemon) mustStep(t *testing.T, run, step string, params ...string) string {
	t.Helper()
	b, out, code := d.stepBegin(t, run, step, params...)
	if code != 0 || b.SessionID == "" {
		t.Fatalf("begin --run %s --step %s: exit %d: %s\ndaemon log:\n%.6000s", run, step, code, out, d.logs())
	}
	return b.SessionID
}

// verifyStep verifies a session and checks its outcome.
func (d *daemon) verifyStep(t *testing.T, session, want string) verifyOutput {
	t.Helper()
	v := d.verify(t, session)
	if v.Outcome != want {
		t.Fatalf("verify %s = %s, want %s", session, v.summary(), want)
	}
	return v
}

// runCmd runs one of the run commands and decodes its output.
func (d *daemon) runCmd(t *testing.T, args ...string) (runOutput, int) {
	t.Helper()
	out, code := d.ctl(t, args...)
	return mustJSON[runOutput](t, out), code
}

// artifactVerify checks the letter file in the run.
func (d *daemon) artifactVerify(t *testing.T, run, file string) string {
	t.Helper()
	out, code := d.ctl(t, "artifact", "verify", "--deployment-name", "letters", "--file", file, "--run", run, "--artifact", "letter", "--step", "letter")
	if code != 0 {
		t.Fatalf("artifact verify exit %d: %s", code, out)
	}
	return mustJSON[struct {
		Verdict string `json:"verdict"`
	}](t, out).Verdict
}

// honestRun drives the four steps of the claims workflow for patient in
// the run, as an honest automation does, checking the refusals on the way
// when checks is set: posting before intake (step_out_of_order), a posting
// whose intake_id the caller made up (the handoff), and send before the
// letter's bytes are confirmed (artifact_unverified). It returns the
// intake and posting record ids.
func (d *daemon) honestRun(t *testing.T, s *runSoR, run, patient string, checks bool) (int64, int64) {
	t.Helper()
	if checks {
		b, out, code := d.stepBegin(t, run, "posting", "note=Booked")
		if code != exitRefusedCode || b.SessionID != "" || !strings.Contains(out, "step_out_of_order") {
			t.Errorf("posting before intake: exit %d %s; want exit 3, step_out_of_order", code, out)
		}
	}
	sid := d.mustStep(t, run, "intake")
	intake := s.insert(t, "intake", patient, 0, "")
	d.verifyStep(t, sid, "VERIFIED")

	if checks {
		// The record id reaches posting only through the handoff: a value
		// the caller sends for it is refused, whatever it is.
		for _, forged := range []string{"999", fmt.Sprint(intake)} {
			b, out, code := d.stepBegin(t, run, "posting", "note=Booked", "intake_id="+forged)
			if code == 0 || b.SessionID != "" || !strings.Contains(out, "intake_id") {
				t.Errorf("posting with a caller-sent intake_id=%s: exit %d %s; want a refusal naming intake_id", forged, code, out)
			}
		}
		// Nor may a step override a run parameter.
		b, out, code := d.stepBegin(t, run, "posting", "note=Booked", "patient_id=someone-else")
		if code == 0 || b.SessionID != "" || !strings.Contains(out, "patient_id") {
			t.Errorf("posting overriding the run's patient_id: exit %d %s; want a refusal naming patient_id", code, out)
		}
	}
	sid = d.mustStep(t, run, "posting", "note=Booked")
	posting := s.insert(t, "posting", patient, intake, "Booked")
	d.verifyStep(t, sid, "VERIFIED")

	sid = d.mustStep(t, run, "letter")
	s.insert(t, "letter", patient, 0, "")
	letter := s.writeLetter(t, patient)
	d.verifyStep(t, sid, "VERIFIED")

	if checks {
		b, out, code := d.stepBegin(t, run, "send")
		if code != exitRefusedCode || b.SessionID != "" || !strings.Contains(out, "artifact_unverified") {
			t.Errorf("send before the letter was confirmed: exit %d %s; want exit 3, artifact_unverified", code, out)
		}
	}
	if v := d.artifactVerify(t, run, letter); v != "CONFIRMED" {
		t.Fatalf("artifact verify of the letter = %s, want CONFIRMED", v)
	}
	sid = d.mustStep(t, run, "send")
	s.insert(t, "dispatch", patient, 0, "")
	d.verifyStep(t, sid, "VERIFIED")
	return intake, posting
}

// exitRefusedCode is verifyctl's exit for a refused Begin (do not actuate).
const exitRefusedCode = 3

// finishVerified finishes the run, which must be VERIFIED at attempt, and
// checks its receipt offline against the daemon's key and the run.
func (d *daemon) finishVerified(t *testing.T, run string, attempt int) runOutput {
	t.Helper()
	rcpt := filepath.Join(t.TempDir(), "run-receipt.json")
	r, code := d.runCmd(t, "run", "finish", "--run", run, "--receipt-out", rcpt)
	if code != 0 || r.outcome() != "VERIFIED" || r.Attempt != attempt || r.State != "sealed" || len(r.Reasons) != 0 {
		t.Fatalf("run finish: exit %d, %s attempt %d (%s) reasons %v; want exit 0, VERIFIED attempt %d\ndaemon log:\n%.6000s",
			code, r.outcome(), r.Attempt, r.stepOutcomes(), r.Reasons, attempt, d.logs())
	}
	key, _ := d.keyFile(t)
	res, code := d.offline(t, "receipt", "verify", "--receipt", rcpt, "--public-key", key, "--expect-run", run)
	if code != 0 || !res.Valid {
		t.Fatalf("receipt verify --expect-run %s: exit %d %+v", run, code, res)
	}
	var p receipt.RunPayload
	if err := json.Unmarshal(res.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.RunID != run || p.Outcome != "VERIFIED" || p.Attempt != attempt || p.Workflow.Name != "claims" || !strings.HasPrefix(p.Workflow.Digest, "sha256:") {
		t.Errorf("run receipt payload: %+v", p)
	}
	if res, code := d.offline(t, "receipt", "verify", "--receipt", rcpt, "--public-key", key, "--expect-run", run+"-other"); code != 1 || res.Valid {
		t.Errorf("receipt verify --expect-run of another run: exit %d %+v; want exit 1", code, res)
	}
	// The receipt is in the daemon's hash-chained ledger, which ends at a
	// checkpoint the same key signed.
	file, _ := d.export(t)
	if res, code := d.offline(t, "ledger", "verify", "--file", file, "--public-key", key, "--receipt", rcpt); code != 0 || !res.Valid || !res.SignedHeadVerified {
		t.Errorf("ledger verify --receipt of the run receipt: exit %d %+v", code, res)
	}
	return r
}

// runEntries counts the ledger entries of each type recorded under the
// run's id, and the run_step_bound entries of its steps' sessions (a step
// is bound to the run under its session's id).
func (d *daemon) runEntries(t *testing.T, r runOutput) map[string]int {
	t.Helper()
	sessions := map[string]bool{}
	for _, s := range r.Steps {
		if s.SessionID != nil {
			sessions[*s.SessionID] = true
		}
	}
	_, lines := d.export(t)
	n := map[string]int{}
	for _, l := range lines {
		var e receipt.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e.Session == r.RunID || (e.Type == "run_step_bound" && sessions[e.Session]) {
			n[e.Type]++
		}
	}
	return n
}

// TestRunClaims drives the claims workflow through the real daemon and a
// real SQLite system of record, on the embedded store and on PostgreSQL.
func TestRunClaims(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) {
		s := newRunSoR(t)
		checkRunClaims(t, s, startDaemon(t, daemonOpts{pluginDir: bins.pluginDir, config: s.config("")}))
	})
	t.Run("postgres", func(t *testing.T) {
		s := newRunSoR(t)
		dsn, env := storeDatabase(t)
		checkRunClaims(t, s, startDaemon(t, daemonOpts{pluginDir: bins.pluginDir, config: s.config(""), env: env,
			args: []string{"--store", dsn, "--store-password-env", storePasswordEnv}}))
	})
}

func checkRunClaims(t *testing.T, s *runSoR, d *daemon) {
	t.Run("honest run VERIFIED", func(t *testing.T) {
		run := d.runBegin(t, "ledger", "p-honest")
		intake, _ := d.honestRun(t, s, run, "p-honest", true)
		r := d.finishVerified(t, run, 1)
		if got := r.stepOutcomes(); got != "intake=VERIFIED posting=VERIFIED letter=VERIFIED send=VERIFIED" {
			t.Errorf("steps: %s", got)
		}
		if r.Tier != 1 || len(r.Artifacts) != 1 || r.Artifacts[0].Verdict == nil || *r.Artifacts[0].Verdict != "CONFIRMED" || r.Artifacts[0].SHA256 == nil {
			t.Errorf("tier %d, artifacts %+v; want tier 1 and the letter CONFIRMED with its digest", r.Tier, r.Artifacts)
		}
		sum := sha256.Sum256([]byte("Dear patient p-honest, your claim is booked.\n"))
		if a := r.Artifacts[0]; a.SHA256 != nil && *a.SHA256 != hex.EncodeToString(sum[:]) && *a.SHA256 != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Errorf("the letter's digest in the run is %s, want the file's %x", *a.SHA256, sum)
		}
		// The receipt binds the handoff by a keyed digest, never the value.
		var p receipt.RunPayload
		env, err := receipt.ParseEnvelope(r.Receipt)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Handoffs) != 1 || p.Handoffs[0].Param != "intake_id" || p.Handoffs[0].FromStep != "intake" || p.Handoffs[0].ValueDigest == "" {
			t.Errorf("handoffs in the receipt: %+v", p.Handoffs)
		}
		if strings.Contains(string(env.Payload), fmt.Sprintf(`"%d"`, intake)) || strings.Contains(string(env.Payload), "p-honest") {
			t.Errorf("the run receipt carries a value: %s", env.Payload)
		}
		if len(p.Steps) != 4 || p.Steps[1].SessionID == "" || !strings.HasPrefix(p.Steps[1].ReceiptDigest, "sha256:") {
			t.Errorf("steps in the receipt: %+v", p.Steps)
		}
		// The consumer's own receipt binds the run, its step and the exact
		// letter it was let in on; posting's binds the handoff by digest.
		if len(r.Steps) == 4 && r.Steps[3].SessionID != nil && r.Steps[1].SessionID != nil {
			for i, want := range map[int]string{1: "posting", 3: "send"} {
				f := filepath.Join(t.TempDir(), want+".json")
				if out, code := d.ctl(t, "verify", "--session", *r.Steps[i].SessionID, "--receipt-out", f); code != 0 {
					t.Fatalf("verify %s again: exit %d %s", want, code, out)
				}
				vp, raw := decodePayload(t, f)
				bound, _ := vp["run"].(map[string]any)
				if bound["run_id"] != run || bound["step"] != want {
					t.Errorf("the %s receipt binds run %v, want run %s step %s", want, vp["run"], run, want)
				}
				switch want {
				case "send":
					consumed, _ := bound["consumed"].([]any)
					c, _ := firstOf(consumed).(map[string]any)
					if len(consumed) != 1 || c["artifact"] != "letter" || c["sha256"] != *r.Artifacts[0].SHA256 {
						t.Errorf("the send receipt binds consumed %v, want the letter at %s", bound["consumed"], *r.Artifacts[0].SHA256)
					}
				case "posting":
					handoffs, _ := bound["handoffs"].([]any)
					h, _ := firstOf(handoffs).(map[string]any)
					if len(handoffs) != 1 || h["param"] != "intake_id" || !strings.HasPrefix(fmt.Sprint(h["value_digest"]), "hmac-sha256:") {
						t.Errorf("the posting receipt binds handoffs %v", bound["handoffs"])
					}
					if strings.Contains(string(raw), fmt.Sprintf(`"intake_id":"%d"`, intake)) {
						t.Errorf("the posting receipt carries the handed-off value")
					}
				}
			}
		}
		// The ledger holds the run's beginning, each step bound to it, the
		// letter's check, the five refused Begins (posting before intake,
		// two forged handoffs, an overridden run parameter, send before its
		// letter) and the seal with its receipt.
		if n := d.runEntries(t, r); n["run_begun"] != 1 || n["run_step_bound"] != 4 || n["run_artifact"] != 1 || n["run_sealed"] != 1 || n["run_step_refused"] != 5 || n["receipt"] != 1 {
			t.Errorf("ledger entries of the run: %v; want run_begun 1, run_step_bound 4, run_artifact 1, run_step_refused 5, run_sealed 1, receipt 1", n)
		}
		// A sealed VERIFIED run takes no more steps, and finishing it again
		// answers the same seal.
		if b, out, code := d.stepBegin(t, run, "intake"); code == 0 || b.SessionID != "" {
			t.Errorf("a step of a sealed run: exit %d %s; want a refusal", code, out)
		}
		if again, code := d.runCmd(t, "run", "show", "--run", run); code != 0 || again.outcome() != "VERIFIED" || again.Attempt != 1 {
			t.Errorf("run show: exit %d %s attempt %d", code, again.outcome(), again.Attempt)
		}
	})

	t.Run("double submit then repaired", func(t *testing.T) {
		run := d.runBegin(t, "ledger", "p-double")
		sid := d.mustStep(t, run, "intake")
		intake := s.insert(t, "intake", "p-double", 0, "")
		d.verifyStep(t, sid, "VERIFIED")
		posting := d.mustStep(t, run, "posting", "note=Booked")
		s.insert(t, "posting", "p-double", intake, "Booked")
		dup := s.insert(t, "posting", "p-double", intake, "Booked") // the double submit
		d.verifyStep(t, posting, "RECONCILIATION_REQUIRED")
		// The letter comes after a VERIFIED posting: not now.
		if b, out, code := d.stepBegin(t, run, "letter"); code != exitRefusedCode || b.SessionID != "" || !strings.Contains(out, "step_out_of_order") {
			t.Errorf("letter after a posting needing reconciliation: exit %d %s; want step_out_of_order", code, out)
		}

		r, code := d.runCmd(t, "run", "finish", "--run", run)
		if code != 4 || r.outcome() != "RECONCILIATION_REQUIRED" || r.Attempt != 1 || !slices.Contains(r.reasonCodes(), "step_not_verified") {
			t.Fatalf("finish with posting double-submitted: exit %d %s attempt %d reasons %v; want exit 4, RECONCILIATION_REQUIRED attempt 1", code, r.outcome(), r.Attempt, r.Reasons)
		}
		if got := r.stepOutcomes(); got != "intake=VERIFIED posting=RECONCILIATION_REQUIRED letter=- send=-" {
			t.Errorf("steps: %s", got)
		}
		// Sticky: finishing again without a repair changes nothing.
		if again, code := d.runCmd(t, "run", "finish", "--run", run); code != 4 || again.outcome() != "RECONCILIATION_REQUIRED" || again.Attempt != 1 {
			t.Errorf("finish again unrepaired: exit %d %s attempt %d; want the same seal", code, again.outcome(), again.Attempt)
		}
		// A person removes the duplicate and re-verifies the step; the run,
		// sealed RECONCILIATION_REQUIRED, goes on with its other steps.
		s.remove(t, dup)
		out, code := d.ctl(t, "reverify", "--session", posting, "--reason", "removed the duplicate posting")
		if code != 0 || !strings.Contains(out, `"outcome": "VERIFIED"`) {
			t.Fatalf("reverify: exit %d %s", code, out)
		}
		sid = d.mustStep(t, run, "letter")
		s.insert(t, "letter", "p-double", 0, "")
		letter := s.writeLetter(t, "p-double")
		d.verifyStep(t, sid, "VERIFIED")
		if v := d.artifactVerify(t, run, letter); v != "CONFIRMED" {
			t.Fatalf("letter %s", v)
		}
		sid = d.mustStep(t, run, "send")
		s.insert(t, "dispatch", "p-double", 0, "")
		d.verifyStep(t, sid, "VERIFIED")
		r = d.finishVerified(t, run, 2)
		if got := r.stepOutcomes(); got != "intake=VERIFIED posting=VERIFIED letter=VERIFIED send=VERIFIED" {
			t.Errorf("steps after the repair: %s", got)
		}
	})

	t.Run("letter not as written RECONCILIATION_REQUIRED", func(t *testing.T) {
		run := d.runBegin(t, "ledger", "p-badletter")
		sid := d.mustStep(t, run, "intake")
		intake := s.insert(t, "intake", "p-badletter", 0, "")
		d.verifyStep(t, sid, "VERIFIED")
		sid = d.mustStep(t, run, "posting", "note=Booked")
		s.insert(t, "posting", "p-badletter", intake, "Booked")
		d.verifyStep(t, sid, "VERIFIED")
		sid = d.mustStep(t, run, "letter")
		s.insert(t, "letter", "p-badletter", 0, "")
		s.writeLetter(t, "p-badletter")
		d.verifyStep(t, sid, "VERIFIED")
		// The automation's copy of the letter is not what the store holds.
		other := writeFile(t, t.TempDir(), "letter-p-badletter.txt", "Dear patient, a letter nobody sent.\n")
		out, code := d.ctl(t, "artifact", "verify", "--deployment-name", "letters", "--file", other, "--run", run, "--artifact", "letter", "--step", "letter")
		if code != 0 || strings.Contains(out, `"verdict": "CONFIRMED"`) {
			t.Fatalf("artifact verify of other bytes: exit %d %s; want a verdict other than CONFIRMED", code, out)
		}
		if b, out, code := d.stepBegin(t, run, "send"); code != exitRefusedCode || b.SessionID != "" || !strings.Contains(out, "artifact_unverified") {
			t.Errorf("send after the letter failed its check: exit %d %s; want artifact_unverified", code, out)
		}
		r, code := d.runCmd(t, "run", "finish", "--run", run)
		if code != 4 || r.outcome() != "RECONCILIATION_REQUIRED" || !slices.Contains(r.reasonCodes(), "artifact_unverified") {
			t.Fatalf("finish: exit %d %s %v; want exit 4, RECONCILIATION_REQUIRED with artifact_unverified", code, r.outcome(), r.Reasons)
		}
	})

	t.Run("nothing saved HALTED_BEFORE_EFFECT", func(t *testing.T) {
		run := d.runBegin(t, "ledger", "p-idle")
		sid := d.mustStep(t, run, "intake")
		d.verifyStep(t, sid, "HALTED_BEFORE_EFFECT")
		r, code := d.runCmd(t, "run", "finish", "--run", run)
		if code != 4 || r.outcome() != "HALTED_BEFORE_EFFECT" {
			t.Fatalf("finish: exit %d %s %v; want exit 4, HALTED_BEFORE_EFFECT", code, r.outcome(), r.Reasons)
		}
	})

	t.Run("stopped on a refusal REJECTED_POLICY", func(t *testing.T) {
		run := d.runBegin(t, "ledger", "p-refused")
		if b, out, code := d.stepBegin(t, run, "posting", "note=Booked"); code != exitRefusedCode || b.SessionID != "" {
			t.Fatalf("posting first: exit %d %s; want a refusal", code, out)
		}
		r, code := d.runCmd(t, "run", "finish", "--run", run)
		if code != 4 || r.outcome() != "REJECTED_POLICY" || !slices.Contains(r.reasonCodes(), "step_refused") {
			t.Fatalf("finish: exit %d %s %v; want exit 4, REJECTED_POLICY with step_refused", code, r.outcome(), r.Reasons)
		}
	})

	t.Run("saves undone ROLLED_BACK_VERIFIED", func(t *testing.T) {
		run := d.runBegin(t, "ledger", "p-undone")
		sid := d.mustStep(t, run, "intake")
		intake := s.insert(t, "intake", "p-undone", 0, "")
		d.verifyStep(t, sid, "VERIFIED")
		sid = d.mustStep(t, run, "posting", "note=Booked")
		posting := s.insert(t, "posting", "p-undone", intake, "Booked")
		d.verifyStep(t, sid, "VERIFIED")

		// Both saves are still there: the check lists them and the run is
		// unchanged.
		r, code := d.runCmd(t, "run", "rollback-check", "--run", run)
		if code != 4 || r.RolledBack == nil || *r.RolledBack || len(r.Remains) == 0 {
			t.Fatalf("rollback-check with the saves in place: exit %d rolled_back %v remains %v; want exit 4 listing them", code, r.RolledBack, r.Remains)
		}
		steps := map[string]bool{}
		for _, rm := range r.Remains {
			steps[rm.Step] = true
		}
		if !steps["intake"] || !steps["posting"] {
			t.Errorf("remains name steps %v, want intake and posting", steps)
		}
		if show, _ := d.runCmd(t, "run", "show", "--run", run); show.State != "open" || show.Outcome != nil {
			t.Errorf("after a failed rollback check the run is %s %s, want it open and unsealed", show.State, show.outcome())
		}
		// Undo one: still not rolled back.
		s.remove(t, posting)
		if r, code = d.runCmd(t, "run", "rollback-check", "--run", run); code != 4 || len(r.Remains) != 1 || r.Remains[0].Step != "intake" {
			t.Fatalf("rollback-check with intake in place: exit %d remains %v", code, r.Remains)
		}
		s.remove(t, intake)
		rcpt := filepath.Join(t.TempDir(), "rollback.json")
		r, code = d.runCmd(t, "run", "rollback-check", "--run", run, "--receipt-out", rcpt)
		if code != 0 || r.RolledBack == nil || !*r.RolledBack || r.outcome() != "ROLLED_BACK_VERIFIED" || r.State != "sealed" || len(r.Remains) != 0 {
			t.Fatalf("rollback-check after undoing both: exit %d %s %v; want exit 0, ROLLED_BACK_VERIFIED", code, r.outcome(), r.Remains)
		}
		key, _ := d.keyFile(t)
		res, code := d.offline(t, "receipt", "verify", "--receipt", rcpt, "--public-key", key, "--expect-run", run)
		var p receipt.RunPayload
		if code != 0 || !res.Valid || json.Unmarshal(res.Payload, &p) != nil || p.Outcome != "ROLLED_BACK_VERIFIED" || p.RunID != run {
			t.Errorf("the rollback receipt: exit %d %+v", code, res)
		}
	})

	t.Run("tier-3 step keeps the run from VERIFIED", func(t *testing.T) {
		run := d.runBegin(t, "ledger-tier3", "p-tier3")
		sid := d.mustStep(t, run, "intake")
		s.insert(t, "intake", "p-tier3", 0, "")
		v := d.verifyStep(t, sid, "VERIFIED")
		if v.Effects[0].Tier != 3 {
			t.Fatalf("the tier3-sql read is tier %d, want 3", v.Effects[0].Tier)
		}
		r, code := d.runCmd(t, "run", "finish", "--run", run)
		if code != 4 || r.outcome() == "VERIFIED" || r.Tier != 3 || !strings.Contains(strings.Join(r.reasonCodes(), ","), "tier_below_run_min") {
			t.Fatalf("finish: exit %d %s tier %d reasons %v; want exit 4, not VERIFIED, tier 3, tier_below_run_min", code, r.outcome(), r.Tier, r.Reasons)
		}
	})

	t.Run("run begin is idempotent by run id", func(t *testing.T) {
		id := d.runBegin(t, "ledger", "p-idem", "--run-id", "claims-p-idem-1")
		if again := d.runBegin(t, "ledger", "p-idem", "--run-id", "claims-p-idem-1"); again != id || id != "claims-p-idem-1" {
			t.Errorf("run ids %s, %s; want claims-p-idem-1 twice", id, again)
		}
		out, code := d.ctl(t, "run", "begin", "--workflow", "claims", "--deployment-name", "ledger", "--param", "patient_id=p-other", "--run-id", "claims-p-idem-1")
		if code == 0 || !strings.Contains(out, "AlreadyExists") {
			t.Errorf("the same run id with other params: exit %d %s; want AlreadyExists", code, out)
		}
	})
}
