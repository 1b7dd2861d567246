package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The adversary matrix's daemon: each backend's workflows, reward
// contract and daemon (adversary_matrix_test.go).

// The workflows: advWorkflowName, and advStrictName, the same step under
// forbid_other_writes (registered where the backend can write outside
// the read collection).
const (
	advWorkflowName = "adv"
	advStrictName   = "adv_strict"
)

// advWorkflow is the one-step workflow of a backend: save writes one new
// record of the subject, of type in; strict forbids other writes.
func (b *advBackend) advWorkflow(name string, strict bool) string {
	extra := ""
	if strict {
		extra = "        forbid_other_writes: true\n"
	}
	return fmt.Sprintf(`schema: verifierd.workflow/v1
name: %s
params: {subject: {}}
policy:
  subject_params: [subject]
steps:
  - step: save
    intent: "save the subject's record"
    risk: irreversible
    effects:
      - kind: record_written
        match: {%s: {param: subject}, %s: %q}
        count_new_only: true
        risk: irreversible
        timeout_s: 0.5
%s`, name, b.subj, b.typ, b.in, extra)
}

// writeAdvReward writes the reward contract of the backend: one new
// record of the subject, scored through the main deployment.
func (b *advBackend) writeAdvReward(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "contract.yaml", fmt.Sprintf(`schema: verifierd.reward-contract/v1
id: adv-%s
version: "1"
deployment: %s
identity_keys: [subject]
components: [{name: terminal_effect, weight: 1}]
scoring: {wrong_effect_reward: 0.0}
certificate_policy: {epsilon: 0.05, delta: 0.05, threshold: 0.5, expiry_policy_updates: 1000}
`, b.name, depMain))
	writeFile(t, dir, "required_effects.yaml", fmt.Sprintf(`- kind: record_written
  match: {%s: {param: subject}, %s: %q}
  expected_count: 1
  count_new_only: true
  timeout_s: 1
`, b.subj, b.typ, b.in))
	writeFile(t, dir, "forbidden_effects.yaml", fmt.Sprintf(`- kind: record_written
  match: {%s: {param: subject}, %s: %q}
  expected_count: 1
  timeout_s: 1
`, b.subj, b.typ, b.out))
}

// startDaemon starts the backend's daemon with its deployments, the adv
// workflow and reward contract; calibrates the contract, installs its
// certificate and restarts, so the honest episode can be certified.
func (b *advBackend) startDaemon(t *testing.T) {
	t.Helper()
	wf := writeFile(t, b.dir, "workflow.yaml", b.advWorkflow(advWorkflowName, false))
	reward := filepath.Join(b.dir, "reward")
	b.writeAdvReward(t, reward)
	cfg := "secrets:\n  allow: [ADV_*]\ndeployments:\n"
	for _, name := range []string{depMain, depSettle, depCapped} {
		if p, ok := b.deployments[name]; ok {
			cfg += fmt.Sprintf("  %s: %s\n", name, p)
		}
	}
	cfg += fmt.Sprintf("workflows:\n  %s: %s\n", advWorkflowName, wf)
	if b.other != nil {
		cfg += fmt.Sprintf("  %s: %s\n", advStrictName, writeFile(t, b.dir, "strict.yaml", b.advWorkflow(advStrictName, true)))
	}
	cfg += fmt.Sprintf("rewards:\n  adv: %s\n", reward)
	b.d = startDaemon(t, daemonOpts{pluginDir: b.pluginDir(t), config: cfg, env: b.env()})
	cal := filepath.Join(b.dir, "cal")
	out, code := b.d.ctl(t, "reward", "calibrate", "--contract", "adv", "--out", cal)
	if code != 0 {
		t.Fatalf("reward calibrate exit %d: %s\n%.4000s", code, out, b.d.logs())
	}
	cert, err := os.ReadFile(filepath.Join(cal, "certificate.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, reward, "certificate.json", string(cert))
	b.d.stop()
	if err := b.d.start(); err != nil {
		t.Fatal(err)
	}
	out, _ = b.d.ctl(t, "reward", "contracts")
	for _, l := range mustJSON[[]map[string]any](t, out) {
		if l["name"] == "adv" {
			b.digest, _ = l["reward_contract_digest"].(string)
		}
	}
	if b.digest == "" {
		t.Fatalf("reward contracts lists no adv contract: %s", out)
	}
}

// env is the daemon's environment: the variables the backend's
// deployments name (passwords, tokens).
func (b *advBackend) env() []string { return b.envVars }

// pluginDir is the directory of customer plugins: the jsonl example is
// built once, beside the e2e plugins.
func (b *advBackend) pluginDir(t *testing.T) string {
	if b.name != "jsonl" {
		return ""
	}
	jsonlOnce.Do(func() {
		jsonlDir = filepath.Join(filepath.Dir(bins.pluginDir), "adv-plugins")
		cmd := exec.Command("go", "build", "-o", filepath.Join(jsonlDir, "verifier-adapter-jsonl"), "./examples/jsonl")
		cmd.Dir = "../sdk"
		if out, err := cmd.CombinedOutput(); err != nil {
			jsonlErr = fmt.Errorf("building sdk/examples/jsonl: %v\n%s", err, out)
		}
	})
	if jsonlErr != nil {
		t.Fatal(jsonlErr)
	}
	return jsonlDir
}

var (
	jsonlOnce sync.Once
	jsonlDir  string
	jsonlErr  error
)
