package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the shell block of README.md between the markers
// <!-- name:begin --> and <!-- name:end -->, without its ``` fence.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- "+name+":begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("README.md has no block between <!-- %s:begin --> and <!-- %s:end -->", name, name)
	}
	block = strings.TrimSpace(block)
	if !strings.HasPrefix(block, "```sh\n") || !strings.HasSuffix(block, "\n```") {
		t.Fatalf("the %s block of README.md is not one ```sh fence:\n%s", name, block)
	}
	return strings.TrimSuffix(strings.TrimPrefix(block, "```sh\n"), "```")
}

// TestReadmeHTTPWalkthrough runs the README's HTTP/JSON walk-through as
// written (runReadmeBlock). Each answer is then checked: Verify's outcome at
// the top, unprefixed values, a count as a number and the matched record and
// the receipt as objects; Judge over records given as objects; the inline
// deployment refused with PermissionDenied.
func TestReadmeHTTPWalkthrough(t *testing.T) {
	answers := runReadmeBlock(t, "http-walkthrough")
	if len(answers) != 3 {
		t.Fatalf("%d answers, want 3 (verify, judge, the refused begin): %v", len(answers), answers)
	}
	verify, judged, refused := answers[0], answers[1], answers[2]

	if verify["outcome"] != "VERIFIED" || verify["terminalOutcome"] != "VERIFIED" || verify["result"] != nil {
		t.Errorf("verify: outcome %v, terminalOutcome %v (and no nested result), want VERIFIED at the top: %v", verify["outcome"], verify["terminalOutcome"], verify)
	}
	effects, _ := verify["effects"].([]any)
	if len(effects) != 2 {
		t.Fatalf("verify: %d effects, want 2: %v", len(effects), verify)
	}
	first, _ := effects[0].(map[string]any)
	matched, _ := first["matchedRecords"].([]any)
	rec, _ := firstOf(matched).(map[string]any)
	if first["verdict"] != "CONFIRMED" || first["result"] != "confirmed" || first["observedCount"] != 1.0 || first["expectedCount"] != 1.0 ||
		len(matched) != 1 || rec["patient_id"] != "p2" || rec["type"] != "Triage" {
		t.Errorf("verify: the record_written effect is %v, want CONFIRMED, confirmed, count 1 as a number and the record p2 as an object", first)
	}
	if _, isNumber := rec["id"].(float64); !isNumber {
		t.Errorf("verify: the matched record's id is %#v, want a JSON number", rec["id"])
	}
	if step, _ := verify["registeredStep"].(map[string]any); step["workflow"] != "triage" || step["step"] != "save_triage" {
		t.Errorf("verify: registeredStep %v", verify["registeredStep"])
	}
	receipt, _ := verify["receipt"].(map[string]any)
	if receipt["payloadType"] != "application/vnd.verifierd.verdict-receipt.v1+json" || receipt["payload"] == "" {
		t.Errorf("verify: receipt %v, want the DSSE envelope as an object", verify["receipt"])
	}

	jeffects, _ := judged["effects"].([]any)
	je, _ := firstOf(jeffects).(map[string]any)
	jmatched, _ := je["matchedRecords"].([]any)
	if judged["outcome"] != "VERIFIED" || je["verdict"] != "CONFIRMED" || je["observedCount"] != 1.0 ||
		len(jmatched) != 1 || jmatched[0].(map[string]any)["id"] != 7.0 {
		t.Errorf("judge: %v, want VERIFIED with the record {id: 7} matched", judged)
	}

	details, _ := json.Marshal(refused["details"])
	if refused["code"] != 7.0 || !strings.Contains(string(details), "inline_deployment_refused") {
		t.Errorf("the inline deployment: %v, want code 7 (PermissionDenied) with rule inline_deployment_refused", refused)
	}
}

func firstOf(xs []any) any {
	if len(xs) == 0 {
		return nil
	}
	return xs[0]
}

