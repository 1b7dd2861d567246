package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The MockMed reward contract over the demo clinic's SQLite store.
const (
	rewardContractYAML = `schema: verifierd.reward-contract/v1
id: mockmed-triage
version: "1"
deployment: mockmed
identity_keys: [patient_id]
components: [{name: terminal_effect, weight: 1}]
scoring: {wrong_effect_reward: 0.0}
certificate_policy: {epsilon: 0.05, delta: 0.05, threshold: 0.5, expiry_policy_updates: 1000}
`
	rewardRequiredYAML = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  expected_count: 1
  count_new_only: true
  timeout_s: 1
`
	rewardForbiddenYAML = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Discharge}
  expected_count: 1
  timeout_s: 1
`
)

func writeRewardContract(t *testing.T, dir, required string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "contract.yaml", rewardContractYAML)
	writeFile(t, dir, "required_effects.yaml", required)
	writeFile(t, dir, "forbidden_effects.yaml", rewardForbiddenYAML)
}

// TestRewardEndToEnd: calibrate through the daemon, install the
// certificate, and score episodes with verifyctl and over HTTP, against
// the clinic's real SQLite store.
func TestRewardEndToEnd(t *testing.T) {
	t.Parallel()
	c := newClinic(t)
	dir := t.TempDir()
	mockmed, contradictory := filepath.Join(dir, "mockmed"), filepath.Join(dir, "contradictory")
	writeRewardContract(t, mockmed, rewardRequiredYAML)
	writeRewardContract(t, contradictory, rewardRequiredYAML+`- kind: field_equals
  match: {patient_id: {param: patient_id}, type: Triage}
  field: type
  value: Radiology
`)
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{
		config: fmt.Sprintf("deployments:\n  mockmed: %s\nrewards:\n  mockmed: %s\n  contradictory: %s\n", c.deployment, mockmed, contradictory),
		args:   []string{"--http-listen", httpAddr},
	})

	// Calibration: 300 trials, no false accept, the exact bound.
	out, code := d.ctl(t, "reward", "calibrate", "--contract", "mockmed", "--out", filepath.Join(dir, "cal"))
	if code != 0 || !strings.Contains(out, `"epsilon": "0.0099361"`) || !strings.Contains(out, `"false_accepts": 0`) {
		t.Fatalf("calibrate exit %d: %s\n%s", code, out, d.logs())
	}
	// The contradictory contract is refused by its control trial.
	out, code = d.ctl(t, "reward", "calibrate", "--contract", "contradictory", "--out", filepath.Join(dir, "cal2"))
	if code != 3 || !strings.Contains(out, "calibration_refused") || !strings.Contains(out, "does not exercise the contract") {
		t.Fatalf("contradictory calibrate exit %d: %s", code, out)
	}
	cert, err := os.ReadFile(filepath.Join(dir, "cal", "certificate.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, mockmed, "certificate.json", string(cert))
	d.stop()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}

	// An honest episode through verifyctl: verified 1.0, certified.
	out, code = d.ctl(t, "episode", "register", "--contract", "mockmed", "--episode", "episode-0001", "--identity", "patient_id=patient-honest-0001")
	if code != 0 || !strings.Contains(out, `"baseline_reachable": true`) {
		t.Fatalf("register exit %d: %s\n%s", code, out, d.logs())
	}
	c.run(t, "save", c.path, "patient-honest-0001", "Triage", "Follow-up")
	out, code = d.ctl(t, "reward", "contracts")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed) != 2 || listed[1]["name"] != "mockmed" || listed[1]["certificate_id"] == "" {
		t.Fatalf("reward contracts exit %d: %s", code, out)
	}
	digest, _ := listed[1]["reward_contract_digest"].(string)
	desc := writeFile(t, dir, "descriptor.json", fmt.Sprintf(`{"episode_id": "episode-0001", "policy_checkpoint_id": "ckpt-0001", "policy_update": 0, "reward_contract_digest": %q}`, digest))
	out, code = d.ctl(t, "episode", "score", "--descriptor", desc)
	res := mustJSON[map[string]any](t, out)
	if code != 0 || res["reward_outcome"] != "verified" || res["scalar_reward"] != 1.0 || res["certified"] != true || res["development_only"] != false {
		t.Fatalf("score exit %d: %s\n%s", code, out, d.logs())
	}
	all := out
	// The receipt checks offline, and the ledger holds it.
	env := writeFile(t, dir, "reward-receipt.json", string(mustJSON[map[string]json.RawMessage](t, out)["envelope"]))
	key, _ := d.ctl(t, "key")
	keyFile := writeFile(t, dir, "key.json", key)
	if r, code := d.offline(t, "receipt", "verify", "--receipt", env, "--public-key", keyFile); code != 0 || !r.Valid {
		t.Errorf("receipt verify exit %d: %+v", code, r)
	}
	ledger, _ := d.ctl(t, "ledger", "export")
	ledgerFile := writeFile(t, dir, "ledger.jsonl", ledger)
	if r, code := d.offline(t, "ledger", "verify", "--file", ledgerFile, "--receipt", env); code != 0 {
		t.Errorf("ledger verify exit %d: %+v", code, r)
	}

	// The banner lie over HTTP: nothing written, wrong_effect 0.
	post := func(path, body string) (int, string) {
		resp, err := http.Post("http://"+httpAddr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	status, body := post("/v1/episodes", `{"contract": "mockmed", "episode_id": "episode-0002", "oracle_identity": {"patient_id": "patient-lie-0002"}}`)
	if status != 200 {
		t.Fatalf("POST /v1/episodes: %d %s", status, body)
	}
	status, body = post("/v1/rewards", fmt.Sprintf(`{"episode_id": "episode-0002", "policy_checkpoint_id": "ckpt-0001", "policy_update": 1, "reward_contract_digest": %q}`, digest))
	var scored struct {
		Receipt map[string]any `json:"receipt"`
	}
	if err := json.Unmarshal([]byte(body), &scored); status != 200 || err != nil || scored.Receipt["reward_outcome"] != "wrong_effect" || scored.Receipt["scalar_reward"] != 0.0 {
		t.Fatalf("POST /v1/rewards: %d %s", status, body)
	}
	all += body

	// The policy-update mark across a real restart and a renamed checkpoint:
	// 10^9 scores (expired, not certified); after a restart, 0 is refused.
	status, body = post("/v1/episodes", `{"contract": "mockmed", "episode_id": "episode-0003", "oracle_identity": {"patient_id": "patient-late-0003"}}`)
	if status != 200 {
		t.Fatalf("POST /v1/episodes: %d %s", status, body)
	}
	c.run(t, "save", c.path, "patient-late-0003", "Triage", "Late")
	status, body = post("/v1/rewards", fmt.Sprintf(`{"episode_id": "episode-0003", "policy_checkpoint_id": "ckpt-0001", "policy_update": 1000000000, "reward_contract_digest": %q}`, digest))
	if status != 200 || !strings.Contains(body, `"certificate_state":"expired"`) || !strings.Contains(body, `"certified":false`) || !strings.Contains(body, `"reward_outcome":"verified"`) {
		t.Fatalf("update 10^9: %d %s", status, body)
	}
	all += body
	d.stop()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	status, body = post("/v1/rewards", fmt.Sprintf(`{"episode_id": "episode-0004", "policy_checkpoint_id": "renamed-checkpoint", "policy_update": 0, "reward_contract_digest": %q, "oracle_identity": {"patient_id": "patient-new-0004"}}`, digest))
	if status != 422 || !strings.Contains(body, `"error":"policy_update_regressed"`) {
		t.Fatalf("update 0 after a restart: %d %s", status, body)
	}
	all += body
	for _, s := range []string{"patient-honest-0001", "patient-lie-0002", "patient-late-0003", "patient-new-0004", "Triage", "Follow-up", "Late"} {
		if strings.Contains(all, s) {
			t.Errorf("a response contains %q", s)
		}
	}
	d.stop()

	// The mockmed certificate in another contract's directory: the daemon
	// refuses to start, naming the file and the rule.
	other := filepath.Join(dir, "radiology")
	writeRewardContract(t, other, strings.Replace(rewardRequiredYAML, "Triage", "Radiology", 1))
	writeFile(t, other, "certificate.json", string(cert))
	// The same data dir: the same daemon key signed the certificate.
	bad := &daemon{addr: freeAddr(t), dataDir: d.dataDir}
	cfg := writeFile(t, dir, "bad.yaml", fmt.Sprintf("deployments:\n  mockmed: %s\nrewards:\n  radiology: %s\n", c.deployment, other))
	bad.args = []string{"--listen", bad.addr, "--data-dir", bad.dataDir, "--config", cfg}
	if err := bad.start(); err == nil || !strings.Contains(err.Error(), "certificate_contract_mismatch") || !strings.Contains(err.Error(), "certificate.json") {
		bad.stop()
		t.Fatalf("a foreign certificate: %v", err)
	}
}
