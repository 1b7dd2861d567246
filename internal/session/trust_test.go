package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/sdk"
)

// writeDeployment writes a registered deployment file and returns its path.
func writeDeployment(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "deployment.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantRefusal(t *testing.T, err error, kind ErrorKind, code, path string) {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) || se.Kind != kind || se.Code != code || se.Path != path {
		t.Fatalf("err = %#v (%v); want kind %d, code %q, path %q", se, err, kind, code, path)
	}
}

func TestInlineDeploymentRefusedByDefault(t *testing.T) {
	t.Parallel()
	m := newManager(t, &memAdapter{kind: "inline-test", tier: 1, table: &table{}})
	m.allowInline = false
	dep := "effects: {kind: inline-test, newness: whole_read}\n"
	req := BeginRequest{Deployment: []byte(dep), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}}
	_, err := m.Begin(context.Background(), req)
	wantRefusal(t, err, Denied, CodeInlineDeploymentRefused, "deployment")
	if !strings.Contains(err.Error(), "--deployment-name") || !strings.Contains(err.Error(), "--allow-inline-deployments") {
		t.Errorf("message names neither fix: %v", err)
	}
	_, err = m.TestConnection(context.Background(), []byte(dep), "", nil)
	wantRefusal(t, err, Denied, CodeInlineDeploymentRefused, "deployment")

	// The same deployment, registered by the operator, works.
	m.daemon.Deployments = map[string]string{"mem": writeDeployment(t, dep)}
	req.Deployment, req.DeploymentName = nil, "mem"
	if _, err := m.Begin(context.Background(), req); err != nil {
		t.Fatalf("by name: %v", err)
	}
	if _, err := m.TestConnection(context.Background(), nil, "mem", nil); err != nil {
		t.Fatalf("preflight by name: %v", err)
	}
}

func TestInlineDevSwitchRefusesSecretCompensatorPolicy(t *testing.T) {
	t.Parallel()
	m := newManager(t, &memAdapter{kind: "dev-test", tier: 1, table: &table{}})
	m.daemon.Secrets.Allow = []string{"DEV_*"}
	m.lookupEnv = func(string) (string, bool) { return "x-long-secret", true }
	for name, tc := range map[string]struct{ dep, code, path string }{
		"secret":      {"effects: {kind: dev-test, secret_env: {password: DEV_PASSWORD}}\n", CodeInlineSecretRefused, "deployment.effects.secret_env.password"},
		"compensator": {"effects: {kind: dev-test, compensator: {kind: rest_delete, base_url: 'http://127.0.0.1:1', delete_path: '/x/{id}'}}\n", CodeInlineCompensatorRefused, "deployment.effects.compensator"},
		"policy":      {"policy: {require_change_claim: false}\neffects: {kind: dev-test, newness: whole_read}\n", CodeInlinePolicyRefused, "deployment.policy"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte(tc.dep), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
			wantRefusal(t, err, Denied, tc.code, tc.path)
			_, err = m.TestConnection(context.Background(), []byte(tc.dep), "", nil)
			wantRefusal(t, err, Denied, tc.code, tc.path)
		})
	}
	// Without those, the development switch lets an inline deployment in.
	if _, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: dev-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}}); err != nil {
		t.Fatal(err)
	}
}

const testWorkflow = `schema: verifierd.workflow/v1
name: intake
params: {p: {}, note: {}, pin: {secret: true}}
policy: {subject_params: [p]}
steps:
  - step: save
    risk: irreversible
    effects:
      - {kind: record_written, match: {p: {param: p}}, count_new_only: true, timeout_s: 0.2}
      - {kind: field_equals, match: {p: {param: p}}, field: note, value: {param: note}, timeout_s: 0.2}
  - step: readback
    effects:
      - {kind: field_equals, match: {p: {param: p}}, field: note, value: {param: note}}
  - step: pin
    effects:
      - {kind: record_written, match: {p: {param: p}, pin: {param: pin}}, count_new_only: true}
  - step: by_note
    subject_params: [note]
    effects:
      - {kind: record_written, match: {p: {param: p}}, count_new_only: true}
  - step: any_subject
    subject_params: []
    effects:
      - {kind: record_written, match: {type: Triage}, count_new_only: true}
`

