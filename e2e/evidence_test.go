package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/verifierd/verifierd/judge"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// evidenceRun is everything one run of the redaction proof showed or kept.
type evidenceRun struct {
	verify   verifyOutput
	matched  []judge.Record // as verifyctl printed them
	digests  []string       // the reconciliation task's record digests
	shown    []byte         // every response: gRPC Begin, verifyctl verify and session
	logs     string         // the daemon's log, adapters' stderr included
	dataDirB []byte         // every byte under the data dir, read after the daemon stopped
}

// runEvidence runs a double submit through a named deployment (registered
// in the daemon config, begun over gRPC by name) with a low-entropy secret
// in the note of every record, before and after the action, and a daemon
// crash between Begin and Verify.
func runEvidence(t *testing.T, redact string) evidenceRun {
	t.Helper()
	const secret = "123-45-6789"
	dir := t.TempDir()
	c := &clinicDB{path: filepath.Join(dir, "clinic.db")}
	c.run(t, "init", c.path)
	c.save(t, "p1", secret, 1) // in the baseline
	dep := writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  census: {sql_query: SELECT id FROM encounters}
%s`, c.path, redact))
	effects := []byte(`[{"kind": "record_written", "match": {"patient_id": {"param": "patient_id"}, "type": "Triage"},
	  "count_new_only": true, "risk": "irreversible", "timeout_s": 0.5}]`)
	d := startDaemon(t, daemonOpts{config: "deployments:\n  clinic: " + dep + "\n"})

	var run evidenceRun
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := d.client(t).Begin(ctx, &verifierv1.BeginRequest{
		Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: "clinic"},
		Effects:    string(effects), Params: verifierv1.StringParams(map[string]string{"patient_id": "p1"}),
	})
	if err != nil {
		t.Fatalf("Begin: %v\ndaemon log:\n%s", err, d.logs())
	}
	raw, _ := protojson.Marshal(b)
	run.shown = append(run.shown, raw...)

	// A crash between Begin and Verify: the restarted daemon must read the
	// same evidence key from the data dir, or the keyed baseline (ids are
	// redacted too) could not be compared and the verdict would change.
	d.kill9()
	c.save(t, "p1", secret, 2) // the double submit
	if err := d.start(); err != nil {
		t.Fatal(err)
	}

	out, code := d.ctl(t, "verify", "--session", b.GetSessionId())
	if code != 0 {
		t.Fatalf("verify exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
	}
	run.shown = append(run.shown, out...)
	run.verify = mustJSON[verifyOutput](t, out)
	var detail struct {
		Effects []struct {
			MatchedRecords     []judge.Record `json:"matched_records"`
			ReconciliationTask struct {
				Evidence struct {
					RecordDigests []string `json:"record_digests"`
				} `json:"evidence"`
			} `json:"reconciliation_task"`
		} `json:"effects"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&detail); err != nil || len(detail.Effects) != 1 {
		t.Fatalf("verify output: %v\n%s", err, out)
	}
	run.matched = detail.Effects[0].MatchedRecords
	run.digests = detail.Effects[0].ReconciliationTask.Evidence.RecordDigests

	out, code = d.ctl(t, "session", "--session", b.GetSessionId())
	if code != 0 {
		t.Fatalf("session exit %d: %s", code, out)
	}
	run.shown = append(run.shown, out...)

	d.stop()
	run.logs = d.logs()
	err = filepath.WalkDir(d.dataDir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		run.dataDirB = append(run.dataDirB, data...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(run.dataDirB) == 0 {
		t.Fatalf("read nothing from the data dir %s", d.dataDir)
	}
	return run
}

// TestRedactedValueNeverLeaves is the proof of issue 10 item 5 through the
// real daemon, verifyctl, the sql plugin and a SQLite system of record: a
// redacted field's value appears in no response, no log line and no byte
// of the data dir, nor does the unkeyed SHA-256 digest of a record holding
// it; and the verdict is the one the same run gives without redaction. (The
// sql adapter puts no record value in its messages; adapter text carrying
// a hidden value is covered with an in-process adapter in
// internal/session's TestEvidenceHidesRedactedValues.)
func TestRedactedValueNeverLeaves(t *testing.T) {
	const secret = "123-45-6789"
	plain := runEvidence(t, "")
	hidden := runEvidence(t, "  evidence_redact_fields: [note, id]\n")

	const want = "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER"
	if got := hidden.verify.summary(); got != want || plain.verify.summary() != got {
		t.Errorf("redacted run %s, plain run %s; want both %s", got, plain.verify.summary(), want)
	}
	for _, r := range []evidenceRun{plain, hidden} {
		if n := r.verify.Effects[0].ObservedCount; n == nil || *n != 2 {
			t.Errorf("observed_count %v, want 2", n)
		}
		if len(r.digests) != 2 {
			t.Errorf("task digests %v, want 2", r.digests)
		}
		for _, dg := range r.digests {
			if !strings.HasPrefix(dg, judge.KeyedPrefix) {
				t.Errorf("task digest %s is not %s", dg, judge.KeyedPrefix)
			}
		}
	}
	var plainTask, hiddenTask struct {
		Kind            string `json:"kind"`
		SuggestedAction string `json:"suggested_action"`
	}
	if err := json.Unmarshal(plain.verify.Effects[0].ReconciliationTask, &plainTask); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(hidden.verify.Effects[0].ReconciliationTask, &hiddenTask); err != nil {
		t.Fatal(err)
	}
	if plainTask != hiddenTask || hiddenTask.SuggestedAction != "REMOVE_DUPLICATES" {
		t.Errorf("task %+v, plain run %+v; want REMOVE_DUPLICATES in both", hiddenTask, plainTask)
	}

	// Without redaction the secret is shown (the proof can fail), and the
	// matched records give the unkeyed digests a dictionary would target.
	if !bytes.Contains(plain.shown, []byte(secret)) || len(plain.matched) != 2 {
		t.Fatalf("the plain run never showed the secret; this test proves nothing:\n%s", plain.shown)
	}
	if !bytes.Contains(plain.dataDirB, []byte(secret)) {
		t.Fatalf("the plain run's store never held the secret; this test proves nothing")
	}
	forbidden := []string{secret}
	for _, r := range plain.matched {
		forbidden = append(forbidden, strings.TrimPrefix(judge.RecordDigest(r), "sha256:"))
	}
	for _, r := range hidden.matched {
		if r["note"] != judge.RedactedMarker {
			t.Errorf("matched record %v: note not redacted", r)
		}
	}
	for _, s := range forbidden {
		if bytes.Contains(hidden.shown, []byte(s)) {
			t.Errorf("%q is in a response:\n%s", s, hidden.shown)
		}
		if strings.Contains(hidden.logs, s) {
			t.Errorf("%q is in the daemon log:\n%s", s, hidden.logs)
		}
		if bytes.Contains(hidden.dataDirB, []byte(s)) {
			t.Errorf("%q is in a byte of the data dir", s)
		}
	}
}

// TestDaemonRefusesReadableEvidenceKey: a key file others can read stops
// the daemon at start, with what to do.
func TestDaemonRefusesReadableEvidenceKey(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	keyPath := filepath.Join(dataDir, "keys", "evidence-hmac.key")
	if err := os.MkdirAll(filepath.Dir(keyPath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, make([]byte, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	d := &daemon{addr: freeAddr(t), dataDir: dataDir}
	d.args = []string{"--listen", d.addr, "--data-dir", dataDir}
	err := d.start()
	t.Cleanup(d.stop)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+keyPath) {
		t.Fatalf("start = %v; want a refusal naming chmod 600 %s", err, keyPath)
	}
}
