package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestNewnessPreflightAndLint: against the real daemon and the clinic's
// SQLite database, with the triage workflow registered. A deployment whose
// read is narrowed (a WHERE bound to the patient) and proves no newness
// makes Begin refuse every change claim of the registered steps: verifyctl
// preflight exits 1 naming require_proven_newness (the candidate itself
// answers), lint finds the refusal without any --param, and Begin refuses
// the step as preflight said. The clinic's own deployment (a census proven
// whole) and one declaring newness: newly_matching pass preflight.
func TestNewnessPreflightAndLint(t *testing.T) {
	c := newClinic(t)
	dir := t.TempDir()
	wf := writeFile(t, dir, "triage.yaml", triageWorkflow)
	narrowed := func(extra string) string {
		return writeFile(t, dir, fmt.Sprintf("narrowed%d.yaml", len(extra)), fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
%s`, c.path, extra))
	}
	cfg := fmt.Sprintf("deployments:\n  clinic: %s\n  narrowed: %s\n  declared: %s\nworkflows:\n  triage: %s\n",
		c.deployment, narrowed(""), narrowed("  newness: newly_matching\n"), wf)
	d := startDaemon(t, daemonOpts{config: cfg})

	type cand struct {
		Reachable      bool   `json:"reachable"`
		Newness        string `json:"newness"`
		NewnessRefusal string `json:"newness_refusal"`
	}
	for _, tc := range []struct {
		name, newness string
		refused       bool
	}{{"narrowed", "newly_matching", true}, {"declared", "newly_matching", false}, {"clinic", "census", false}} {
		out, stderr, code := d.ctlAll(t, "preflight", "--deployment-name", tc.name, "--param", "patient_id=p1")
		var cands []cand
		if err := json.Unmarshal([]byte(out), &cands); err != nil || len(cands) != 1 {
			t.Fatalf("%s: exit %d, stdout is not one candidate's JSON (%v): %s", tc.name, code, err, out)
		}
		got := cands[0]
		if !got.Reachable || got.Newness != tc.newness {
			t.Errorf("%s: %+v, want reachable with newness %s", tc.name, got, tc.newness)
		}
		if !tc.refused {
			if code != 0 || got.NewnessRefusal != "" {
				t.Errorf("%s: exit %d, refusal %q; want exit 0 and none", tc.name, code, got.NewnessRefusal)
			}
			continue
		}
		for _, text := range []string{got.NewnessRefusal, stderr} {
			if !strings.Contains(text, "require_proven_newness") || !strings.Contains(text, "workflows.triage.steps[0].effects[0]") || !strings.Contains(text, "sql_query filters with WHERE") {
				t.Errorf("%s: %q does not name the policy, the first refused claim and the narrowing", tc.name, text)
			}
		}
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", tc.name, code)
		}
	}

	out, code := d.ctl(t, "lint", "--workflow", wf, "--deployment-name", "narrowed")
	var report struct {
		Findings []struct{ Code, Path, Message string } `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 {
		t.Fatalf("lint: exit %d (%v): %s", code, err, out)
	}
	var unproven []string
	for _, f := range report.Findings {
		if f.Code == "newness_unproven" {
			unproven = append(unproven, f.Path)
		}
	}
	if strings.Join(unproven, ",") != "steps[0].effects[0],steps[1].effects[0]" {
		t.Errorf("lint without --param found newness_unproven at %v, want both change claims: %s", unproven, out)
	}

	out, _, code = d.ctlAll(t, "begin", "--deployment-name", "narrowed", "--workflow", "triage", "--step", "save_triage",
		"--param", "patient_id=p1", "--param", "note=x")
	if r := mustJSON[refusal](t, out); code != 3 || r.Error == nil || r.Error.Reason != "newness_unproven" || r.Error.Path != "effects[0]" {
		t.Errorf("begin through the narrowed deployment: exit %d %s; want the newness_unproven refusal preflight announced", code, out)
	}
}
