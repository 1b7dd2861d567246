package httprecords

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// Setup is what the daemon sends for a section: the ConfigureRequest, and
// the run parameters every later call carries.
type Setup struct {
	Req    sdk.ConfigureRequest
	Params map[string]string
}

// Request is the setup the daemon would send for a section.
func Request(t testing.TB, kind string, sec map[string]any, params, secrets map[string]string) Setup {
	t.Helper()
	raw, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	return Setup{Req: sdk.ConfigureRequest{Kind: kind, Config: raw, Secrets: secrets}, Params: params}
}

// Process is an adapter served in process for the test's lifetime; its
// Configure takes a Setup.
type Process struct{ *adaptertest.Instance }

// InProcess serves factory's adapter in process for the test's lifetime.
func InProcess(t testing.TB, factory func() sdk.Adapter) *Process {
	t.Helper()
	return &Process{adaptertest.InProcess(t, factory)}
}

// Configure configures an instance and binds the run parameters (without
// reading): a refusal from either is a *refusal.Error.
func (p *Process) Configure(ctx context.Context, s Setup) error {
	return p.Setup(ctx, s.Req, s.Params)
}

// Capture reads once (after or before) and collects the whole read; the
// error is the stream's (an incomplete read), a failed call fails the test.
func Capture(t testing.TB, c *Process, after bool, timeout time.Duration, identityField string) (Read, error) {
	t.Helper()
	call := c.CaptureBefore
	if after {
		call = c.CaptureAfter
	}
	capt, err := call(t.Context(), sdk.CaptureRequest{CaptureID: "test", Timeout: timeout, IdentityField: identityField, EffectKind: "record_written"})
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	recs, err := capt.Records()
	return Read{Reachable: capt.Reachable, Reason: capt.Reason, Code: capt.Code, Records: recs}, err
}