// waitHTTP waits until the HTTP listener at addr answers /health.
func waitHTTP(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get("http://" + addr + "/health"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the HTTP listener on %s did not answer /health", addr)
}

// runReadmeBlock runs the README block name as written: a daemon started
// as `make run` starts it (the demo's daemon config, a freshly initialised
// clinic database under .cache/demo, the binaries under .cache/bin, the
// working directory being the checkout's root) and the block's commands in
// bash, with only the listener's address changed to a free port. It
// returns what the block printed, one JSON object per answer.
func runReadmeBlock(t *testing.T, name string) []map[string]any {
	t.Helper()
	script := readmeBlock(t, name)
	if !strings.Contains(script, "http://127.0.0.1:7444") {
		t.Fatalf("the %s block no longer calls the default listener http://127.0.0.1:7444:\n%s", name, script)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".cache", "demo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bins.dir, filepath.Join(root, ".cache", "bin")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(bins.dir, "clinic"), "init", filepath.Join(root, ".cache", "demo", "clinic.db")).CombinedOutput(); err != nil {
		t.Fatalf("clinic init: %v\n%s", err, out)
	}
	config, err := filepath.Abs("../examples/demo/daemon.yaml")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := freeAddr(t)
	d := &daemon{addr: freeAddr(t), dir: root}
	d.args = []string{"--listen", d.addr, "--http-listen", httpAddr, "--data-dir", filepath.Join(root, ".cache", "demo", "data"),
		"--plugin-dir", bins.pluginDir, "--config", config}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	waitHTTP(t, httpAddr)

	cmd := exec.Command("bash", "-euo", "pipefail", "-c", strings.ReplaceAll(script, "127.0.0.1:7444", httpAddr))
	cmd.Dir = root
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the %s block failed: %v\nstdout:\n%s\nstderr:\n%s\ndaemon log:\n%.4000s", name, err, stdout.String(), stderr.String(), d.logs())
	}

	// The answers, one JSON document per curl.
	var answers []map[string]any
	dec := json.NewDecoder(&stdout)
	for {
		var a map[string]any
		if err := dec.Decode(&a); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("answer %d is not a JSON object: %v\n%s", len(answers), err, stdout.String())
		}
		answers = append(answers, a)
	}
	return answers
}

// TestReadmeRunWalkthrough runs the README's walk-through of a run as
// written (runReadmeBlock): the follow-up begun before the triage is
// refused as out of order, the follow-up with a triage_id of the caller's
// is refused, and the run, its two steps verified, is sealed VERIFIED with
// a run receipt.
func TestReadmeRunWalkthrough(t *testing.T) {
	answers := runReadmeBlock(t, "run-walkthrough")
	if len(answers) != 3 {
		t.Fatalf("%d answers, want 3 (the out-of-order begin, the forged handoff, finish): %v", len(answers), answers)
	}
	early, forged, finished := answers[0], answers[1], answers[2]
	if msg, _ := early["message"].(string); early["code"] == nil || !strings.Contains(msg+fmt.Sprint(early["details"]), "step_out_of_order") {
		t.Errorf("the follow-up before the triage: %v, want a refusal saying step_out_of_order", early)
	}
	if msg, _ := forged["message"].(string); forged["code"] == nil || !strings.Contains(msg, "triage_id") {
		t.Errorf("the follow-up with the caller's triage_id: %v, want a refusal naming triage_id", forged)
	}
	run, _ := finished["run"].(map[string]any)
	steps, _ := run["steps"].([]any)
	if run["outcome"] != "VERIFIED" || run["state"] != "sealed" || run["attempt"] != 1.0 || len(steps) != 2 {
		t.Fatalf("finish: %v, want the run sealed VERIFIED at attempt 1 with two steps", finished)
	}
	for i, name := range []string{"triage", "follow_up"} {
		s, _ := steps[i].(map[string]any)
		if s["step"] != name || s["outcome"] != "VERIFIED" || s["sessionId"] == "" {
			t.Errorf("step %d: %v, want %s VERIFIED with its session", i, s, name)
		}
	}
	rc, _ := finished["receipt"].(map[string]any)
	if rc["payloadType"] != "application/vnd.verifierd.run-receipt.v1+json" || rc["payload"] == "" {
		t.Errorf("finish: receipt %v, want the run receipt's DSSE envelope as an object", finished["receipt"])
	}
}
