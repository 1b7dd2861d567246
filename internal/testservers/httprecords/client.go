package httprecords

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/plugin"
)

// Request is the ConfigureRequest the daemon would send for a section.
func Request(t testing.TB, kind string, sec map[string]any, params, secrets map[string]string) sdk.ConfigureRequest {
	t.Helper()
	raw, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	return sdk.ConfigureRequest{Kind: kind, Config: raw, Params: params, Secrets: secrets}
}

// InProcess serves factory's adapter in process for the test's lifetime.
func InProcess(t testing.TB, factory func() sdk.Adapter) *plugin.InProcess {
	t.Helper()
	ip, err := plugin.NewInProcess(factory, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ip.Close() })
	return ip
}

// Capture reads once (after or before) and collects the whole read; the
// error is the stream's (an incomplete read), a failed call fails the test.
func Capture(t testing.TB, c plugin.Client, after bool, timeout time.Duration, identityField string) (Read, error) {
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
	return Read{Reachable: capt.Reachable, Reason: capt.Reason, Records: recs}, err
}
