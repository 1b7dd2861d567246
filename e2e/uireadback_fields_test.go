package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestUIReadbackReadFields: the daemon tells ui_readback which fields the
// contracts of a read look at and which values they expect, so a "..." in
// a field no contract reads (the note, here) no longer makes the read
// unusable, while one in a field a contract reads still does; and the
// contracts' literals (the type in capitals where the page casefolds it, a
// date as the page shows it) are the spellings the values read are
// reported in, with two contracts read together.
func TestUIReadbackReadFields(t *testing.T) {
	app := startRecordApp(t)
	d := startDaemon(t, daemonOpts{
		config: "secrets:\n  allow: [UIRB_*]\n",
		env:    []string{"UIRB_USER=" + readerUser, "UIRB_PASSWORD=" + readerPassword},
	})
	dir := t.TempDir()
	deployment := d.register(t, uiReadbackDeployment(t, dir, app))
	literals := writeFile(t, dir, "literals.yaml", `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  count_new_only: true
  risk: irreversible
  timeout_s: 2
- kind: field_equals
  match: {patient_id: {param: patient_id}, type: Triage}
  field: date
  value: 06/05/2026
  timeout_s: 2
`)
	readsNote := writeFile(t, dir, "note.yaml", `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: triage}
  count_new_only: true
  risk: irreversible
  timeout_s: 2
- kind: field_equals
  match: {patient_id: {param: patient_id}, type: triage}
  field: note
  value: {param: note}
  timeout_s: 2
`)
	clerk := app.clerk(t)
	const shortened = "Call back... maybe"
	tests := []struct {
		name, effects, date string
		// earlier is the note of the patient's earlier row, in the
		// baseline too.
		earlier      string
		want, reason string
	}{
		{"a marker in a field no contract reads", literals, "2026-05-06", "BP... recheck",
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL", ""},
		{"another date is still refuted", literals, "2026-05-07", "BP... recheck",
			"RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH", ""},
		{"a marker in a field a contract reads", readsNote, "2026-05-06", "BP recheck",
			"RECONCILIATION_REQUIRED INDETERMINATE/unavailable/SOR_UNREACHABLE INDETERMINATE/unavailable/SOR_UNREACHABLE", "field note: the value contains the truncation marker"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patient := fmt.Sprintf("f%d", i)
			app.post(t, http.DefaultClient, "/api/patients", map[string]string{"id": patient})
			app.post(t, clerk, "/api/encounters", map[string]string{"patient_id": patient, "type": "Vitals", "note": tt.earlier, "date": "2026-05-05"})
			out, code := d.ctl(t, "begin", "--deployment-name", deployment, "--effects", tt.effects,
				"--param", "patient_id="+patient, "--param", "note="+shortened)
			if code != 0 {
				t.Fatalf("begin exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
			}
			b := mustJSON[beginOutput](t, out)
			app.post(t, clerk, "/api/encounters", map[string]string{"patient_id": patient, "type": "Triage", "note": shortened, "date": tt.date})
			v := d.verify(t, b.SessionID)
			if got := v.summary(); got != tt.want {
				t.Fatalf("verify = %s\nwant     %s\ndaemon log:\n%s", got, tt.want, d.logs())
			}
			if tt.reason != "" {
				if msg := v.Effects[0].Reasons[0].Message; !strings.Contains(msg, tt.reason) {
					t.Errorf("reason %q; want it to say %q", msg, tt.reason)
				}
			}
		})
	}
}
