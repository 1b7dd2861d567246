package adaptertest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

type exampleAdapter struct{}

func (exampleAdapter) Info() sdk.Info {
	return sdk.Info{Kind: "ledger", Tier: sdk.TierIndependentSystem}
}
func (exampleAdapter) Configure(context.Context, sdk.ConfigureRequest) error { return nil }
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
// client. The hooks drive the system of record the adapter reads; Params
// are the run parameters every call carries.
func ExampleRun() {
	qualify := func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Harness{
			Factory: func() sdk.Adapter { return exampleAdapter{} },
			Params:  map[string]string{"payee": "ACME"},
			Config: func(*testing.T) sdk.ConfigureRequest {
				return sdk.ConfigureRequest{Kind: "ledger", Config: json.RawMessage(`{"path":"/srv/ledger.csv"}`)}
			},
			BadCredentials: func(*testing.T) sdk.ConfigureRequest {
				return sdk.ConfigureRequest{Kind: "ledger", Config: json.RawMessage(`{"path":"/srv/unreadable.csv"}`)}
			},
			Selector: map[string]string{"payee": "ACME"},
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
		in := adaptertest.Configured(t, func() sdk.Adapter { return exampleAdapter{} },
			sdk.ConfigureRequest{Kind: "ledger", Config: json.RawMessage(`{}`)},
			map[string]string{"payee": "ACME"})
		req := adaptertest.Request(map[string]string{"payee": "ACME"})
		req.Timeout = 10 * time.Second
		capt, records := adaptertest.ReadAll(t, in, true, req)
		if !capt.Reachable || len(records) != 0 {
			t.Errorf("read %v", records)
		}
	}
	_ = test
}
