package uireadback

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// shared is the one Chromium process the package's tests read through; each
// read-back still gets a brand-new browser context in it.
var shared *Browser

// pluginBinary is verifier-adapter-ui_readback, built once by TestMain.
var pluginBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	path, cleanup, err := adaptertest.BuildPlugin("github.com/verifierd/verifierd/cmd/plugins/ui_readback", Kind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginBinary = path
	shared = NewBrowser(BrowserOptions{IdleTimeout: -1})
	code := m.Run()
	shared.Close()
	cleanup()
	os.Exit(code)
}

// The environment variable names a deployment gives, and the secret slots
// the daemon fills from them.
const (
	userEnv     = "UIRB_USER"
	passwordEnv = "UIRB_PASSWORD"
)

// needChromium stops a test that reads through a browser when Chromium is
// not installed (testservers.Missing: a skip, or a failure in CI).
func needChromium(t testing.TB) {
	t.Helper()
	for _, p := range ExecPaths {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	testservers.Missing(t, "Chromium", "apt-get install chromium")
}

// app is a running record application for one test.
type app struct {
	*recordapp.App
	URL string
}

func startApp(t testing.TB) *app {
	t.Helper()
	needChromium(t)
	s, err := recordapp.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &app{App: s.App, URL: s.URL}
}

// section is the deployment section the tests use, as the daemon passes it:
// the kit's example, pointed at the test application.
func (a *app) section() map[string]any {
	return map[string]any{
		"kind": Kind,
		"ui_readback": map[string]any{
			"record_url": a.URL + "/patients/{patient}/encounters",
			"url_params": map[string]any{"patient": map[string]any{"param": "patient_id"}},
			"sign_in": map[string]any{
				"url":                a.URL + "/login",
				"username_selector":  "#username",
				"password_selector":  "#password",
				"submit_selector":    "button[type=submit]",
				"signed_in_selector": "#user-menu",
				"username_env":       userEnv,
				"password_env":       passwordEnv,
			},
			"ready_selector":     "#encounters",
			"empty_selector":     "#no-encounters",
			"not_found_selector": "#not-found",
			"row_selector":       "tr.encounter",
			"fields": map[string]any{
				"id":   map[string]any{"attribute": "data-id"},
				"type": map[string]any{"selector": "td.type", "casefold": true},
				"date": map[string]any{"selector": "td.date", "date_format": "%d/%m/%Y"},
				"note": map[string]any{"selector": "td.note"},
			},
			"identity": map[string]any{
				"reader": map[string]any{"selector": "#patient-mrn"},
				"value":  map[string]any{"param": "patient_id"},
				"field":  "patient_id",
			},
			"navigation_timeout_s": 5,
		},
	}
}

// inner returns the ui_readback map of a section, for edits.
func inner(sec map[string]any) map[string]any { return sec["ui_readback"].(map[string]any) }

// request is a ConfigureRequest for sec and the patient, with the reader's
// credentials (or the given password).
func request(t testing.TB, sec map[string]any, patient, password string) setup {
	t.Helper()
	raw, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	return setup{ConfigureRequest: sdk.ConfigureRequest{
		Kind:    Kind,
		Config:  raw,
		Secrets: map[string]string{usernameSlot: recordapp.ReaderUser, passwordSlot: password},
	}, Params: map[string]string{"patient_id": patient}}
}

// setup is a ConfigureRequest and the run parameters every call carries.
type setup struct {
	sdk.ConfigureRequest
	Params map[string]string
}

// adapterClient runs the adapter in process behind the SDK's plugin client,
// on the shared browser, configured with req.
func adapterClient(t testing.TB, req setup) *adaptertest.Instance {
	t.Helper()
	return adapterClientWith(t, req, NewWithBrowser(shared))
}

func adapterClientWith(t testing.TB, req setup, factory func() sdk.Adapter) *adaptertest.Instance {
	t.Helper()
	ip := adaptertest.InProcess(t, factory)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ip.Setup(ctx, req.ConfigureRequest, req.Params); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return ip
}

// read is one capture's outcome.
type read struct {
	Reachable bool
	Reason    string
	Code      string // an unreachable read's code (sdk.Capture.Code)
	Records   []sdk.Record
}

// capture reads once through c (after = CaptureAfter) within timeout.
func capture(t testing.TB, c *adaptertest.Instance, after bool, timeout time.Duration) read {
	t.Helper()
	r, err := tryCapture(c, after, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryCapture is capture for goroutines other than the test's.
func tryCapture(c *adaptertest.Instance, after bool, timeout time.Duration) (read, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := sdk.CaptureRequest{CaptureID: "test", IdentityField: "id", Timeout: timeout, EffectKind: "record_written"}
	call := c.CaptureBefore
	if after {
		call = c.CaptureAfter
	}
	capt, err := call(ctx, req)
	if err != nil {
		return read{}, fmt.Errorf("capture: %w", err)
	}
	recs, err := capt.Records()
	if err != nil {
		return read{}, fmt.Errorf("capture records: %w", err)
	}
	return read{Reachable: capt.Reachable, Reason: capt.Reason, Code: capt.Code, Records: recs}, nil
}

// withHooks is the adapter's factory on the shared browser with the guards h
// switches off.
func withHooks(h hooks) func() sdk.Adapter {
	return define(func() *Browser { return shared }, h)
}

// patience is how long a test may wait for a read on a loaded machine: up
// to a minute before the test's own deadline (go test -timeout), or ten
// minutes without one.
func patience(t testing.TB) time.Time {
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, has := dl.Deadline(); has {
			return d.Add(-time.Minute)
		}
	}
	return time.Now().Add(10 * time.Minute)
}

// timedOut reports whether an unusable read's reason is its deadline
// passing: the adapter's safe answer on a loaded machine, not the answer
// under test.
func timedOut(r read) bool {
	return !r.Reachable && strings.Contains(r.Reason, "timed out")
}

// readAttempts bounds patientCapture: a 20 s read is given 40, 80 and
// 160 s more.
const readAttempts = 4

// patientCapture is tryCapture for a read whose answer is not a timeout: a
// read that answered that its deadline passed (or whose call was cut off
// by it) is made again with twice the timeout, while the test's deadline
// (patience) allows, readAttempts times at most. Any other answer, right or
// wrong, is returned as it is, and so is the last timeout.
func patientCapture(t testing.TB, c *adaptertest.Instance, after bool, timeout time.Duration) (read, error) {
	for attempt := 1; ; attempt++ {
		r, err := tryCapture(c, after, timeout)
		cutOff := err != nil && (errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "context deadline exceeded"))
		if !cutOff && (err != nil || !timedOut(r)) {
			return r, err
		}
		if attempt == readAttempts || time.Now().Add(2*timeout).After(patience(t)) {
			return r, err
		}
		t.Logf("a read timed out within %v on a loaded machine (%v %q); reading again within %v", timeout, err, r.Reason, 2*timeout)
		timeout *= 2
	}
}

// mustPatientCapture is patientCapture that fails the test on a call error.
func mustPatientCapture(t testing.TB, c *adaptertest.Instance, after bool, timeout time.Duration) read {
	t.Helper()
	r, err := patientCapture(t, c, after, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
