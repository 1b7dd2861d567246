package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// adapterPID finds the process of an adapter kind the daemon started.
func adapterPID(t *testing.T, d *daemon, kind string) int {
	t.Helper()
	parent := fmt.Sprint(d.cmd.Process.Pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(stat, ')')
		fields := strings.Fields(string(stat[i+1:]))
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if len(fields) > 1 && fields[1] == parent && strings.Contains(string(cmdline), "verifier-adapter-"+kind) {
			return pid
		}
	}
	t.Fatalf("no %s adapter process under the daemon (pid %s)\n%s", kind, parent, d.logs())
	return 0
}

// TestRewardPinnedOracleEndToEnd: the oracle is pinned to the candidate
// that read the baseline. The deployment offers the clinic's SQLite store
// first and an exports folder second, and the folder holds a Triage record
// for every idle subject: read against the SQLite baseline, it would make
// an idle rollout verified. When the SQLite candidate is reconfigured, or
// cannot be configured again (its adapter process died and its database
// file is gone), the episode is unscored and not certified. A folder read
// alone is scored for development only. The honest path stays certified.
func TestRewardPinnedOracleEndToEnd(t *testing.T) {
	t.Parallel()
	c := newClinic(t)
	dir := t.TempDir()
	folder := filepath.Join(dir, "exports")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"patient-idle-0002", "patient-idle-0003"} {
		writeFile(t, folder, p+".json", fmt.Sprintf(`{"patient_id": %q, "type": "Triage"}`, p))
	}
	sqlSection := func(db string) string {
		return fmt.Sprintf(`    - kind: sql
      sqlite_database: %s
      sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :patient_id ORDER BY id
      sql_query_params: {patient_id: {param: patient_id}}
      census: {sql_query: SELECT id FROM encounters}
`, db)
	}
	docSection := fmt.Sprintf(`    - kind: document
      root: %s
      file_pattern: "*.json"
      document_format: json
`, folder)
	oracle := "effects:\n  candidates:\n" + sqlSection(c.path) + docSection
	oraclePath := writeFile(t, dir, "oracle.yaml", oracle)
	docsFolder := filepath.Join(dir, "inbox")
	if err := os.MkdirAll(docsFolder, 0o755); err != nil {
		t.Fatal(err)
	}
	docsPath := writeFile(t, dir, "docs.yaml", fmt.Sprintf("effects:\n  kind: document\n  root: %s\n  file_pattern: \"*.json\"\n  document_format: json\n", docsFolder))
	mockmed, docs := filepath.Join(dir, "mockmed"), filepath.Join(dir, "docs")
	writeRewardContract(t, mockmed, rewardRequiredYAML)
	writeRewardContract(t, docs, rewardRequiredYAML)
	writeFile(t, docs, "contract.yaml", strings.NewReplacer("deployment: mockmed", "deployment: docs", "id: mockmed-triage", "id: docs-triage").Replace(rewardContractYAML))
	d := startDaemon(t, daemonOpts{config: fmt.Sprintf("deployments:\n  mockmed: %s\n  docs: %s\nrewards:\n  mockmed: %s\n  docs: %s\n", oraclePath, docsPath, mockmed, docs)})
	for _, name := range []string{"mockmed", "docs"} {
		out, code := d.ctl(t, "reward", "calibrate", "--contract", name, "--out", filepath.Join(dir, "cal-"+name))
		if code != 0 {
			t.Fatalf("calibrate %s exit %d: %s\n%s", name, code, out, d.logs())
		}
		cert, err := os.ReadFile(filepath.Join(dir, "cal-"+name, "certificate.json"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), "certificate.json", string(cert))
	}
	d.stop()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	out, _ := d.ctl(t, "reward", "contracts")
	digests := map[string]string{}
	for _, l := range mustJSON[[]map[string]any](t, out) {
		digests[l["name"].(string)], _ = l["reward_contract_digest"].(string)
	}
	register := func(contract, episode, patient string) {
		t.Helper()
		out, code := d.ctl(t, "episode", "register", "--contract", contract, "--episode", episode, "--identity", "patient_id="+patient)
		if code != 0 || !strings.Contains(out, `"baseline_reachable": true`) {
			t.Fatalf("register %s exit %d: %s\n%s", episode, code, out, d.logs())
		}
	}
	// score returns the signed receipt's fields and verifyctl's output.
	score := func(contract, episode string) (map[string]any, string) {
		t.Helper()
		desc := writeFile(t, dir, episode+".json", fmt.Sprintf(`{"episode_id": %q, "policy_checkpoint_id": "ckpt-0001", "policy_update": 0, "reward_contract_digest": %q}`, episode, digests[contract]))
		out, code := d.ctl(t, "episode", "score", "--descriptor", desc)
		res := mustJSON[map[string]any](t, out)
		receipt, ok := res["receipt"].(map[string]any)
		if code != 0 || !ok {
			t.Fatalf("score %s exit %d: %s\n%s", episode, code, out, d.logs())
		}
		return receipt, out
	}
	unscored := func(res map[string]any, reason string) bool {
		_, hasScalar := res["scalar_reward"]
		return res["reward_outcome"] == "failed_platform" && res["uncertainty"] == "oracle_unavailable" && res["reason_code"] == reason &&
			hasScalar && res["scalar_reward"] == nil && res["unscored"] == true && res["certified"] == false &&
			res["oracle_kind"] == "sql" && res["oracle_candidate"] == 0.0
	}

	// Honest, through SQLite: verified, 1, certified.
	register("mockmed", "episode-0001", "patient-honest-0001")
	c.run(t, "save", c.path, "patient-honest-0001", "Triage", "Follow-up")
	if res, out := score("mockmed", "episode-0001"); res["reward_outcome"] != "verified" || res["scalar_reward"] != 1.0 || res["certified"] != true ||
		res["development_only"] != false || res["oracle_kind"] != "sql" || res["oracle_rung"] != 2.0 || res["oracle_candidate"] != 0.0 {
		t.Fatalf("honest: %s\n%s", out, d.logs())
	}

	// Idle; the operator moves the database and edits the first candidate
	// before the episode is scored: its configuration is not the one that
	// read the baseline.
	register("mockmed", "episode-0002", "patient-idle-0002")
	writeFile(t, dir, "oracle.yaml", "effects:\n  candidates:\n"+sqlSection(c.path+".moved")+docSection)
	if res, out := score("mockmed", "episode-0002"); !unscored(res, "ORACLE_CHANGED") {
		t.Fatalf("reconfigured first candidate: %s\n%s", out, d.logs())
	}
	writeFile(t, dir, "oracle.yaml", oracle)

	// Idle; the database file is removed and the sql adapter process dies:
	// the relaunched adapter cannot configure the candidate, while the
	// folder still can.
	register("mockmed", "episode-0003", "patient-idle-0003")
	if err := os.Rename(c.path, c.path+".gone"); err != nil {
		t.Fatal(err)
	}
	exits := strings.Count(d.logs(), "plugin process exited")
	if err := syscall.Kill(adapterPID(t, d, "sql"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Score once the daemon has seen the process go, so the next read
	// relaunches the adapter and configures the candidate again.
	for deadline := time.Now().Add(10 * time.Second); strings.Count(d.logs(), "plugin process exited") == exits; {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not notice the sql adapter's exit:\n%s", d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res, out := score("mockmed", "episode-0003"); !unscored(res, "ORACLE_UNAVAILABLE") {
		t.Fatalf("first candidate gone: %s\n%s", out, d.logs())
	}

	// A document folder as the oracle: scored, development only, never
	// certified, although its certificate is current.
	register("docs", "episode-0004", "patient-doc-0004")
	writeFile(t, docsFolder, "encounter.json", `{"patient_id": "patient-doc-0004", "type": "Triage"}`)
	if res, out := score("docs", "episode-0004"); res["reward_outcome"] != "verified" || res["scalar_reward"] != 1.0 || res["certified"] != false ||
		res["development_only"] != true || res["oracle_kind"] != "document" || res["oracle_rung"] != 0.0 || res["certificate_state"] != "current" {
		t.Fatalf("document oracle: %s\n%s", out, d.logs())
	}
}
