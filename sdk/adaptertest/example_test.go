package adaptertest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

type exampleAdapter struct{}

// ledgerOptions is what the example's section holds under options:.
type ledgerOptions struct {
	Path  string `json:"path"`
	Payee string `json:"payee"` // bound from the run's option_params
}

func (exampleAdapter) Info() sdk.Info {
	return sdk.Info{Kind: "ledger", Tier: sdk.TierIndependentSystem}
}

func (exampleAdapter) Configure(_ context.Context, req sdk.ConfigureRequest) error {
	var sec sdk.Section[ledgerOptions]
	if err := json.Unmarshal(req.Config, &sec); err != nil {
		return &refusal.Error{Message: err.Error()}
	}
	// The slot the section declares as secret_env: {password: ...}.
	_, err := req.RequireSecret("password")
	return err
}
func (exampleAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true}, nil
}
func (a exampleAdapter) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.CaptureAfter(ctx, req)
}
func (exampleAdapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: sdk.Records()}, nil
}

// An adapter package qualifies its adapter with one test: Run shows it
// every hazard (an empty read, a write for another entity, a double
// submit, a stale row, a late write, an outage, a large read, a crash
// mid-stream, several instances in one process) through the real plugin
// client. The adapter is configured from a deployment section and an
// environment, resolved by the daemon's own code, so it receives exactly
// what the daemon sends (options with option_params bound, the secret
// under its slot). The hooks drive the system of record the adapter reads;
// Params are the run parameters every call carries, which the kit also
// replaces by missing, empty, wildcard and injection-shaped values.
func ExampleRun() {
	deployment := func(password string) adaptertest.Deployment {
		return adaptertest.Deployment{
			YAML: `
effects:
  kind: ledger
  options: {path: /srv/ledger.csv}
  option_params: {payee: {param: payee}}
  secret_env: {password: LEDGER_PASSWORD}
`,
			Env: map[string]string{"LEDGER_PASSWORD": password},
		}
	}
	qualify := func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Harness{
			Factory:       func() sdk.Adapter { return exampleAdapter{} },
			Params:        map[string]string{"payee": "ACME"},
			Deployment:    func(*testing.T) adaptertest.Deployment { return deployment("right-password") },
			BadDeployment: func(*testing.T) adaptertest.Deployment { return deployment("wrong-password") },
			Selector:      map[string]string{"payee": "ACME"},
			// Reset, WriteCorrect, WriteWrongEntity, WriteDuplicate,
			// WriteStale, WriteLater, SetReachable and SeedMany write to
			// and break the system of record; every one is required.
		})
	}
	_ = qualify // in a _test.go file: func TestQualification(t *testing.T) { qualify(t) }
}

// A package's own tests read through the same client as the daemon:
// InProcess (or Configured) serves the adapter in process, Request builds a
// capture request, Capture reads it whole.
func ExampleReadAll() {
	test := func(t *testing.T) {
		params := map[string]string{"payee": "ACME"}
		req := adaptertest.Deployment{
			YAML: "effects: {kind: ledger, options: {path: /srv/ledger.csv}, secret_env: {password: LEDGER_PASSWORD}}",
			Env:  map[string]string{"LEDGER_PASSWORD": "s3cret-password"},
		}.Request(t, params)
		in := adaptertest.Configured(t, func() sdk.Adapter { return exampleAdapter{} }, req, params)
		read := adaptertest.Request(map[string]string{"payee": "ACME"})
		read.Timeout = 10 * time.Second
		capt, records := adaptertest.ReadAll(t, in, true, read)
		if !capt.Reachable || len(records) != 0 {
			t.Errorf("read %v", records)
		}
	}
	_ = test
}
