package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// The trust model through the real daemon and verifyctl: the caller names
// registered deployments and workflow steps; it never chooses where the
// daemon reads or what counts as proof.

// ctlAll runs verifyctl and returns stdout, stderr and the exit code.
func (d *daemon) ctlAll(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins.dir, "verifyctl"), append(args, "--addr", d.addr)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("verifyctl %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// refusal is the JSON error verifyctl prints.
type refusal struct {
	Error *struct {
		Code    string `json:"code"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
		Path    string `json:"path"`
	} `json:"error"`
}

// wantRefused runs verifyctl and checks exit 3 with the gRPC code, the rule
// (reason) and the path.
func (d *daemon) wantRefused(t *testing.T, grpcCode, rule, path string, args ...string) string {
	t.Helper()
	out, stderr, code := d.ctlAll(t, args...)
	r := mustJSON[refusal](t, out)
	if code != 3 || r.Error == nil || r.Error.Code != grpcCode || r.Error.Reason != rule || r.Error.Path != path {
		t.Fatalf("verifyctl %s: exit %d, %s%s; want exit 3, %s, rule %s, path %s", args[0], code, out, stderr, grpcCode, rule, path)
	}
	return out + stderr
}

// TestInlineDeploymentRefused: with a default daemon config, a deployment
// sent by the caller pointing the document adapter at a stand-in for /etc is
// refused before anything is read, and nothing of the file reaches any
// output; the same deployment registered by the operator works.
func TestInlineDeploymentRefused(t *testing.T) {
	etc := t.TempDir()
	marker := fmt.Sprintf("root:$6$marker-%d:19000:0:99999:7:::", os.Getpid())
	writeFile(t, etc, "shadow", marker+"\n")
	dir := t.TempDir()
	dep := writeFile(t, dir, "evil.yaml", fmt.Sprintf("effects:\n  kind: document\n  root: %s\n  file_pattern: 'shadow*'\n  document_format: text\n  document_text_pattern: '(?P<line>.+)'\n", etc))
	effects := writeFile(t, dir, "effects.yaml", "- {kind: record_written, match: {name: {param: file}}, count_new_only: true, timeout_s: 0.2}\n")
	d := startDaemon(t, daemonOpts{})

	var outputs []string
	outputs = append(outputs, d.wantRefused(t, "PermissionDenied", "inline_deployment_refused", "deployment",
		"begin", "--deployment", dep, "--effects", effects, "--param", "file=shadow"))
	outputs = append(outputs, d.wantRefused(t, "PermissionDenied", "inline_deployment_refused", "deployment",
		"preflight", "--deployment", dep))
	if !strings.Contains(outputs[0], "--deployment-name") || !strings.Contains(outputs[0], "--allow-inline-deployments") {
		t.Errorf("the refusal names neither fix: %s", outputs[0])
	}
	for i, o := range outputs {
		if strings.Contains(o, "marker-") {
			t.Errorf("output %d carries the file's content: %s", i, o)
		}
	}
	if strings.Contains(d.logs(), "marker-") {
		t.Error("the daemon log carries the file's content")
	}

	// Registered by the operator, the same Begin works: a new file lands.
	out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, dep), "--effects", effects, "--param", "file=shadow.new")
	if code != 0 {
		t.Fatalf("begin by name: exit %d: %s\n%s", code, out, d.logs())
	}
	b := mustJSON[beginOutput](t, out)
	writeFile(t, etc, "shadow.new", "a new line\n")
	if got := d.verify(t, b.SessionID).summary(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT" {
		t.Errorf("verify by name = %s", got)
	}
}

// TestInlineDevSwitch: --allow-inline-deployments lets a caller's deployment
// in, with a WARN line, but never one that names a secret or configures a
// compensator.
func TestInlineDevSwitch(t *testing.T) {
	c := newClinic(t)
	d := startDaemon(t, daemonOpts{inline: true, config: "secrets:\n  allow: [CLINIC_*]\n", env: []string{"CLINIC_TOKEN=t0k3n-long"}})
	if !strings.Contains(d.logs(), "--allow-inline-deployments") {
		t.Errorf("no WARN line at start: %s", d.logs())
	}
	out, code := d.ctl(t, "begin", "--deployment", c.deployment, "--effects", c.effects, "--param", "patient_id=p1", "--param", "note=x")
	if code != 0 {
		t.Fatalf("inline begin under the switch: exit %d: %s", code, out)
	}
	if n := strings.Count(d.logs(), "inline deployment accepted"); n != 1 {
		t.Errorf("%d WARN lines for one inline Begin, want 1", n)
	}
	raw, err := os.ReadFile(c.deployment)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret.yaml", string(raw)+"  sql_password_env: CLINIC_TOKEN\n")
	comp := writeFile(t, dir, "comp.yaml", string(raw)+"  compensator: {kind: rest_delete, base_url: 'http://127.0.0.1:9', delete_path: '/x/{id}'}\n")
	policy := writeFile(t, dir, "policy.yaml", "policy: {require_change_claim: false}\n"+string(raw))
	for _, tc := range []struct{ dep, rule, path string }{
		{secret, "inline_secret_refused", "deployment.effects.sql_password_env"},
		{comp, "inline_compensator_refused", "deployment.effects.compensator"},
		{policy, "inline_policy_refused", "deployment.policy"},
	} {
		d.wantRefused(t, "PermissionDenied", tc.rule, tc.path,
			"begin", "--deployment", tc.dep, "--effects", c.effects, "--param", "patient_id=p1", "--param", "note=x")
		d.wantRefused(t, "PermissionDenied", tc.rule, tc.path, "preflight", "--deployment", tc.dep)
	}
}

// triageWorkflow is a registered workflow over the clinic database.
const triageWorkflow = `schema: verifierd.workflow/v1
name: triage
params: {patient_id: {}, note: {}, pin: {secret: true}}
policy: {subject_params: [patient_id]}
steps:
  - step: save_triage
    risk: irreversible
    effects:
      - {kind: record_written, match: {patient_id: {param: patient_id}, type: Triage}, count_new_only: true, risk: irreversible, timeout_s: 0.5}
      - {kind: field_equals, match: {patient_id: {param: patient_id}, type: Triage}, field: note, value: {param: note}, timeout_s: 0.5}
  - step: save_with_pin
    effects:
      - {kind: record_written, match: {patient_id: {param: patient_id}, note: {param: pin}}, count_new_only: true}
`

// trustDaemon starts a daemon with the clinic and the triage workflow
// registered, and extra daemon config.
func trustDaemon(t *testing.T, c *clinicDB, extra string) (*daemon, string) {
	t.Helper()
	dir := t.TempDir()
	wf := writeFile(t, dir, "triage.yaml", triageWorkflow)
	cfg := fmt.Sprintf("deployments:\n  clinic: %s\nworkflows:\n  triage: %s\n", c.deployment, wf) + extra
	sum := sha256.Sum256([]byte(triageWorkflow))
	return startDaemon(t, daemonOpts{config: cfg}), "sha256:" + hex.EncodeToString(sum[:])
}

type registeredOutput struct {
	Outcome    string `json:"outcome"`
	Registered *struct {
		Workflow       string `json:"workflow"`
		WorkflowDigest string `json:"workflow_digest"`
		Step           string `json:"step"`
	} `json:"registered_step"`
}

// TestWorkflowStepThroughDaemon: Begin names a registered workflow step and
// sends only run parameters; Verify judges the registered contracts and
// returns the workflow's digest and the step.
func TestWorkflowStepThroughDaemon(t *testing.T) {
	c := newClinic(t)
	d, digest := trustDaemon(t, c, "")
	out, code := d.ctl(t, "begin", "--deployment-name", "clinic", "--workflow", "triage", "--step", "save_triage",
		"--param", "patient_id=p1", "--param", "note=Follow-up")
	if code != 0 {
		t.Fatalf("begin exit %d: %s\n%s", code, out, d.logs())
	}
	b := mustJSON[beginOutput](t, out)
	if len(b.Effects) != 2 {
		t.Fatalf("begin effects %+v, want the step's two contracts", b.Effects)
	}
	c.save(t, "p1", "Follow-up", 1)
	out, code = d.ctl(t, "verify", "--session", b.SessionID)
	v, r := mustJSON[verifyOutput](t, out), mustJSON[registeredOutput](t, out)
	if code != 0 || v.summary() != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL" {
		t.Errorf("verify exit %d = %s", code, v.summary())
	}
	if r.Registered == nil || r.Registered.Workflow != "triage" || r.Registered.Step != "save_triage" || r.Registered.WorkflowDigest != digest {
		t.Errorf("verify registered_step = %+v, want triage/save_triage/%s", r.Registered, digest)
	}

	// After a restart, the stored session still answers it.
	d.stop()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	out, _ = d.ctl(t, "session", "--session", b.SessionID)
	st := mustJSON[struct {
		Begin registeredOutput `json:"begin"`
	}](t, out)
	out, _ = d.ctl(t, "verify", "--session", b.SessionID)
	if again := mustJSON[registeredOutput](t, out); st.Begin.Registered == nil || again.Registered == nil || again.Registered.WorkflowDigest != digest {
		t.Errorf("after restart: session %+v, verify %s", st.Begin.Registered, out)
	}

	// Contracts and a workflow step together, or an unknown step: invalid.
	_, err := d.client(t).Begin(context.Background(), &verifierv1.BeginRequest{
		Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: "clinic"},
		Workflow:   "triage", Step: "save_triage", Effects: `[{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true}]`,
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("effects and a step: %v, want InvalidArgument", err)
	}
	out, code = d.ctl(t, "begin", "--deployment-name", "clinic", "--workflow", "triage", "--step", "nope", "--param", "patient_id=p1")
	if r := mustJSON[beginOutput](t, out); code != 2 || r.Error == nil || r.Error.Path != "step" || !strings.Contains(r.Error.Message, `"nope"`) {
		t.Errorf("unknown step: exit %d %s; want exit 2 naming it", code, out)
	}
}

// TestRequireRegisteredContracts: under the default policy (a policy block
// that leaves the rule alone), caller contracts are refused; the
// registered step still begins.
func TestRequireRegisteredContracts(t *testing.T) {
	c := newClinic(t)
	d, _ := trustDaemon(t, c, "policy: {}\n")
	d.wantRefused(t, "PermissionDenied", "registered_contracts_required", "effects",
		"begin", "--deployment-name", "clinic", "--effects", c.effects, "--param", "patient_id=p1", "--param", "note=x")
	out, code := d.ctl(t, "begin", "--deployment-name", "clinic", "--workflow", "triage", "--step", "save_triage", "--param", "patient_id=p1", "--param", "note=x")
	if code != 0 {
		t.Errorf("registered step: exit %d %s", code, out)
	}
}

// TestContractGuardsThroughDaemon: each guard refuses at Begin with exit 3,
// naming the rule and the effect path; its counterpart begins.
func TestContractGuardsThroughDaemon(t *testing.T) {
	c := newClinic(t)
	dir := t.TempDir()
	readBack := writeFile(t, dir, "readback.yaml", "- {kind: field_equals, match: {patient_id: {param: patient_id}, type: Triage}, field: note, value: {param: note}}\n")
	anyone := writeFile(t, dir, "anyone.yaml", "- {kind: record_written, match: {type: Triage}, count_new_only: true}\n")
	inValue := writeFile(t, dir, "invalue.yaml", "- {kind: record_written, match: {patient_id: {param: patient_id}, type: Triage}, count_new_only: true}\n- {kind: field_equals, match: {type: Triage}, field: patient_id, value: {param: patient_id}}\n")
	args := func(effects string) []string {
		return []string{"begin", "--deployment-name", "clinic", "--effects", effects, "--param", "patient_id=p1", "--param", "note=x"}
	}
	begins := func(t *testing.T, d *daemon, args ...string) {
		t.Helper()
		if out, code := d.ctl(t, args...); code != 0 {
			t.Errorf("counterpart: exit %d %s\n%s", code, out, d.logs())
		}
	}

	t.Run("no_change_claim", func(t *testing.T) {
		d, _ := trustDaemon(t, c, "")
		d.wantRefused(t, "FailedPrecondition", "no_change_claim", "effects", args(readBack)...)
		begins(t, d, args(c.effects)...)
	})
	t.Run("subject_not_selected", func(t *testing.T) {
		d, _ := trustDaemon(t, c, "policy:\n  subject_params: [patient_id]\n  require_registered_contracts: false\n")
		d.wantRefused(t, "FailedPrecondition", "subject_not_selected", "effects[0]", args(anyone)...)
		// A {param} in value does not select the subject.
		d.wantRefused(t, "FailedPrecondition", "subject_not_selected", "effects[1]", args(inValue)...)
		begins(t, d, args(c.effects)...)
	})
	t.Run("weak_tier", func(t *testing.T) {
		// ui_readback is tier 2 by its mechanism; the check comes after
		// configuring and selecting, before any read (no browser starts).
		ui := writeFile(t, dir, "ui.yaml", `effects:
  kind: ui_readback
  # One patient's page: new means newly matching it (a reviewed risk).
  newness: newly_matching
  ui_readback:
    record_url: "http://127.0.0.1:9/patients/{patient}/encounters"
    url_params: {patient: {param: patient_id}}
    sign_in:
      url: http://127.0.0.1:9/login
      username_selector: "#username"
      password_selector: "#password"
      submit_selector: "button[type=submit]"
      signed_in_selector: "#user-menu"
      username_env: UIRB_USER
      password_env: UIRB_PASSWORD
    ready_selector: "#encounters"
    row_selector: "tr.encounter"
    fields:
      id: {attribute: data-id}
      type: {selector: td.type}
    identity:
      reader: {selector: "#patient-mrn"}
      value: {param: patient_id}
      field: patient_id
`)
		cfg := fmt.Sprintf("deployments:\n  clinic: %s\n  ui: %s\nsecrets:\n  allow: [UIRB_*]\npolicy:\n  min_tier: 1\n  require_registered_contracts: false\n", c.deployment, ui)
		d := startDaemon(t, daemonOpts{config: cfg, env: []string{"UIRB_USER=reader-user", "UIRB_PASSWORD=reader-password"}})
		msg := d.wantRefused(t, "FailedPrecondition", "weak_tier", "effects[0]",
			"begin", "--deployment-name", "ui", "--effects", c.effects, "--param", "patient_id=p1", "--param", "note=x")
		if !strings.Contains(msg, "tier 2") {
			t.Errorf("refusal does not name the tier: %s", msg)
		}
		begins(t, d, args(c.effects)...)
	})
	t.Run("secret_param_in_contract", func(t *testing.T) {
		d, _ := trustDaemon(t, c, "")
		d.wantRefused(t, "FailedPrecondition", "secret_param_in_contract", "effects[0]",
			"begin", "--deployment-name", "clinic", "--workflow", "triage", "--step", "save_with_pin", "--param", "patient_id=p1", "--param", "pin=1234")
		begins(t, d, "begin", "--deployment-name", "clinic", "--workflow", "triage", "--step", "save_triage", "--param", "patient_id=p1", "--param", "note=x")
	})
}

// TestBrokenWorkflowStopsStart: a registered workflow that does not load
// stops the daemon at start, naming the file and the path in it.
func TestBrokenWorkflowStopsStart(t *testing.T) {
	dir := t.TempDir()
	wf := writeFile(t, dir, "triage.yaml", strings.Replace(triageWorkflow, "    risk: irreversible\n", "    risk: maybe\n", 1))
	cfg := writeFile(t, dir, "daemon.yaml", "workflows:\n  triage: "+wf+"\n")
	out, err := exec.Command(filepath.Join(bins.dir, "verifierd"), "--listen", freeAddr(t), "--data-dir", t.TempDir(), "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), wf) || !strings.Contains(string(out), "steps[0].risk") {
		t.Errorf("daemon with a broken workflow: err %v, output %s; want a refusal naming %s and steps[0].risk", err, out, wf)
	}
}
