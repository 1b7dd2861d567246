package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/httprecords"
)

// TestCompensatorThroughDaemon: a double submit of an irreversible write
// through a Frappe-shaped API; the daemon's compensator deletes the
// duplicate with the configured REST DELETE template and re-verifies
// against the original baseline. A template the server cannot serve leaves
// the verdict REFUTED with a compensation_failed task.
func TestCompensatorThroughDaemon(t *testing.T) {
	erp := httprecords.NewFrappe(t, true)
	d := httpDaemon(t, "ERP_READ_TOKEN="+erp.Token(), "ERP_WRITE_TOKEN="+erp.Token())
	deployment := func(deletePath string) string {
		return fmt.Sprintf(`effects:
  kind: rest
  base_url: %[1]s
  records_path: /api/resource/Patient Encounter?fields=["name","patient","encounter_type"]&filters=[["Patient Encounter","patient","=","{patient}"]]
  path_params: {patient: {param: patient_id}}
  records_key: data
  # Frappe answers 20 records unless asked for more: a response of 20 may
  # be cut short and is not judged.
  single_response: true
  max_records: 20
  auth: {header: Authorization, value_env: ERP_READ_TOKEN}
  ca_file: %[2]s
  # This test is about the compensator, not newness: the read is one
  # patient's, and new means newly matching it (a reviewed risk).
  newness: newly_matching
  compensator:
    kind: rest_delete
    base_url: %[1]s
    delete_path: %[3]s
    auth: {header: Authorization, value_env: ERP_WRITE_TOKEN}
    ca_file: %[2]s
`, erp.URL, erp.CAFile, deletePath)
	}
	const effects = `
- kind: record_written
  match: {patient: {param: patient_id}, encounter_type: Triage}
  count_new_only: true
  identity_field: name
  risk: irreversible
  timeout_s: 0.5
`
	tests := []struct {
		name, deletePath, want, task string
		left                         int
	}{
		{"duplicate deleted and re-verified", "/api/resource/Patient%20Encounter/{name}",
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT+COMPENSATED", "null", 1},
		{"a failing template leaves a compensation_failed task", "/api/resource/No%20Such%20Doctype/{name}",
			"RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER", "compensation_failed", 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patient := fmt.Sprintf("COMP-%d", i)
			b := newBoundary(t, deployment(tt.deletePath), effects)
			begun := d.beginHTTP(t, b, "patient_id="+patient)
			for range 2 {
				erp.Post(t, "Patient Encounter", map[string]any{"patient": patient, "encounter_type": "Triage"})
			}
			v := d.verify(t, begun.SessionID)
			if got := v.summary(); got != tt.want {
				t.Errorf("verify = %s\nwant     %s\ndaemon log:\n%s", got, tt.want, d.logs())
			}
			var task struct {
				Kind string `json:"kind"`
			}
			if string(v.Effects[0].ReconciliationTask) == "null" {
				task.Kind = "null"
			} else if err := json.Unmarshal(v.Effects[0].ReconciliationTask, &task); err != nil {
				t.Fatal(err)
			}
			if task.Kind != tt.task {
				t.Errorf("reconciliation task %s, want kind %s", v.Effects[0].ReconciliationTask, tt.task)
			}
			if got := erp.Count("Patient Encounter", "patient", patient); got != tt.left {
				t.Errorf("%d encounters of %s left, want %d", got, patient, tt.left)
			}
			if strings.Contains(d.logs(), erp.Token()) {
				t.Error("the daemon log carries the write token")
			}
		})
	}
}
