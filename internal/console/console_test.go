package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/console"
	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/runs"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// table is an in-memory system of record read by tableAdapter, in process.
type table struct {
	mu   sync.Mutex
	rows []sdk.Record
}

// keepFirst drops every row of patient but the first (a person's repair of
// a double submit).
func (t *table) keepFirst(patient string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := false
	kept := t.rows[:0]
	for _, r := range t.rows {
		if r["patient"] == patient {
			if seen {
				continue
			}
			seen = true
		}
		kept = append(kept, r)
	}
	t.rows = kept
}

func (t *table) add(r sdk.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, r)
}

type tableAdapter struct{ t *table }

func (a tableAdapter) Info() sdk.Info {
	return sdk.Info{Kind: "console-test", Tier: sdk.TierIndependentSystem}
}
func (tableAdapter) Configure(context.Context, sdk.ConfigureRequest) error { return nil }
func (tableAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true}, nil
}
func (a tableAdapter) read() (sdk.Capture, error) {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	return sdk.Capture{Reachable: true, Records: sdk.Records(append([]sdk.Record(nil), a.t.rows...)...)}, nil
}
func (a tableAdapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read()
}
func (a tableAdapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read()
}

const (
	token = "console-test-token"
	// ssn is a redacted field's value: it must appear in no page.
	ssn     = "987-65-4321"
	effects = `[{"kind": "record_written", "match": {"patient": {"param": "patient"}}, "count_new_only": true, "risk": "irreversible", "timeout_s": 0}]`
)

