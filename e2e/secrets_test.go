package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
)

// TestSecretEchoedInRecordsIsMasked: a REST system of record echoes the
// Authorization header the daemon presents inside every record it lists.
// The credential comes from the deployment's value_env; wherever the
// records go — Verify's matched records, observed values and reasons,
// GetSession, the daemon's log and every byte under its data dir (the
// bbolt file holding the stored baseline and result) — it is
// "[redacted]"; the judge decides on the values as read.
func TestSecretEchoedInRecordsIsMasked(t *testing.T) {
	t.Parallel()
	erp := httprecords.NewFrappe(t, false)
	erp.EchoAuth(true) // a refusal quotes the credential presented, too
	url, _ := httprecords.EchoAuthorization(t, erp, false)
	secret := erp.Token()
	d := httpDaemon(t, "ERP_ECHO_TOKEN="+secret)
	// No change claim: the cases are about where values go (this
	// deployment relaxes the rule for that).
	b := newBoundary(t, fmt.Sprintf(`policy: {require_change_claim: false}
effects:
  kind: rest
  base_url: %s
  records_path: /api/resource/Patient Encounter?fields=["name","patient","encounter_type"]&filters=[["Patient Encounter","patient","=","{patient}"]]&order_by=creation asc
  path_params: {patient: {param: patient_id}}
  records_key: data
  pagination: {offset_param: limit_start, limit_param: limit_page_length, page_size: 50}
  auth: {header: Authorization, value_env: ERP_ECHO_TOKEN}
`, url), `
- kind: record_written
  match: {patient: {param: patient_id}, encounter_type: Triage}
  expected_count: 1
  timeout_s: 0.5
- kind: field_equals
  match: {patient: {param: patient_id}, encounter_type: Triage}
  field: `+httprecords.EchoAuthField+`
  value: {param: expected_auth}
  timeout_s: 0.5
`)
	// An earlier record, so the stored baseline holds the echo too.
	erp.Post(t, "Patient Encounter", map[string]any{"patient": "PAT-ECHO", "encounter_type": "Vitals"})
	var outputs []string

	// The matched records and the observed value of the read-back of the
	// echoed header are masked; the decision is the raw value's.
	begun := d.beginHTTP(t, b, "patient_id=PAT-ECHO", "expected_auth=Bearer nothing")
	erp.Post(t, "Patient Encounter", map[string]any{"patient": "PAT-ECHO", "encounter_type": "Triage"})
	out, code := d.ctl(t, "verify", "--session", begun.SessionID)
	v := mustJSON[verifyOutput](t, out)
	if code != 0 || v.summary() != "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH" ||
		!strings.Contains(out, `"observed_value": "[redacted]"`) || !strings.Contains(out, `"`+httprecords.EchoAuthField+`": "[redacted]"`) {
		t.Fatalf("verify exit %d: %s\n%s", code, out, d.logs())
	}
	outputs = append(outputs, out)
	got, code := d.ctl(t, "session", "--session", begun.SessionID)
	if code != 0 || !strings.Contains(got, "[redacted]") {
		t.Fatalf("session exit %d: %s", code, got)
	}
	outputs = append(outputs, got)

	// The server refuses the rotated credential and quotes it in its
	// answer: the unreachable read's reason is masked too.
	begun = d.beginHTTP(t, b, "patient_id=PAT-ECHO", "expected_auth=x")
	erp.Rotate()
	out, _ = d.ctl(t, "verify", "--session", begun.SessionID)
	if v := mustJSON[verifyOutput](t, out); v.Effects[0].Verdict != "INDETERMINATE" {
		t.Fatalf("rotated credential: %s", out)
	}
	outputs = append(outputs, out)
	got, _ = d.ctl(t, "session", "--session", begun.SessionID)
	outputs = append(outputs, got)

	for i, o := range outputs {
		if strings.Contains(o, secret) {
			t.Errorf("output %d carries the credential:\n%s", i, o)
		}
	}
	if strings.Contains(d.logs(), secret) {
		t.Errorf("the daemon log carries the credential")
	}
	d.stop()
	// Every byte the daemon stored (unique parts of the secret: the key and
	// the API secret, each on its own).
	key, apiSecret, _ := strings.Cut(strings.TrimPrefix(secret, "token "), ":")
	files := 0
	err := filepath.WalkDir(d.dataDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, s := range []string{key, apiSecret} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s holds a part of the credential", path)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walking the data dir: %v (%d files)", err, files)
	}
}