func loadTestWorkflow(t *testing.T) *workflow.Workflow {
	t.Helper()
	w, err := workflow.Parse([]byte(testWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWorkflowStepBegin(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := newManager(t, &memAdapter{kind: "wf-test", tier: 1, table: tab})
	m.daemon.Deployments = map[string]string{"mem": writeDeployment(t, "effects: {kind: wf-test, newness: whole_read}\n")}
	w := loadTestWorkflow(t)
	m.workflows = map[string]*workflow.Workflow{"intake": w}
	params := map[string]string{"p": "1", "note": "hello"}

	res, err := m.Begin(context.Background(), BeginRequest{DeploymentName: "mem", Workflow: "intake", Step: "save", Params: params})
	if err != nil {
		t.Fatal(err)
	}
	want := RegisteredStep{Workflow: "intake", WorkflowDigest: w.Digest, Step: "save"}
	if len(res.Effects) != 2 || res.Registered == nil || *res.Registered != want {
		t.Fatalf("begin %+v, want two effects from the registered step %+v", res, want)
	}
	tab.add(sdk.Record{"id": "1", "p": "1", "note": "hello"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Outcome != "VERIFIED" || v.Registered == nil || *v.Registered != want {
		t.Errorf("verify %s %+v, want VERIFIED with %+v", v.Outcome, v.Registered, want)
	}
	st, err := m.Get(t.Context(), res.SessionID)
	if err != nil || st.Begin.Registered == nil || st.Result.Registered == nil {
		t.Errorf("stored session lost the registered step: %+v %v", st, err)
	}

	for name, tc := range map[string]struct {
		req  BeginRequest
		path string
	}{
		"both":         {BeginRequest{DeploymentName: "mem", Workflow: "intake", Step: "save", Effects: []byte(effectsRW)}, "effects"},
		"no step":      {BeginRequest{DeploymentName: "mem", Workflow: "intake"}, "workflow"},
		"unknown wf":   {BeginRequest{DeploymentName: "mem", Workflow: "nope", Step: "save"}, "workflow"},
		"unknown step": {BeginRequest{DeploymentName: "mem", Workflow: "intake", Step: "nope"}, "step"},
	} {
		tc.req.Params = params
		_, err := m.Begin(context.Background(), tc.req)
		var se *Error
		if !errors.As(err, &se) || se.Kind != Invalid || se.Path != tc.path {
			t.Errorf("%s: err %v, want Invalid on %s", name, err, tc.path)
		}
	}
}

// TestRequireRegisteredContracts: with no policy anywhere, caller-sent
// effects are refused; a registered step begins.
func TestRequireRegisteredContracts(t *testing.T) {
	t.Parallel()
	m := newManager(t, &memAdapter{kind: "rrc-test", tier: 1, table: &table{}})
	m.daemon.Policy = nil
	m.daemon.Deployments = map[string]string{"mem": writeDeployment(t, "effects: {kind: rrc-test, newness: whole_read}\n")}
	m.workflows = map[string]*workflow.Workflow{"intake": loadTestWorkflow(t)}
	params := map[string]string{"p": "1", "note": "x"}
	_, err := m.Begin(context.Background(), BeginRequest{DeploymentName: "mem", Effects: []byte(effectsRW), Params: params})
	wantRefusal(t, err, Denied, CodeRegisteredContractsRequired, "effects")
	// Refused before the caller's contracts are even bound.
	_, err = m.Begin(context.Background(), BeginRequest{DeploymentName: "mem", Effects: []byte(effectsRW)})
	wantRefusal(t, err, Denied, CodeRegisteredContractsRequired, "effects")
	if _, err := m.Begin(context.Background(), BeginRequest{DeploymentName: "mem", Workflow: "intake", Step: "save", Params: params}); err != nil {
		t.Fatalf("registered step: %v", err)
	}
}

// TestContractGuards: each guard refuses at Begin, naming the effect path and
// the rule, and the operator's layers (deployment, workflow) can tighten or
// relax it.
func TestContractGuards(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		deployment string // registered deployment body
		daemon     string // daemon policy, as a policy block
		step       string // workflow step, or "" for caller effects
		effects    string
		code, path string // "" = begins
	}{
		"lone read-back refused": {deployment: "effects: {kind: K}\n",
			effects: `[{"kind": "field_equals", "match": {"p": "1"}, "field": "note", "value": "x"}]`,
			code:    workflow.CodeNoChangeClaim, path: "effects"},
		"lone read-back, deployment relaxes": {deployment: "policy: {require_change_claim: false}\neffects: {kind: K}\n",
			effects: `[{"kind": "field_equals", "match": {"p": "1"}, "field": "note", "value": "x"}]`},
		"lone read-back, workflow step": {deployment: "effects: {kind: K}\n", step: "readback",
			code: workflow.CodeNoChangeClaim, path: "effects"},
		"subject not selected": {deployment: "effects: {kind: K}\n", daemon: "{subject_params: [p]}",
			effects: `[{"kind": "record_written", "match": {"type": "Triage"}, "count_new_only": true}]`,
			code:    workflow.CodeSubjectNotSelected, path: "effects[0]"},
		"subject only in value": {deployment: "effects: {kind: K}\n", daemon: "{subject_params: [p], require_change_claim: false}",
			effects: `[{"kind": "field_equals", "match": {"type": "Triage"}, "field": "p", "value": {"param": "p"}}]`,
			code:    workflow.CodeSubjectNotSelected, path: "effects[0]"},
		"subject selected": {deployment: "effects: {kind: K}\n", daemon: "{subject_params: [p]}",
			effects: effectsRW},
		"weak tier": {deployment: "policy: {min_tier: 1}\neffects: {kind: K2}\n",
			effects: effectsRW, code: workflow.CodeWeakTier, path: "effects[0]"},
		"tier allowed": {deployment: "policy: {min_tier: 2}\neffects: {kind: K2}\n", effects: effectsRW},
		"secret param": {deployment: "effects: {kind: K}\n", step: "pin",
			code: workflow.CodeSecretParamInContract, path: "effects[0]"},
		"registered step passes": {deployment: "effects: {kind: K}\n", daemon: "{min_tier: 1}", step: "save"},
		"zero new records claims no change": {deployment: "effects: {kind: K}\n",
			effects: `[{"kind": "record_written", "match": {"p": {"param": "p"}}, "count_new_only": true, "expected_count": 0}]`,
			code:    workflow.CodeNoChangeClaim, path: "effects"},
		"empty new set claims no change": {deployment: "effects: {kind: K}\n",
			effects: `[{"kind": "exact_new_set", "new_records": [], "expected_count": 0}]`,
			code:    workflow.CodeNoChangeClaim, path: "effects"},
		"step subject_params replace the policy's": {deployment: "effects: {kind: K}\n", step: "by_note",
			code: workflow.CodeSubjectNotSelected, path: "effects[0]"},
		"step without subject_params": {deployment: "effects: {kind: K}\n", step: "any_subject"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := "guard-" + strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' {
					return r
				}
				return '-'
			}, name)
			tab := &table{}
			m := newManager(t, &memAdapter{kind: k, tier: 1, table: tab}, &memAdapter{kind: k + "-2", tier: 2, table: tab})
			// The in-process tables are read whole: the operator declares it.
			dep := strings.ReplaceAll(strings.ReplaceAll(tc.deployment, "{kind: K2}", "{kind: "+k+"-2, newness: whole_read}"), "{kind: K}", "{kind: "+k+", newness: whole_read}")
			m.daemon.Deployments = map[string]string{"reg": writeDeployment(t, dep)}
			if tc.daemon != "" {
				w, err := workflow.Parse([]byte("schema: verifierd.workflow/v1\nname: x\npolicy: " + tc.daemon + "\nsteps: [{step: s}]\n"))
				if err != nil {
					t.Fatal(err)
				}
				m.daemon.Policy = callerContracts(w.Policy)
			}
			m.workflows = map[string]*workflow.Workflow{"intake": loadTestWorkflow(t)}
			req := BeginRequest{DeploymentName: "reg", Effects: []byte(tc.effects), Params: map[string]string{"p": "1", "note": "x", "pin": "1234"}}
			if tc.step != "" {
				req.Effects, req.Workflow, req.Step = nil, "intake", tc.step
			}
			_, err := m.Begin(context.Background(), req)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantRefusal(t, err, Refused, tc.code, tc.path)
			if !strings.Contains(err.Error(), tc.code) {
				t.Errorf("message does not name the rule: %v", err)
			}
		})
	}
}

func TestLoadWorkflows(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(testWorkflow), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(testWorkflow, "risk: irreversible", "risk: maybe", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	m.daemon.Workflows = map[string]string{"intake": good}
	ws, err := LoadWorkflows(m.daemon)
	if err != nil || ws["intake"] == nil || len(ws["intake"].Steps) != 5 {
		t.Fatalf("loaded %v, %v", ws, err)
	}
	m.daemon.Workflows["broken"] = bad
	_, err = LoadWorkflows(m.daemon)
	if err == nil || !strings.Contains(err.Error(), "workflows.broken") || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "steps[0].risk") {
		t.Fatalf("err %v, want one naming workflows.broken, the file and steps[0].risk", err)
	}
}
