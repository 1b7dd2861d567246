package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestObserveThroughDaemon: the real daemon's /metrics moves with a Begin
// and a Verify through the sql adapter process, its console shows the
// double submit's task, and --log-json writes one line per call with no
// run parameter's value in it.
func TestObserveThroughDaemon(t *testing.T) {
	t.Parallel()
	c := newClinic(t)
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr, "--log-json", "--log-level", "info"}})
	const patient, note = "patient-observe-4711", "note-observe-2718"
	b := d.begin(t, c, patient, note)
	c.save(t, patient, note, 2)
	if v := d.verify(t, b.SessionID); v.Outcome != "RECONCILIATION_REQUIRED" {
		t.Fatalf("verify outcome %s, want RECONCILIATION_REQUIRED", v.Outcome)
	}

	get := func(path string) string {
		t.Helper()
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, body)
		}
		return string(body)
	}
	text := get("/metrics")
	for _, want := range []string{
		`verifierd_sessions_begun_total{outcome="BEGUN"} 1`,
		`verifierd_verify_duration_seconds_count 1`,
		// Both effects of the irreversible step are refuted: two tasks.
		`verifierd_reconciliation_tasks_issued_total 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	// The registered deployment's name labels its outcomes and verdicts.
	for _, re := range []string{`verifierd_sessions_verified_total\{deployment="[^"]+",outcome="RECONCILIATION_REQUIRED"\} 1$`,
		`verifierd_verdicts_total\{deployment="[^"]+",kind="sql",result="conflicting",tier="1",verdict="REFUTED"\} 2$`,
		`verifierd_plugin_starts_total\{kind="sql"\} [1-9]`, `verifierd_plugin_processes [1-9]`, `verifierd_store_size_bytes [1-9]`} {
		if !regexp.MustCompile(`(?m)^` + re).MatchString(text) {
			t.Errorf("metrics lack %s:\n%s", re, text)
		}
	}
	page := get("/console/sessions/" + b.SessionID)
	if !strings.Contains(page, "REMOVE_DUPLICATES") {
		t.Errorf("the console's session page lacks the task's suggested action:\n%s", page)
	}

	var lines int
	for line := range strings.SplitSeq(d.logs(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["session"] != b.SessionID {
			continue
		}
		lines++
		if strings.Contains(line, patient) || strings.Contains(line, note) {
			t.Errorf("a log line holds a run parameter's value: %s", line)
		}
		if l["duration_ms"] == nil || l["outcome"] == nil {
			t.Errorf("a log line lacks duration_ms or outcome: %s", line)
		}
	}
	if lines != 2 {
		t.Errorf("%d JSON log lines name the session, want 2 (Begin, Verify):\n%s", lines, d.logs())
	}
}
