package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The record application's accounts (internal/testservers/recordapp).
const (
	readerUser     = "records-reader"
	readerPassword = "reader-pass-7c1"
	clerkUser      = "clerk"
	clerkPassword  = "clerk-pass-4e9"
)

var recordappBuild struct {
	once sync.Once
	path string
	err  error
}

// recordApp is the ui_readback tests' record application, run as its own
// process on loopback.
type recordApp struct {
	url string
	cmd *exec.Cmd
}

func startRecordApp(t *testing.T) *recordApp {
	t.Helper()
	recordappBuild.once.Do(func() {
		recordappBuild.path = filepath.Join(bins.dir, "recordapp")
		out, err := exec.Command("go", "build", "-o", recordappBuild.path, "../internal/testservers/recordapp/cmd/recordapp").CombinedOutput()
		if err != nil {
			recordappBuild.err = fmt.Errorf("building recordapp: %v\n%s", err, out)
		}
	})
	if recordappBuild.err != nil {
		t.Fatal(recordappBuild.err)
	}
	cmd := exec.Command(recordappBuild.path, "-listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "recordapp listening on ")
	if err != nil || !ok {
		t.Fatalf("recordapp did not start: %q %v", line, err)
	}
	return &recordApp{url: u, cmd: cmd}
}

// clerk signs in through the sign-in form, as the automation's screen does,
// and writes through the application's API.
func (a *recordApp) clerk(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := c.PostForm(a.url+"/login", url.Values{"username": {clerkUser}, "password": {clerkPassword}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return c
}

func (a *recordApp) post(t *testing.T, c *http.Client, path string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := c.Post(a.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode >= 300 {
		t.Fatalf("POST %s: %s", path, res.Status)
	}
}

// signIns counts the sign-in POSTs the application has received.
func (a *recordApp) signIns(t *testing.T) int {
	t.Helper()
	res, err := http.Get(a.url + "/api/requests")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var log []struct {
		Method string `json:"method"`
		Path   string `json:"path"`
	}
	if err := json.NewDecoder(res.Body).Decode(&log); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range log {
		if r.Method == "POST" && r.Path == "/login" {
			n++
		}
	}
	return n
}

// uiReadbackDeployment writes the ui_readback tests' deployment, reading
// app's encounters page, into dir.
func uiReadbackDeployment(t *testing.T, dir string, app *recordApp) string {
	t.Helper()
	return writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: ui_readback
  # One patient's page: new means newly matching it (a reviewed risk).
  newness: newly_matching
  ui_readback:
    record_url: "%[1]s/patients/{patient}/encounters"
    url_params: {patient: {param: patient_id}}
    sign_in:
      url: %[1]s/login
      username_selector: "#username"
      password_selector: "#password"
      submit_selector: "button[type=submit]"
      signed_in_selector: "#user-menu"
      username_env: UIRB_USER
      password_env: UIRB_PASSWORD
    ready_selector: "#encounters"
    empty_selector: "#no-encounters"
    not_found_selector: "#not-found"
    row_selector: "tr.encounter"
    fields:
      id: {attribute: data-id}
      type: {selector: td.type, casefold: true}
      date: {selector: td.date, date_format: "%%d/%%m/%%Y"}
      note: {selector: td.note}
    identity:
      reader: {selector: "#patient-mrn"}
      value: {param: patient_id}
      field: patient_id
    navigation_timeout_s: 10
`, app.url))
}

// TestUIReadback: begin -> the automation saves (or not) through the record
// application -> verify, through the real daemon and the real
// verifier-adapter-ui_readback driving a headless Chromium.
func TestUIReadback(t *testing.T) {
	app := startRecordApp(t)
	d := startDaemon(t, daemonOpts{
		config: "secrets:\n  allow: [UIRB_*]\n",
		env:    []string{"UIRB_USER=" + readerUser, "UIRB_PASSWORD=" + readerPassword},
	})
	dir := t.TempDir()
	deployment := uiReadbackDeployment(t, dir, app)
	effects := writeFile(t, dir, "effects.yaml", `
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
	// The same contracts with a settlement window far longer than a read:
	// a rejected credential ends the polling at once, not after it.
	raw, err := os.ReadFile(effects)
	if err != nil {
		t.Fatal(err)
	}
	longEffects := writeFile(t, dir, "effects-long.yaml", strings.ReplaceAll(string(raw), "timeout_s: 2", "timeout_s: 60"))
	clerk := app.clerk(t)
	const note = "Follow-up in 2 weeks"

	tests := []struct {
		name string
		save bool
		// note is the run's note and the one saved (note when empty).
		note string
		// reject makes the application reject the read-back account's
		// credential from the moment the session has begun.
		reject  bool
		want    string
		observe int
	}{
		{"correct save verified at tier 2", true, "", false,
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL", 1},
		{"missing row needs reconciliation, never halts", false, "", false,
			"RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_UNDER REFUTED/conflicting/FIELD_NO_MATCH", 0},
		{"two spaces the page collapses still verify", true, "Follow-up  in 2  weeks", false,
			"VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL", 1},
		{"a rejected credential is tried once, then restore access", true, "", true,
			"RECONCILIATION_REQUIRED INDETERMINATE/unavailable/ACCESS_REJECTED INDETERMINATE/unavailable/ACCESS_REJECTED", -1},
	}
	var outputs []string
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runNote := tt.note
			if runNote == "" {
				runNote = note
			}
			patient := fmt.Sprintf("e%d", i)
			app.post(t, http.DefaultClient, "/api/patients", map[string]string{"id": patient})
			app.post(t, clerk, "/api/encounters", map[string]string{"patient_id": patient, "type": "Vitals", "note": "BP 120/80", "date": "2026-05-05"})
			stepEffects := effects
			if tt.reject {
				stepEffects = longEffects
			}
			out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, deployment), "--effects", stepEffects, "--param", "patient_id="+patient, "--param", "note="+runNote)
			outputs = append(outputs, out)
			if code != 0 {
				t.Fatalf("begin exit %d: %s\ndaemon log:\n%s", code, out, d.logs())
			}
			b := mustJSON[beginOutput](t, out)
			for _, e := range b.Effects {
				if e.Tier != 2 || e.Candidate != "ui_readback" {
					t.Errorf("begin effect %+v; want tier 2 through ui_readback", e)
				}
			}
			if tt.save {
				app.post(t, clerk, "/api/encounters", map[string]string{"patient_id": patient, "type": "Triage", "note": runNote, "date": "2026-05-06"})
			}
			if tt.reject {
				app.post(t, http.DefaultClient, "/api/faults", map[string]bool{"reject_reader": true})
				defer app.post(t, http.DefaultClient, "/api/faults", map[string]bool{})
			}
			signIns := app.signIns(t)
			start := time.Now()
			v := d.verify(t, b.SessionID)
			took := time.Since(start)
			raw, _ := json.Marshal(v)
			outputs = append(outputs, string(raw))
			if got := v.summary(); got != tt.want {
				t.Errorf("verify = %s\nwant     %s\ndaemon log:\n%s", got, tt.want, d.logs())
			}
			for _, e := range v.Effects {
				if e.Tier != 2 || e.Substrate != "ui_readback" {
					t.Errorf("verdict tier/substrate = %d/%s; want 2/ui_readback", e.Tier, e.Substrate)
				}
			}
			if !tt.reject {
				if n := v.Effects[0].ObservedCount; n == nil || *n != tt.observe {
					t.Errorf("observed_count = %v; want %d", n, tt.observe)
				}
				return
			}
			// The rejected credential is tried once, and the daemon stops
			// reading at once instead of waiting out timeout_s (60).
			if n := app.signIns(t) - signIns; n != 1 {
				t.Errorf("%d sign-ins during the verification; want 1", n)
			}
			if took > 30*time.Second {
				t.Errorf("verify took %v with a rejected credential; want it answered at once, not after the 60 s settlement window", took)
			}
			var task struct {
				SuggestedAction string `json:"suggested_action"`
			}
			if err := json.Unmarshal(v.Effects[0].ReconciliationTask, &task); err != nil || task.SuggestedAction != "RESTORE_ACCESS" {
				t.Errorf("task %s (%v); want RESTORE_ACCESS", v.Effects[0].ReconciliationTask, err)
			}
			if msg := v.Effects[0].Reasons[0].Message; !strings.Contains(msg, "restore the account's access") {
				t.Errorf("reason %q; want it to say to restore the account's access", msg)
			}
		})
	}
	d.stop()
	for _, s := range append(outputs, d.logs()) {
		if strings.Contains(s, readerPassword) {
			t.Error("the read-back password appears in a response or the daemon log")
		}
	}
}