// fixture is a daemon's HTTP listener over a real session manager and store
// with one in-process adapter, two sessions verified through it: a double
// submit (RECONCILIATION_REQUIRED) and a single write (VERIFIED).
type fixture struct {
	srv     *httptest.Server
	dup, ok string
	tab     *table
	mgr     *session.Manager
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	depPath := filepath.Join(dir, "intake.yaml")
	// The in-process table is read whole: the operator declares it.
	if err := os.WriteFile(depPath, []byte("effects:\n  kind: console-test\n  evidence_redact_fields: [ssn]\n  newness: whole_read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tab := &table{}
	mets := metrics.New(prometheus.NewRegistry())
	host, err := pluginhost.New(pluginhost.Options{Events: mets})
	if err != nil {
		t.Fatal(err)
	}
	host.RegisterInProcess("console-test", func() sdk.Adapter { return tableAdapter{tab} })
	st, err := bolt.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); st.Close() })
	// The sessions here send their own effects, as an operator allows.
	noRegistered := false
	wf, err := workflow.Parse([]byte(runWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := session.New(session.Options{Host: host, Store: st, Daemon: &config.Daemon{Deployments: map[string]string{"intake": depPath},
		Policy: &workflow.Policy{RequireRegisteredContracts: &noRegistered}},
		PollInterval: 5 * time.Millisecond, Metrics: mets, Workflows: map[string]*workflow.Workflow{"intake-run": wf}})
	if err != nil {
		t.Fatal(err)
	}

	api := httpapi.New(token)
	api.Handle("GET /metrics", mets.Handler().ServeHTTP)
	(&console.Console{Manager: mgr, Store: st}).Register(api)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, tab: tab, mgr: mgr}

	ctx := context.Background()
	run := func(patient string, writes int) string {
		b, err := mgr.Begin(ctx, session.BeginRequest{DeploymentName: "intake", Effects: []byte(effects), Params: map[string]string{"patient": patient}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range writes {
			tab.add(sdk.Record{"id": json.Number(fmt.Sprint(len(patient)*10 + i)), "patient": patient, "ssn": ssn})
		}
		if _, err := mgr.Verify(ctx, b.SessionID); err != nil {
			t.Fatal(err)
		}
		return b.SessionID
	}
	f.dup = run("p-dup", 2)
	f.ok = run("p-single", 1)
	return f
}

// get fetches a path with the token.
func (f *fixture) get(t *testing.T, method, path string, withToken bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if withToken {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// /metrics sits behind the token and its counters moved with the two
// sessions.
func TestMetricsAfterBeginAndVerify(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if code, _ := f.get(t, "GET", "/metrics", false); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token: %d, want 401", code)
	}
	code, text := f.get(t, "GET", "/metrics", true)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{
		`verifierd_sessions_begun_total{outcome="BEGUN"} 2`,
		`verifierd_sessions_verified_total{deployment="intake",outcome="VERIFIED"} 1`,
		`verifierd_sessions_verified_total{deployment="intake",outcome="RECONCILIATION_REQUIRED"} 1`,
		`verifierd_verdicts_total{deployment="intake",kind="console-test",result="confirmed",tier="1",verdict="CONFIRMED"} 1`,
		`verifierd_verdicts_total{deployment="intake",kind="console-test",result="conflicting",tier="1",verdict="REFUTED"} 1`,
		`verifierd_begin_duration_seconds_count 2`,
		`verifierd_verify_duration_seconds_count 2`,
		`verifierd_reconciliation_tasks_issued_total 1`,
		// Two sessions with other run parameters share one adapter process.
		`verifierd_plugin_starts_total{kind="console-test"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, text)
		}
	}
}

// The console has GET routes only, behind the token.
func TestConsoleIsReadOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	paths := []string{"/console/", "/console/sessions/" + f.dup, "/console/reconciliation"}
	for _, p := range paths {
		if code, _ := f.get(t, "GET", p, false); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, code)
		}
		for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			if code, _ := f.get(t, m, p, true); code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, p, code)
			}
		}
	}
	if code, _ := f.get(t, "GET", "/console/sessions/ses_nope", true); code != http.StatusNotFound {
		t.Errorf("an unknown session: %d, want 404", code)
	}
	// Filters are query parameters.
	_, page := f.get(t, "GET", "/console/?outcome=VERIFIED", true)
	if !strings.Contains(page, f.ok) || strings.Contains(page, f.dup) {
		t.Errorf("?outcome=VERIFIED does not list exactly the verified session:\n%s", page)
	}
	_, page = f.get(t, "GET", "/console/?deployment=intake&tier=1", true)
	if !strings.Contains(page, f.ok) || !strings.Contains(page, f.dup) {
		t.Errorf("?deployment=intake&tier=1 misses a session:\n%s", page)
	}
	_, page = f.get(t, "GET", "/console/?tier=3", true)
	if strings.Contains(page, f.ok) || strings.Contains(page, f.dup) {
		t.Errorf("?tier=3 lists a tier-1 session:\n%s", page)
	}
}

// A VERIFIED re-verification takes the session off the reconciliation
// queue and closes its task in the metrics; the session page shows both
// results.
func TestRepairedSessionLeavesTheQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, page := f.get(t, "GET", "/console/reconciliation", true); !strings.Contains(page, f.dup) {
		t.Fatalf("the queue lacks the double submit:\n%s", page)
	}
	f.tab.keepFirst("p-dup")
	rv, err := f.mgr.Reverify(context.Background(), f.dup, "deleted the duplicate by hand")
	if err != nil || rv.Outcome != judge.Verified {
		t.Fatalf("reverify = %v, %v; want VERIFIED", rv, err)
	}
	if _, page := f.get(t, "GET", "/console/reconciliation", true); strings.Contains(page, f.dup) || !strings.Contains(page, "No open tasks.") {
		t.Errorf("the repaired session is still queued:\n%s", page)
	}
	if _, page := f.get(t, "GET", "/console/sessions/"+f.dup, true); !strings.Contains(page, "Re-verification 1: deleted the duplicate by hand") {
		t.Errorf("the session page lacks the re-verification:\n%s", page)
	}
	_, text := f.get(t, "GET", "/metrics", true)
	for _, want := range []string{"verifierd_reconciliation_tasks_issued_total 1\n", "verifierd_reconciliation_tasks_closed_total 1\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

var chromiumPaths = []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"}

// The pages render in Debian's Chromium: the double submit shows its task
// and suggested action, the redacted field only its marker, and no page
// has a form. A screenshot of each page is written for a person to look
// at (into $VERIFIERD_CONSOLE_SHOTS too when set).
func TestConsoleInChromium(t *testing.T) {
	exe := ""
	for _, p := range chromiumPaths {
		if _, err := os.Stat(p); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		testservers.Missing(t, "Chromium", "apt-get install chromium")
	}
	f := newFixture(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()
	// The browser sends the bearer token like any client: the console has
	// no login of its own.
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + token}}); err != nil {
		t.Fatal(err)
	}

	shots := t.TempDir()
	extra := os.Getenv("VERIFIERD_CONSOLE_SHOTS")
	form := regexp.MustCompile(`(?i)<form|method=["']?post|<script`)
	pages := []struct {
		name, path string
		want       []string
		not        []string
	}{
		{"sessions", "/console/", []string{f.dup, f.ok, "RECONCILIATION_REQUIRED", "VERIFIED", "intake"}, nil},
		{"session-duplicate", "/console/sessions/" + f.dup, []string{"RECONCILIATION_REQUIRED", judge.ActionRemoveDuplicates, judge.RedactedMarker, "COUNT_OVER", "conflicting"}, nil},
		{"session-verified", "/console/sessions/" + f.ok, []string{"VERIFIED", "CONFIRMED", judge.RedactedMarker}, []string{judge.ActionRemoveDuplicates}},
		{"reconciliation", "/console/reconciliation", []string{f.dup, judge.ActionRemoveDuplicates}, []string{f.ok}},
	}
	for _, p := range pages {
		if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		title, err := chromedp.Run(ctx, chromedp.Title())
		if err != nil {
			t.Fatal(err)
		}
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(png), "\x89PNG") {
			t.Fatalf("%s: the screenshot is not a PNG", p.name)
		}
		if !strings.Contains(title, "verifierd") {
			t.Errorf("%s: title %q, want the console's page (not an error body)", p.name, title)
		}
		for _, w := range p.want {
			if !strings.Contains(html, w) {
				t.Errorf("%s: the page lacks %q", p.name, w)
			}
		}
		for _, n := range append(p.not, ssn) {
			if strings.Contains(html, n) {
				t.Errorf("%s: the page shows %q", p.name, n)
			}
		}
		if m := form.FindString(html); m != "" {
			t.Errorf("%s: the page has %q; the console only shows", p.name, m)
		}
		for _, dir := range []string{shots, extra} {
			if dir == "" {
				continue
			}
			path := filepath.Join(dir, "console-"+p.name+".png")
			if err := os.WriteFile(path, png, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot of %s: %s", p.path, path)
		}
	}
}

// The session page says how each effect's read proved newness and what its
// loss checks saw.
func TestSessionPageShowsNewness(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	code, page := f.get(t, "GET", "/console/sessions/"+f.ok, true)
	if code != http.StatusOK || !strings.Contains(page, "<th>Newness</th><td>whole_read_declared; loss checked over the collection</td>") {
		t.Errorf("session page (%d) does not show the newness:\n%s", code, page)
	}
}

// runWorkflow is a two-step workflow over the console-test adapter: save
// writes the patient's record, confirm (after save) its confirmation.
const runWorkflow = `schema: verifierd.workflow/v1
name: intake-run
params:
  patient: {}
steps:
  - step: save
    risk: irreversible
    effects:
      - {kind: record_written, match: {patient: {param: patient}, kind: save}, count_new_only: true, risk: irreversible, timeout_s: 0}
  - step: confirm
    risk: irreversible
    after: [save]
    effects:
      - {kind: record_written, match: {patient: {param: patient}, kind: confirm}, count_new_only: true, risk: irreversible, timeout_s: 0}
`

// The runs page lists every run with its steps, each step linking its
// latest session with that session's outcome; a run's page shows its
// outcome, attempt and the reasons it is not VERIFIED.
func TestConsoleListsRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id, err := runs.For(f.mgr).BeginRun(ctx, runs.BeginRunRequest{Workflow: "intake-run", DeploymentName: "intake", Params: map[string]string{"patient": "p-run"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.mgr.Begin(ctx, session.BeginRequest{RunID: id, Step: "save"})
	if err != nil {
		t.Fatal(err)
	}
	f.tab.add(sdk.Record{"id": json.Number("900"), "patient": "p-run", "kind": "save", "ssn": ssn})
	if _, err := f.mgr.Verify(ctx, b.SessionID); err != nil {
		t.Fatal(err)
	}

	code, page := f.get(t, "GET", "/console/runs", true)
	if code != http.StatusOK {
		t.Fatalf("GET /console/runs: %d", code)
	}
	for _, want := range []string{
		`<a href="/console/runs/` + id + `"><code>` + id + `</code></a>`,
		`save: <a class="VERIFIED" href="/console/sessions/` + b.SessionID + `">VERIFIED</a>`,
		`confirm: <span class="note">not begun</span>`,
		`<span class="PENDING">open</span>`,
		"intake-run",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the runs page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, ssn) {
		t.Error("the runs page shows a redacted value")
	}

	// Finished with confirm never begun: something landed, so the run
	// needs reconciling.
	if v, err := runs.For(f.mgr).FinishRun(ctx, id); err != nil || v.Outcome != "RECONCILIATION_REQUIRED" {
		t.Fatalf("FinishRun = %+v, %v; want RECONCILIATION_REQUIRED", v, err)
	}
	code, page = f.get(t, "GET", "/console/runs/"+id, true)
	if code != http.StatusOK {
		t.Fatalf("GET /console/runs/%s: %d", id, code)
	}
	for _, want := range []string{`<span class="RECONCILIATION_REQUIRED">RECONCILIATION_REQUIRED</span> (attempt 1)`, "<code>step_not_begun</code>", "/console/sessions/" + b.SessionID} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %s:\n%s", want, page)
		}
	}
	if _, page = f.get(t, "GET", "/console/runs", true); !strings.Contains(page, `<span class="RECONCILIATION_REQUIRED">RECONCILIATION_REQUIRED</span>`) {
		t.Errorf("the runs page does not show the sealed outcome:\n%s", page)
	}
	if code, _ := f.get(t, "GET", "/console/runs/run_nope", true); code != http.StatusNotFound {
		t.Errorf("an unknown run: %d, want 404", code)
	}
	for _, m := range []string{"POST", "DELETE"} {
		if code, _ := f.get(t, m, "/console/runs/"+id, true); code != http.StatusMethodNotAllowed {
			t.Errorf("%s a run page: %d, want 405", m, code)
		}
	}
	if code, _ := f.get(t, "GET", "/console/runs", false); code != http.StatusUnauthorized {
		t.Errorf("GET /console/runs without the token: %d, want 401", code)
	}
}
